// Package store is billrun's document store: a small, Firestore-shaped interface
// (documents addressed by slash paths, serialisable transactions, ordered queries
// with cursors, count/sum aggregations) with two backends: Firestore itself
// (subpackage firestoredb) and an embedded, crash-safe file store for local runs
// (subpackage embedded). The billing and vault packages write their domain
// operations once, on top of this interface, so both backends run the same logic.
package store

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors. Every backend maps its own errors onto these, so callers check
// them with errors.Is whatever the backend.
var (
	// ErrNotFound: the document does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrAlreadyExists: Create found the document already there.
	ErrAlreadyExists = errors.New("store: already exists")
	// ErrConflict: a transaction lost to a concurrent one and its retries ran out,
	// or a precondition failed. Safe to retry the whole operation.
	ErrConflict = errors.New("store: conflict")
	// ErrUnavailable: the backend could not be reached or timed out. Transient.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrInvalid: the request is malformed (bad path, unsupported value type,
	// a read after a write inside a transaction, more than MaxWrites writes).
	ErrInvalid = errors.New("store: invalid request")
)

// MaxWrites is the most writes one transaction may hold (Firestore's limit).
const MaxWrites = 500

// Data is a document's fields. Values are limited to: nil, bool, int64, float64,
// string, []byte, time.Time (stored in UTC, microsecond precision, as Firestore
// does), []any and map[string]any of these. Go ints must be converted to int64 by
// the caller; backends return exactly these types.
type Data = map[string]any

// Doc is one document read from the store.
type Doc struct {
	// Path is the full slash path, e.g. "runs/2026-10/charges/cus_1".
	Path string
	// Data holds the fields.
	Data Data
	// UpdateTime is when the document was last written (backend clock).
	UpdateTime time.Time
}

// ID returns the last element of the document's path.
func (d Doc) ID() string {
	for i := len(d.Path) - 1; i >= 0; i-- {
		if d.Path[i] == '/' {
			return d.Path[i+1:]
		}
	}
	return d.Path
}

// Op is a query filter operator.
type Op string

// Filter operators, with Firestore's meaning.
const (
	OpEq  Op = "=="
	OpNe  Op = "!="
	OpLt  Op = "<"
	OpLte Op = "<="
	OpGt  Op = ">"
	OpGte Op = ">="
	OpIn  Op = "in" // Value is []any
)

// Filter keeps documents whose Field compares to Value with Op, with Firestore's
// meaning: a document lacking Field never matches; range operators (<, <=, >,
// >=) only match values of the same kind as Value (numbers with numbers, strings
// with strings…); != also excludes null; int64 and float64 compare by value.
// Field may be a dotted path into nested maps ("plan.amount").
type Filter struct {
	Field string
	Op    Op
	Value any
}

// Query selects documents of one collection.
type Query struct {
	// Collection is the parent document path plus the collection id, e.g.
	// "customers" or "runs/2026-10/charges".
	Collection string
	// Filters are ANDed.
	Filters []Filter
	// OrderBy is a field name (or dotted path), or "" for document id order.
	// Documents lacking the field are not returned (as in Firestore); documents
	// with equal values are ordered by id. Values of different kinds follow
	// Firestore's order: null, bool, numbers, timestamps, strings, bytes,
	// lists, maps. As in Firestore, range and != filters may only be on one
	// field, and a Query using them must order by that field (Aggregate need not).
	OrderBy string
	// Desc reverses the order (ties by id are reversed too). It needs OrderBy:
	// Firestore does not scan document ids backwards.
	Desc bool
	// StartAfter, when non-nil, is a cursor: the OrderBy value (or document id
	// when OrderBy is "") after which results start. With OrderBy set, every
	// document with that value is skipped unless StartAfterID is set too.
	StartAfter any
	// StartAfterID, with OrderBy and StartAfter, completes the cursor: results
	// start after the document (StartAfter, StartAfterID), so paging by a field
	// whose values repeat neither skips nor repeats documents.
	StartAfterID string
	// Limit caps the number of results; 0 means no limit.
	Limit int
}

// Aggregate is the result of an aggregation query.
type Aggregate struct {
	Count int64
	// Sums holds the sum of each requested integer field over matching documents
	// (documents lacking the field, or holding a non-number, contribute nothing;
	// a float64 among the values, or an overflow, is ErrInvalid).
	Sums map[string]int64
}

// Reader reads documents.
type Reader interface {
	Get(ctx context.Context, path string) (Doc, error)
	Query(ctx context.Context, q Query) ([]Doc, error)
}

// Tx is one transaction. As in Firestore, every read must come before the first
// write; backends return ErrInvalid otherwise, so a local run catches what would
// fail in the cloud. Writes become visible only when the transaction commits.
type Tx interface {
	Reader
	// Create writes a new document; ErrAlreadyExists if it exists at commit.
	Create(path string, data Data) error
	// Set replaces a document, creating it if needed.
	Set(path string, data Data) error
	// Update merges top-level fields into an existing document; ErrNotFound if
	// it does not exist. Each key is one field name (a dot in it is not a path),
	// and a map value replaces the field whole. At least one field is required.
	Update(path string, fields Data) error
	// Delete removes a document; deleting a missing one is not an error.
	Delete(path string) error
}

// Backend is a document store.
type Backend interface {
	Reader
	// Aggregate counts the documents matching q (OrderBy, StartAfter and Limit
	// are ignored) and sums the given integer fields over them. Count includes
	// documents lacking a summed field.
	Aggregate(ctx context.Context, q Query, sumFields ...string) (Aggregate, error)
	// RunTransaction runs fn in a serialisable transaction and commits it. fn may
	// be called more than once (on contention), so it must have no side effects
	// outside tx. An error returned by fn aborts the transaction and is returned
	// unchanged (wrapped errors keep errors.Is). A transaction started inside
	// fn (with fn's ctx) is ErrInvalid: use the outer tx.
	RunTransaction(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error
	// Close releases the backend's resources.
	Close() error
}
