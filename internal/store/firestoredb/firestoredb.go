// Package firestoredb is billrun's Cloud Firestore backend. Paths map directly
// onto Firestore's (runs/2026-10/charges/cus_1 is a document in the charges
// subcollection of runs/2026-10), transactions are Firestore transactions
// (retried by the client on contention), and Aggregate is a server-side
// aggregation query, so run totals are summed from the charge records rather
// than kept in a counter document every charge would have to write.
package firestoredb

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/store/internal/docmodel"
)

// DefaultMaxAttempts is how many times a transaction is tried before
// RunTransaction gives up with store.ErrConflict. Firestore's client default
// is 5, which a few writers contending for one run record can exhaust.
const DefaultMaxAttempts = 15

// DB is a Firestore document store.
type DB struct {
	client      *firestore.Client
	maxAttempts int
}

var _ store.Backend = (*DB)(nil)

// New connects to Firestore's default database in projectID, or to the
// emulator named by FIRESTORE_EMULATOR_HOST when that is set.
func New(ctx context.Context, projectID string) (*DB, error) {
	client, err := firestore.NewClient(ctx, projectID)
	if err != nil {
		return nil, mapErr(ctx, "firestoredb: connect", err)
	}
	return NewFromClient(client), nil
}

// NewFromClient wraps an existing client; Close closes it.
func NewFromClient(client *firestore.Client) *DB {
	return &DB{client: client, maxAttempts: DefaultMaxAttempts}
}

// Close closes the client.
func (d *DB) Close() error {
	if err := d.client.Close(); err != nil {
		return fmt.Errorf("firestoredb: close: %w", err)
	}
	return nil
}

// Get reads one document.
func (d *DB) Get(ctx context.Context, path string) (store.Doc, error) {
	return get(ctx, path, func(ref *firestore.DocumentRef) (*firestore.DocumentSnapshot, error) {
		return ref.Get(ctx)
	}, d.client)
}

// Query runs q.
func (d *DB) Query(ctx context.Context, q store.Query) ([]store.Doc, error) {
	return query(ctx, d.client, q, func(fq firestore.Query) *firestore.DocumentIterator {
		return fq.Documents(ctx)
	})
}

// Aggregate counts the documents matching q and sums sumFields over them,
// with aggregation queries evaluated by Firestore. The count and each sum are
// separate queries, because Firestore restricts a multi-aggregation query to
// the documents holding every summed field (a pending charge without an amount
// would vanish from the count); one read-only transaction gives them one
// consistent snapshot.
func (d *DB) Aggregate(ctx context.Context, q store.Query, sumFields ...string) (store.Aggregate, error) {
	op := "firestoredb: aggregate " + q.Collection
	q, err := docmodel.CheckQuery(q, true)
	if err == nil {
		err = docmodel.CheckSums(sumFields)
	}
	if err != nil {
		return store.Aggregate{}, fmt.Errorf("%s: %w", op, err)
	}
	fq := buildQuery(d.client, q, true)
	var agg store.Aggregate
	err = d.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		agg = store.Aggregate{Sums: make(map[string]int64, len(sumFields))}
		res, err := fq.NewAggregationQuery().WithCount("v").Transaction(tx).Get(ctx)
		if err != nil {
			return err
		}
		if agg.Count, err = intResult(res, "count"); err != nil {
			return err
		}
		for _, f := range sumFields {
			res, err := fq.NewAggregationQuery().WithSumPath(fieldPath(f), "v").Transaction(tx).Get(ctx)
			if err != nil {
				return err
			}
			if agg.Sums[f], err = intResult(res, fmt.Sprintf("sum of %q", f)); err != nil {
				return err
			}
		}
		return nil
	}, firestore.ReadOnly)
	if err != nil {
		if errors.Is(err, store.ErrInvalid) {
			return store.Aggregate{}, fmt.Errorf("%s: %w", op, err)
		}
		return store.Aggregate{}, mapErr(ctx, op, err)
	}
	return agg, nil
}

// intResult extracts an aggregation's integer answer. Firestore answers a
// double when a summed value is a double or the integer sum overflows; amounts
// are integers, so both are errors.
func intResult(res firestore.AggregationResult, what string) (int64, error) {
	v := res.Data()["v"]
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("%w: %s is %v (%T), not an int64", store.ErrInvalid, what, v, v)
	}
	return n, nil
}

// RunTransaction runs fn in a Firestore transaction, which the client retries
// when it loses to a concurrent one (up to DefaultMaxAttempts).
func (d *DB) RunTransaction(ctx context.Context, fn func(ctx context.Context, tx store.Tx) error) error {
	const op = "firestoredb: transaction"
	txCtx, err := docmodel.EnterTx(ctx, op)
	if err != nil {
		return err
	}
	var fnErr error
	// fn's ctx derives from txCtx, so a RunTransaction inside fn is refused.
	err = d.client.RunTransaction(txCtx, func(ctx context.Context, ftx *firestore.Transaction) error {
		t := &txn{client: d.client, ftx: ftx}
		if fnErr = fn(ctx, t); fnErr != nil {
			return fnErr
		}
		return t.guard.Err()
	}, firestore.MaxAttempts(d.maxAttempts))
	switch {
	case err == nil:
		return nil
	case err == fnErr, errors.Is(err, store.ErrInvalid):
		// fn's own error is returned unchanged, as the interface promises.
		return err
	}
	return mapErr(ctx, op, err)
}

func fieldPath(dotted string) firestore.FieldPath {
	return strings.Split(dotted, ".")
}

func get(ctx context.Context, path string, read func(*firestore.DocumentRef) (*firestore.DocumentSnapshot, error), client *firestore.Client) (store.Doc, error) {
	op := "firestoredb: get " + path
	if _, _, err := docmodel.SplitDoc(path); err != nil {
		return store.Doc{}, fmt.Errorf("%s: %w", op, err)
	}
	snap, err := read(client.Doc(path))
	if err != nil {
		return store.Doc{}, mapErr(ctx, op, err)
	}
	return toDoc(op, path, snap)
}

func toDoc(op, path string, snap *firestore.DocumentSnapshot) (store.Doc, error) {
	data, err := docmodel.Normalize(snap.Data())
	if err != nil {
		return store.Doc{}, fmt.Errorf("%s: document holds a value billrun does not use: %w", op, err)
	}
	return store.Doc{Path: path, Data: data, UpdateTime: snap.UpdateTime.UTC()}, nil
}

func query(ctx context.Context, client *firestore.Client, q store.Query, run func(firestore.Query) *firestore.DocumentIterator) ([]store.Doc, error) {
	op := "firestoredb: query " + q.Collection
	q, err := docmodel.CheckQuery(q, false)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	snaps, err := run(buildQuery(client, q, false)).GetAll()
	if err != nil {
		return nil, mapErr(ctx, op, err)
	}
	docs := make([]store.Doc, len(snaps))
	for i, snap := range snaps {
		if docs[i], err = toDoc(op, q.Collection+"/"+snap.Ref.ID, snap); err != nil {
			return nil, err
		}
	}
	return docs, nil
}

// buildQuery translates a checked query. Ordering is always explicit, by the
// field and then the id, so cursors mean what store.Query says.
func buildQuery(client *firestore.Client, q store.Query, forAggregate bool) firestore.Query {
	fq := client.Collection(q.Collection).Query
	for _, f := range q.Filters {
		fq = fq.WherePath(fieldPath(f.Field), string(f.Op), f.Value)
	}
	if forAggregate {
		return fq
	}
	dir := firestore.Asc
	if q.Desc {
		dir = firestore.Desc
	}
	switch {
	case q.OrderBy == "":
		fq = fq.OrderBy(firestore.DocumentID, dir)
		if q.StartAfter != nil {
			fq = fq.StartAfter(q.StartAfter)
		}
	case q.StartAfterID != "":
		fq = fq.OrderByPath(fieldPath(q.OrderBy), dir).OrderBy(firestore.DocumentID, dir).StartAfter(q.StartAfter, q.StartAfterID)
	default:
		fq = fq.OrderByPath(fieldPath(q.OrderBy), dir)
		if q.StartAfter != nil {
			fq = fq.StartAfter(q.StartAfter)
		}
	}
	if q.Limit > 0 {
		fq = fq.Limit(q.Limit)
	}
	return fq
}

// mapErr maps gRPC and context errors onto the store's sentinels, keeping the
// original error in the chain (the client retries a wrapped Aborted too).
func mapErr(ctx context.Context, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%s: %w: %w", op, store.ErrUnavailable, err)
	}
	var sentinel error
	switch status.Code(err) {
	case codes.NotFound:
		sentinel = store.ErrNotFound
	case codes.AlreadyExists:
		sentinel = store.ErrAlreadyExists
	case codes.FailedPrecondition:
		// Also Firestore's answer to a query it cannot serve (a missing
		// composite index, an unsupported scan), which no retry will fix.
		sentinel = store.ErrConflict
		if msg := status.Convert(err).Message(); strings.Contains(msg, "index") || strings.Contains(msg, "not support") {
			sentinel = store.ErrInvalid
		}
	case codes.Aborted:
		sentinel = store.ErrConflict
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Canceled:
		sentinel = store.ErrUnavailable
	case codes.InvalidArgument, codes.OutOfRange:
		sentinel = store.ErrInvalid
	default:
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w: %w", op, sentinel, err)
}
