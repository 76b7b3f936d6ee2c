// Package embedded is billrun's local document store: one SQLite file (pure Go,
// modernc.org/sqlite, no cgo) in write-ahead-log mode, so it survives crashes and
// several processes can use it at once — a running `billrun serve` writes while
// `billrun status` reads live progress. Transactions take SQLite's write lock
// when they begin (BEGIN IMMEDIATE) and wait for it (busy timeout), so they are
// serialisable and never lose an update; queries are evaluated in Go with
// Firestore's semantics (internal/store/internal/docmodel).
package embedded

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/store/internal/docmodel"
)

const (
	// busyTimeout is how long an operation waits for another process's write
	// transaction before giving up with store.ErrConflict.
	busyTimeout = 10 * time.Second
	// maxDocBytes is Firestore's document size limit, applied to the encoded
	// document so the local store accepts nothing the cloud would refuse.
	maxDocBytes = 1 << 20
	// beginAttempts bounds the retries when the write lock stays busy.
	beginAttempts = 3
)

// schemaVersion is kept in SQLite's user_version, so a file written by a
// newer billrun is refused rather than misread.
const schemaVersion = 1

const schema = `
CREATE TABLE IF NOT EXISTS docs (
	collection  TEXT    NOT NULL, -- parent path + collection id, e.g. runs/2026-10/charges
	id          TEXT    NOT NULL,
	data        BLOB    NOT NULL, -- tagged JSON, see codec.go
	update_time INTEGER NOT NULL, -- Unix microseconds
	PRIMARY KEY (collection, id)
) WITHOUT ROWID;
PRAGMA user_version = 1; -- schemaVersion
`

// DB is an embedded document store backed by one SQLite file.
type DB struct {
	db *sql.DB
	// txSlot serialises this process's transactions, so they queue here rather
	// than polling SQLite's lock; other processes are held off by the lock itself.
	txSlot chan struct{}
}

var _ store.Backend = (*DB)(nil)

// Open opens (creating if needed) the store in the file at path, creating its
// directory too.
func Open(ctx context.Context, path string) (*DB, error) {
	if path == "" {
		return nil, fmt.Errorf("embedded: open: %w: empty path", store.ErrInvalid)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("embedded: open %s: %w", path, err)
	}
	// synchronous(FULL) fsyncs the WAL at every commit: a charge recorded as
	// settled must survive a power cut, not just a process crash.
	q := url.Values{}
	q.Add("_txlock", "immediate")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("embedded: open %s: %w", path, err)
	}
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, mapErr(ctx, fmt.Sprintf("embedded: open %s", path), err)
	}
	return &DB{db: db, txSlot: make(chan struct{}, 1)}, nil
}

func migrate(ctx context.Context, db *sql.DB) error {
	var version int
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return err
	}
	switch version {
	case schemaVersion:
		return nil
	case 0:
		// Idempotent, so processes opening a new file together all succeed.
		_, err := db.ExecContext(ctx, schema)
		return err
	}
	return fmt.Errorf("schema version %d; this billrun reads version %d", version, schemaVersion)
}

// Close closes the file.
func (d *DB) Close() error {
	if err := d.db.Close(); err != nil {
		return fmt.Errorf("embedded: close: %w", err)
	}
	return nil
}

// queryer is what reads need: the database, or a transaction.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Get reads one document.
func (d *DB) Get(ctx context.Context, path string) (store.Doc, error) {
	return get(ctx, d.db, path)
}

// Query runs q.
func (d *DB) Query(ctx context.Context, q store.Query) ([]store.Doc, error) {
	return query(ctx, d.db, q)
}

// Aggregate counts the documents matching q and sums sumFields over them.
func (d *DB) Aggregate(ctx context.Context, q store.Query, sumFields ...string) (store.Aggregate, error) {
	const op = "embedded: aggregate"
	q, err := docmodel.CheckQuery(q, true)
	if err == nil {
		err = docmodel.CheckSums(sumFields)
	}
	if err != nil {
		return store.Aggregate{}, fmt.Errorf("%s: %w", op, err)
	}
	agg := store.Aggregate{Sums: make(map[string]int64, len(sumFields))}
	for _, f := range sumFields {
		agg.Sums[f] = 0
	}
	err = scan(ctx, d.db, q.Collection, "", func(doc store.Doc) (bool, error) {
		if !docmodel.Matches(doc.Data, q.Filters) {
			return true, nil
		}
		agg.Count++
		for _, f := range sumFields {
			v, _ := docmodel.Lookup(doc.Data, f)
			switch x := v.(type) {
			case int64:
				s := agg.Sums[f] + x
				if (x > 0 && s < agg.Sums[f]) || (x < 0 && s > agg.Sums[f]) {
					return false, fmt.Errorf("%w: sum of %q overflows int64", store.ErrInvalid, f)
				}
				agg.Sums[f] = s
			case float64:
				return false, fmt.Errorf("%w: sum of %q meets a float64 in %s", store.ErrInvalid, f, doc.Path)
			}
		}
		return true, nil
	})
	if err != nil {
		return store.Aggregate{}, mapErr(ctx, op, err)
	}
	return agg, nil
}

func get(ctx context.Context, qr queryer, path string) (store.Doc, error) {
	op := "embedded: get " + path
	coll, id, err := docmodel.SplitDoc(path)
	if err != nil {
		return store.Doc{}, fmt.Errorf("%s: %w", op, err)
	}
	var (
		raw []byte
		ut  int64
	)
	err = qr.QueryRowContext(ctx, `SELECT data, update_time FROM docs WHERE collection = ? AND id = ?`, coll, id).Scan(&raw, &ut)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Doc{}, fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	if err != nil {
		return store.Doc{}, mapErr(ctx, op, err)
	}
	data, err := decode(raw)
	if err != nil {
		return store.Doc{}, fmt.Errorf("%s: %w", op, err)
	}
	return store.Doc{Path: path, Data: data, UpdateTime: time.UnixMicro(ut).UTC()}, nil
}

func query(ctx context.Context, qr queryer, q store.Query) ([]store.Doc, error) {
	op := "embedded: query " + q.Collection
	q, err := docmodel.CheckQuery(q, false)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var docs []store.Doc
	if q.OrderBy == "" {
		// Id order is the table's key order: let SQLite apply the cursor and
		// stop reading as soon as the page is full.
		after, _ := q.StartAfter.(string)
		err = scan(ctx, qr, q.Collection, after, func(doc store.Doc) (bool, error) {
			if docmodel.Matches(doc.Data, q.Filters) {
				docs = append(docs, doc)
			}
			return q.Limit == 0 || len(docs) < q.Limit, nil
		})
		if err != nil {
			return nil, mapErr(ctx, op, err)
		}
		return docs, nil
	}
	type keyed struct {
		doc store.Doc
		key any
	}
	var all []keyed
	err = scan(ctx, qr, q.Collection, "", func(doc store.Doc) (bool, error) {
		if v, ok := docmodel.Lookup(doc.Data, q.OrderBy); ok && docmodel.Matches(doc.Data, q.Filters) {
			all = append(all, keyed{doc, v})
		}
		return true, nil
	})
	if err != nil {
		return nil, mapErr(ctx, op, err)
	}
	dir := 1
	if q.Desc {
		dir = -1
	}
	// cmp orders by (value, id), both reversed when descending, as Firestore
	// does with its implicit order on the document name.
	cmp := func(v any, id string, w any, wid string) int {
		if c := docmodel.Compare(v, w); c != 0 {
			return dir * c
		}
		return dir * compareIDs(id, wid)
	}
	slices.SortFunc(all, func(a, b keyed) int { return cmp(a.key, a.doc.ID(), b.key, b.doc.ID()) })
	for _, k := range all {
		if q.StartAfter != nil {
			c := dir * docmodel.Compare(k.key, q.StartAfter)
			if c < 0 || (c == 0 && (q.StartAfterID == "" || cmp(k.key, k.doc.ID(), q.StartAfter, q.StartAfterID) <= 0)) {
				continue
			}
		}
		docs = append(docs, k.doc)
		if q.Limit > 0 && len(docs) == q.Limit {
			break
		}
	}
	return docs, nil
}

// compareIDs orders document ids as the table does (bytewise).
func compareIDs(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// scan calls fn on the documents of a collection in id order, starting after
// the id after if it is not empty, until fn returns false.
func scan(ctx context.Context, qr queryer, collection, after string, fn func(store.Doc) (bool, error)) error {
	stmt := `SELECT id, data, update_time FROM docs WHERE collection = ? AND id > ? ORDER BY id`
	args := []any{collection, after}
	rows, err := qr.QueryContext(ctx, stmt, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id  string
			raw []byte
			ut  int64
		)
		if err := rows.Scan(&id, &raw, &ut); err != nil {
			return err
		}
		data, err := decode(raw)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", collection, id, err)
		}
		more, err := fn(store.Doc{Path: collection + "/" + id, Data: data, UpdateTime: time.UnixMicro(ut).UTC()})
		if err != nil || !more {
			return err
		}
	}
	return rows.Err()
}

// mapErr maps SQLite and context errors onto the store's sentinels.
func mapErr(ctx context.Context, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%s: %w: %w", op, store.ErrUnavailable, ctxErr)
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return fmt.Errorf("%s: %w: database busy for over %v: %w", op, store.ErrConflict, busyTimeout, err)
		case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_NOMEM:
			return fmt.Errorf("%s: %w: %w", op, store.ErrUnavailable, err)
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}
