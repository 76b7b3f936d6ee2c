package firestoredb

import (
	"context"
	"fmt"

	"cloud.google.com/go/firestore"

	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/store/internal/docmodel"
)

// txn adapts a firestore.Transaction, checking requests as the embedded store
// does, so both backends refuse the same things with the same errors.
type txn struct {
	client *firestore.Client
	ftx    *firestore.Transaction
	guard  docmodel.Guard
}

var _ store.Tx = (*txn)(nil)

func (t *txn) Get(ctx context.Context, path string) (store.Doc, error) {
	if err := t.guard.Read("firestoredb: tx get " + path); err != nil {
		return store.Doc{}, err
	}
	return get(ctx, path, t.ftx.Get, t.client)
}

func (t *txn) Query(ctx context.Context, q store.Query) ([]store.Doc, error) {
	if err := t.guard.Read("firestoredb: tx query " + q.Collection); err != nil {
		return nil, err
	}
	return query(ctx, t.client, q, func(fq firestore.Query) *firestore.DocumentIterator {
		return t.ftx.Documents(fq)
	})
}

func (t *txn) Create(path string, data store.Data) error {
	return t.write("create", path, data, false, func(ref *firestore.DocumentRef, norm store.Data) error {
		return t.ftx.Create(ref, norm)
	})
}

func (t *txn) Set(path string, data store.Data) error {
	return t.write("set", path, data, false, func(ref *firestore.DocumentRef, norm store.Data) error {
		return t.ftx.Set(ref, norm)
	})
}

// Update replaces the named top-level fields; each name is one field path
// element, so a name containing a dot is not split.
func (t *txn) Update(path string, fields store.Data) error {
	return t.write("update", path, fields, true, func(ref *firestore.DocumentRef, norm store.Data) error {
		updates := make([]firestore.Update, 0, len(norm))
		for k, v := range norm {
			updates = append(updates, firestore.Update{FieldPath: firestore.FieldPath{k}, Value: v})
		}
		return t.ftx.Update(ref, updates)
	})
}

func (t *txn) Delete(path string) error {
	op := "firestoredb: tx delete " + path
	if err := t.guard.Write(op); err != nil {
		return err
	}
	if _, _, err := docmodel.SplitDoc(path); err != nil {
		return t.guard.Fail(fmt.Errorf("%s: %w", op, err))
	}
	if err := t.ftx.Delete(t.client.Doc(path)); err != nil {
		return t.guard.Fail(fmt.Errorf("%s: %w: %w", op, store.ErrInvalid, err))
	}
	return nil
}

func (t *txn) write(name, path string, data store.Data, isUpdate bool, do func(*firestore.DocumentRef, store.Data) error) error {
	op := "firestoredb: tx " + name + " " + path
	if err := t.guard.Write(op); err != nil {
		return err
	}
	_, _, norm, err := docmodel.CheckWrite(path, data, isUpdate)
	if err != nil {
		return t.guard.Fail(fmt.Errorf("%s: %w", op, err))
	}
	if err := do(t.client.Doc(path), norm); err != nil {
		return t.guard.Fail(fmt.Errorf("%s: %w: %w", op, store.ErrInvalid, err))
	}
	return nil
}
