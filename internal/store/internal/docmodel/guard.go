package docmodel

import (
	"context"
	"fmt"

	"billrun.dev/billrun/internal/store"
)

// Guard enforces the transaction rules every backend shares: reads before
// writes, at most store.MaxWrites writes, and a transaction that made an
// invalid request does not commit even if fn ignored the error.
type Guard struct {
	writes int
	err    error
}

// Fail records err as the transaction's failure (the first one wins) and
// returns it.
func (g *Guard) Fail(err error) error {
	if g.err == nil {
		g.err = err
	}
	return err
}

// Err is the error that must fail the commit, if any.
func (g *Guard) Err() error { return g.err }

// Read checks that a read may happen now.
func (g *Guard) Read(op string) error {
	if g.writes > 0 {
		return g.Fail(fmt.Errorf("%s: %w: read after write in a transaction", op, store.ErrInvalid))
	}
	return nil
}

// Write counts one write, refusing the one beyond store.MaxWrites.
func (g *Guard) Write(op string) error {
	if g.writes >= store.MaxWrites {
		return g.Fail(fmt.Errorf("%s: %w: more than %d writes in one transaction", op, store.ErrInvalid, store.MaxWrites))
	}
	g.writes++
	return nil
}

// CheckWrite validates a create, set or update and returns the document's
// collection, id and normalised data. An update must name at least one field,
// as Firestore requires.
func CheckWrite(path string, data store.Data, isUpdate bool) (collection, id string, norm store.Data, err error) {
	if collection, id, err = SplitDoc(path); err != nil {
		return "", "", nil, err
	}
	if isUpdate && len(data) == 0 {
		return "", "", nil, invalid("update of %s names no field", path)
	}
	if norm, err = Normalize(data); err != nil {
		return "", "", nil, err
	}
	return collection, id, norm, nil
}

// CheckSums validates the fields an aggregation sums.
func CheckSums(fields []string) error {
	for _, f := range fields {
		if err := checkField(f); err != nil {
			return err
		}
	}
	return nil
}

type inTxKey struct{}

// EnterTx marks ctx as belonging to a running transaction, or reports
// ErrInvalid if it already does: a transaction started inside another would
// deadlock on the embedded store's lock, and Firestore's client refuses it.
func EnterTx(ctx context.Context, op string) (context.Context, error) {
	if ctx.Value(inTxKey{}) != nil {
		return ctx, fmt.Errorf("%s: %w: a transaction inside another (use the outer tx)", op, store.ErrInvalid)
	}
	return context.WithValue(ctx, inTxKey{}, true), nil
}
