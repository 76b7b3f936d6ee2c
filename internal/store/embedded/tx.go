package embedded

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/store/internal/docmodel"
)

type writeKind int

const (
	writeCreate writeKind = iota
	writeSet
	writeUpdate
	writeDelete
)

// write is one buffered write; data is already encoded (or, for an update,
// normalised), so the caller may reuse its map after the call.
type write struct {
	kind       writeKind
	path       string
	collection string
	id         string
	encoded    []byte
	fields     store.Data
}

// txn is a transaction in progress: reads go to SQLite, writes are buffered
// and applied at commit, as Firestore does.
type txn struct {
	ctx    context.Context
	sqlTx  *sql.Tx
	writes []write
	guard  docmodel.Guard
}

var _ store.Tx = (*txn)(nil)

// RunTransaction runs fn in a transaction holding the file's write lock, so it
// is serialisable and never has to retry on contention.
func (d *DB) RunTransaction(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	const op = "embedded: transaction"
	ctx, err := docmodel.EnterTx(ctx, op)
	if err != nil {
		return err
	}
	select {
	case d.txSlot <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%s: %w: %w", op, store.ErrUnavailable, ctx.Err())
	}
	defer func() { <-d.txSlot }()

	sqlTx, err := d.begin(ctx)
	if err != nil {
		return mapErr(ctx, op+": begin", err)
	}
	defer sqlTx.Rollback() // a no-op after Commit
	t := &txn{ctx: ctx, sqlTx: sqlTx}
	if err := fn(ctx, t); err != nil {
		return err
	}
	if err := t.guard.Err(); err != nil {
		return err
	}
	now := time.Now().UnixMicro()
	for _, w := range t.writes {
		if err := t.apply(w, now); err != nil {
			return err
		}
	}
	if err := sqlTx.Commit(); err != nil {
		return mapErr(ctx, op+": commit", err)
	}
	return nil
}

// begin starts a transaction (BEGIN IMMEDIATE, from the DSN), retrying when
// another process kept the write lock past the busy timeout.
func (d *DB) begin(ctx context.Context) (*sql.Tx, error) {
	var err error
	for range beginAttempts {
		var tx *sql.Tx
		if tx, err = d.db.BeginTx(ctx, nil); err == nil {
			return tx, nil
		}
		if mapped := mapErr(ctx, "", err); !errors.Is(mapped, store.ErrConflict) {
			return nil, err
		}
	}
	return nil, err
}

func (t *txn) Get(ctx context.Context, path string) (store.Doc, error) {
	if err := t.guard.Read("embedded: tx get " + path); err != nil {
		return store.Doc{}, err
	}
	return get(ctx, t.sqlTx, path)
}

func (t *txn) Query(ctx context.Context, q store.Query) ([]store.Doc, error) {
	if err := t.guard.Read("embedded: tx query " + q.Collection); err != nil {
		return nil, err
	}
	return query(ctx, t.sqlTx, q)
}

func (t *txn) Create(path string, data store.Data) error {
	return t.add(writeCreate, "create", path, data)
}

func (t *txn) Set(path string, data store.Data) error {
	return t.add(writeSet, "set", path, data)
}

func (t *txn) Update(path string, fields store.Data) error {
	return t.add(writeUpdate, "update", path, fields)
}

func (t *txn) Delete(path string) error {
	return t.add(writeDelete, "delete", path, nil)
}

func (t *txn) add(kind writeKind, name, path string, data store.Data) error {
	op := "embedded: tx " + name + " " + path
	if err := t.guard.Write(op); err != nil {
		return err
	}
	w := write{kind: kind, path: path}
	var err error
	if kind == writeDelete {
		w.collection, w.id, err = docmodel.SplitDoc(path)
	} else {
		var norm store.Data
		w.collection, w.id, norm, err = docmodel.CheckWrite(path, data, kind == writeUpdate)
		if err == nil && kind == writeUpdate {
			w.fields = norm
		} else if err == nil {
			w.encoded, err = encodeDoc(norm)
		}
	}
	if err != nil {
		return t.guard.Fail(fmt.Errorf("%s: %w", op, err))
	}
	t.writes = append(t.writes, w)
	return nil
}

func encodeDoc(d store.Data) ([]byte, error) {
	b, err := encode(d)
	if err != nil {
		return nil, err
	}
	if len(b) > maxDocBytes {
		return nil, fmt.Errorf("%w: document of %d bytes exceeds %d", store.ErrInvalid, len(b), maxDocBytes)
	}
	return b, nil
}

// apply performs one buffered write inside the SQLite transaction.
func (t *txn) apply(w write, now int64) error {
	ctx := t.ctx
	switch w.kind {
	case writeCreate:
		res, err := t.sqlTx.ExecContext(ctx, `INSERT INTO docs (collection, id, data, update_time) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			w.collection, w.id, w.encoded, now)
		if err != nil {
			return mapErr(ctx, "embedded: commit create "+w.path, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return mapErr(ctx, "embedded: commit create "+w.path, err)
		}
		if n == 0 {
			return fmt.Errorf("embedded: commit create %s: %w", w.path, store.ErrAlreadyExists)
		}
	case writeSet:
		_, err := t.sqlTx.ExecContext(ctx, `INSERT OR REPLACE INTO docs (collection, id, data, update_time) VALUES (?, ?, ?, ?)`,
			w.collection, w.id, w.encoded, now)
		if err != nil {
			return mapErr(ctx, "embedded: commit set "+w.path, err)
		}
	case writeUpdate:
		doc, err := get(ctx, t.sqlTx, w.path)
		if err != nil {
			return fmt.Errorf("embedded: commit update: %w", err)
		}
		for k, v := range w.fields {
			doc.Data[k] = v
		}
		enc, err := encodeDoc(doc.Data)
		if err != nil {
			return fmt.Errorf("embedded: commit update %s: %w", w.path, err)
		}
		if _, err := t.sqlTx.ExecContext(ctx, `UPDATE docs SET data = ?, update_time = ? WHERE collection = ? AND id = ?`,
			enc, now, w.collection, w.id); err != nil {
			return mapErr(ctx, "embedded: commit update "+w.path, err)
		}
	case writeDelete:
		if _, err := t.sqlTx.ExecContext(ctx, `DELETE FROM docs WHERE collection = ? AND id = ?`, w.collection, w.id); err != nil {
			return mapErr(ctx, "embedded: commit delete "+w.path, err)
		}
	}
	return nil
}
