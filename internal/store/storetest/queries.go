package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"billrun.dev/billrun/internal/store"
)

// seedItems writes documents whose field n covers every kind the queries must
// order and filter: null, ints, floats equal to ints, an int above 2^53, a
// string, and a document without n.
func seedItems(t *testing.T, b store.Backend) {
	t.Helper()
	items := map[string]store.Data{
		"a": {"n": int64(5), "s": "x", "tag": "red", "m": map[string]any{"k": int64(1)}},
		"b": {"n": int64(1), "s": "y", "tag": "blue", "m": map[string]any{"k": int64(2)}},
		"c": {"n": 2.0, "s": "z", "tag": "red"},
		"d": {"n": nil, "s": "w", "tag": "green"},
		"e": {"n": "str", "tag": "red"},
		"f": {"s": "v", "tag": "blue"},
		"g": {"n": int64(5), "s": "u", "tag": "red"},
		"h": {"n": int64(1<<53 + 1), "tag": "blue"},
		"i": {"n": 3.5},
	}
	err := b.RunTransaction(t.Context(), func(ctx context.Context, tx store.Tx) error {
		for id, d := range items {
			if err := tx.Set("items/"+id, d); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
}

func ids(docs []store.Doc) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = d.ID()
	}
	return out
}

func testQueries(t *testing.T, b store.Backend) {
	seedItems(t, b)
	f := func(field string, op store.Op, v any) store.Filter {
		return store.Filter{Field: field, Op: op, Value: v}
	}
	tests := []struct {
		name string
		q    store.Query
		want []string
	}{
		{"all in id order", store.Query{}, []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}},
		{"id cursor and limit", store.Query{StartAfter: "c", Limit: 2}, []string{"d", "e"}},
		{"equal", store.Query{Filters: []store.Filter{f("n", store.OpEq, int64(5))}}, []string{"a", "g"}},
		{"int equals float", store.Query{Filters: []store.Filter{f("n", store.OpEq, int64(2))}}, []string{"c"}},
		{"equal null", store.Query{Filters: []store.Filter{f("n", store.OpEq, nil)}}, []string{"d"}},
		{"in", store.Query{Filters: []store.Filter{f("n", store.OpIn, []any{int64(1), "str"})}}, []string{"b", "e"}},
		{"nested field", store.Query{Filters: []store.Filter{f("m.k", store.OpEq, int64(2))}}, []string{"b"}},
		{"equal and limit", store.Query{Filters: []store.Filter{f("tag", store.OpEq, "red")}, Limit: 2}, []string{"a", "c"}},
		{"order mixed kinds", store.Query{OrderBy: "n"}, []string{"d", "b", "c", "i", "a", "g", "h", "e"}},
		{"order mixed kinds desc", store.Query{OrderBy: "n", Desc: true}, []string{"e", "h", "g", "a", "i", "c", "b", "d"}},
		{"order and limit", store.Query{OrderBy: "n", Limit: 3}, []string{"d", "b", "c"}},
		{"greater: numbers only", store.Query{OrderBy: "n", Filters: []store.Filter{f("n", store.OpGt, int64(1))}}, []string{"c", "i", "a", "g", "h"}},
		{"greater or equal", store.Query{OrderBy: "n", Filters: []store.Filter{f("n", store.OpGte, 3.5)}}, []string{"i", "a", "g", "h"}},
		{"less: no null", store.Query{OrderBy: "n", Filters: []store.Filter{f("n", store.OpLt, int64(5))}}, []string{"b", "c", "i"}},
		{"less or equal desc", store.Query{OrderBy: "n", Desc: true, Filters: []store.Filter{f("n", store.OpLte, int64(5))}}, []string{"g", "a", "i", "c", "b"}},
		{"range both ends", store.Query{OrderBy: "n", Filters: []store.Filter{f("n", store.OpGt, int64(1)), f("n", store.OpLt, int64(5))}}, []string{"c", "i"}},
		{"not equal: no null, no missing", store.Query{OrderBy: "n", Filters: []store.Filter{f("n", store.OpNe, int64(5))}}, []string{"b", "c", "i", "h", "e"}},
		{"string range", store.Query{OrderBy: "n", Filters: []store.Filter{f("n", store.OpGte, "")}}, []string{"e"}},
		{"equality and range", store.Query{OrderBy: "n", Filters: []store.Filter{f("tag", store.OpEq, "red"), f("n", store.OpGt, int64(1))}}, []string{"c", "a", "g"}},
		{"equality and order", store.Query{OrderBy: "s", Filters: []store.Filter{f("tag", store.OpEq, "blue")}}, []string{"f", "b"}},
		{"cursor skips ties", store.Query{OrderBy: "n", StartAfter: int64(5)}, []string{"h", "e"}},
		{"cursor with id", store.Query{OrderBy: "n", StartAfter: int64(5), StartAfterID: "a"}, []string{"g", "h", "e"}},
		{"cursor with id desc", store.Query{OrderBy: "n", Desc: true, StartAfter: int64(5), StartAfterID: "g", Limit: 3}, []string{"a", "i", "c"}},
		{"cursor of another kind", store.Query{OrderBy: "n", StartAfter: false}, []string{"b", "c", "i", "a", "g", "h", "e"}},
		{"cursor float between ints", store.Query{OrderBy: "n", StartAfter: 1.5}, []string{"c", "i", "a", "g", "h", "e"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.q.Collection = "items"
			docs, err := b.Query(t.Context(), tc.q)
			if err != nil {
				t.Fatalf("query: %v", err)
			}
			if got := ids(docs); !reflect.DeepEqual(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}

	invalid := []struct {
		name string
		q    store.Query
	}{
		{"range without order", store.Query{Filters: []store.Filter{f("n", store.OpGt, int64(1))}}},
		{"range on two fields", store.Query{OrderBy: "n", Filters: []store.Filter{f("n", store.OpGt, int64(1)), f("s", store.OpLt, "z")}}},
		{"empty in", store.Query{Filters: []store.Filter{f("n", store.OpIn, []any{})}}},
		{"in without list", store.Query{Filters: []store.Filter{f("n", store.OpIn, int64(1))}}},
		{"unknown operator", store.Query{Filters: []store.Filter{f("n", "~=", int64(1))}}},
		{"id cursor not a string", store.Query{StartAfter: int64(3)}},
		{"negative limit", store.Query{Limit: -1}},
		{"descending id order", store.Query{Desc: true}},
		{"document path", store.Query{Collection: "items/a"}},
	}
	for _, tc := range invalid {
		t.Run("invalid "+tc.name, func(t *testing.T) {
			if tc.q.Collection == "" {
				tc.q.Collection = "items"
			}
			if _, err := b.Query(t.Context(), tc.q); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

func testQueryInTransaction(t *testing.T, b store.Backend) {
	seedItems(t, b)
	err := b.RunTransaction(t.Context(), func(ctx context.Context, tx store.Tx) error {
		docs, err := tx.Query(ctx, store.Query{Collection: "items", Filters: []store.Filter{{Field: "tag", Op: store.OpEq, Value: "blue"}}})
		if err != nil {
			return err
		}
		return tx.Set("summary/blue", store.Data{"count": int64(len(docs))})
	})
	if err != nil {
		t.Fatalf("transaction: %v", err)
	}
	if got := mustGet(t, b, "summary/blue").Data["count"]; got != int64(3) {
		t.Errorf("count = %v, want 3", got)
	}
}

// testPaging reads a collection page by page, by id and by a field whose
// values repeat, and expects every document exactly once, in order.
func testPaging(t *testing.T, b store.Backend) {
	const n = 25
	var wantByID, wantByGroup []string
	err := b.RunTransaction(t.Context(), func(ctx context.Context, tx store.Tx) error {
		for i := range n {
			if err := tx.Set(fmt.Sprintf("pages/p%02d", i), store.Data{"g": int64(i % 3)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	for i := range n {
		wantByID = append(wantByID, fmt.Sprintf("p%02d", i))
	}
	for g := range 3 {
		for i := g; i < n; i += 3 {
			wantByGroup = append(wantByGroup, fmt.Sprintf("p%02d", i))
		}
	}
	tests := []struct {
		name    string
		orderBy string
		size    int
		want    []string
	}{
		{"by id", "", 10, wantByID},
		{"by repeating field", "g", 4, wantByGroup},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			q := store.Query{Collection: "pages", OrderBy: tc.orderBy, Limit: tc.size}
			for pages := 0; ; pages++ {
				if pages > n {
					t.Fatalf("paging does not end: %v", got)
				}
				docs, err := b.Query(t.Context(), q)
				if err != nil {
					t.Fatalf("page %d: %v", pages, err)
				}
				got = append(got, ids(docs)...)
				if len(docs) < tc.size {
					break
				}
				last := docs[len(docs)-1]
				if tc.orderBy == "" {
					q.StartAfter = last.ID()
				} else {
					q.StartAfter, q.StartAfterID = last.Data[tc.orderBy], last.ID()
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func testSubcollections(t *testing.T, b store.Backend) {
	set(t, b, "runs/2026-10", store.Data{"state": "in_progress"})
	set(t, b, "runs/2026-10/charges/cus_1", store.Data{"amount": int64(100)})
	set(t, b, "runs/2026-10/charges/cus_2", store.Data{"amount": int64(200)})
	set(t, b, "runs/2026-11/charges/cus_3", store.Data{"amount": int64(300)})
	tests := []struct {
		collection string
		want       []string
	}{
		{"runs", []string{"2026-10"}},
		{"runs/2026-10/charges", []string{"cus_1", "cus_2"}},
		{"runs/2026-11/charges", []string{"cus_3"}},
		{"runs/2026-12/charges", nil},
	}
	for _, tc := range tests {
		t.Run(tc.collection, func(t *testing.T) {
			docs, err := b.Query(t.Context(), store.Query{Collection: tc.collection})
			if err != nil {
				t.Fatalf("query: %v", err)
			}
			if got := ids(docs); !reflect.DeepEqual(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if got := mustGet(t, b, "runs/2026-10/charges/cus_2").Path; got != "runs/2026-10/charges/cus_2" {
		t.Errorf("path = %q", got)
	}
}

func testAggregate(t *testing.T, b store.Backend) {
	charges := map[string]store.Data{
		"c1": {"state": "succeeded", "amount": int64(1000), "fee": int64(30)},
		"c2": {"state": "succeeded", "amount": int64(1 << 53), "fee": int64(1)},
		"c3": {"state": "declined", "amount": int64(500)},
		"c4": {"state": "pending"},
	}
	err := b.RunTransaction(t.Context(), func(ctx context.Context, tx store.Tx) error {
		for id, d := range charges {
			if err := tx.Set("runs/2026-10/charges/"+id, d); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	tests := []struct {
		name    string
		filters []store.Filter
		sums    []string
		want    store.Aggregate
	}{
		{"count all", nil, nil, store.Aggregate{Count: 4, Sums: map[string]int64{}}},
		{"sum with missing fields", nil, []string{"amount", "fee"},
			store.Aggregate{Count: 4, Sums: map[string]int64{"amount": 1<<53 + 1500, "fee": 31}}},
		{"filtered", []store.Filter{{Field: "state", Op: store.OpEq, Value: "succeeded"}}, []string{"amount"},
			store.Aggregate{Count: 2, Sums: map[string]int64{"amount": 1<<53 + 1000}}},
		{"range without order", []store.Filter{{Field: "amount", Op: store.OpLt, Value: int64(1000)}}, []string{"amount"},
			store.Aggregate{Count: 1, Sums: map[string]int64{"amount": 500}}},
		{"nothing matches", []store.Filter{{Field: "state", Op: store.OpEq, Value: "refunded"}}, []string{"amount"},
			store.Aggregate{Count: 0, Sums: map[string]int64{"amount": 0}}},
	}
	set(t, b, "floats/f1", store.Data{"amount": 1.5})
	if _, err := b.Aggregate(t.Context(), store.Query{Collection: "floats"}, "amount"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("sum over a float64: err = %v, want ErrInvalid", err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := b.Aggregate(t.Context(), store.Query{Collection: "runs/2026-10/charges", Filters: tc.filters}, tc.sums...)
			if err != nil {
				t.Fatalf("aggregate: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
