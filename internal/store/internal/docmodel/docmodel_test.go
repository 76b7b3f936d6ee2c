package docmodel

import (
	"errors"
	"math"
	"testing"
	"time"

	"billrun.dev/billrun/internal/store"
)

func TestCompare(t *testing.T) {
	t0 := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		a, b any
		want int
	}{
		{"null before bool", nil, false, -1},
		{"bool before number", true, int64(-1), -1},
		{"number before time", math.Inf(1), t0, -1},
		{"time before string", t0, "", -1},
		{"string before bytes", "z", []byte{}, -1},
		{"bytes before list", []byte{255}, []any{}, -1},
		{"list before map", []any{int64(1)}, map[string]any{}, -1},
		{"int equals float", int64(2), 2.0, 0},
		{"2^53+1 above float 2^53", int64(1<<53 + 1), float64(1 << 53), 1},
		{"max int64 below float 2^63", int64(math.MaxInt64), math.Pow(2, 63), -1},
		{"min int64 equals float -2^63", int64(math.MinInt64), -math.Pow(2, 63), 0},
		{"fraction above int", 2.5, int64(2), 1},
		{"negative fraction below int", -2.5, int64(-2), -1},
		{"NaN first among numbers", math.NaN(), math.Inf(-1), -1},
		{"NaN below int", math.NaN(), int64(math.MinInt64), -1},
		{"NaN equals NaN", math.NaN(), math.NaN(), 0},
		{"strings bytewise", "B", "a", -1},
		{"list prefix first", []any{int64(1)}, []any{int64(1), nil}, -1},
		{"list elementwise", []any{int64(2)}, []any{int64(1), nil}, 1},
		{"map by sorted keys", map[string]any{"a": int64(9)}, map[string]any{"b": int64(0)}, -1},
		{"map by value", map[string]any{"a": int64(1)}, map[string]any{"a": int64(2)}, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Compare(tc.a, tc.b); got != tc.want {
				t.Errorf("Compare(%v, %v) = %d, want %d", tc.a, tc.b, got, tc.want)
			}
			if got := Compare(tc.b, tc.a); got != -tc.want {
				t.Errorf("Compare(%v, %v) = %d, want %d", tc.b, tc.a, got, -tc.want)
			}
		})
	}
}

func TestNormalizeRejects(t *testing.T) {
	tests := []struct {
		name string
		data store.Data
	}{
		{"go int", store.Data{"n": 1}},
		{"int32", store.Data{"n": int32(1)}},
		{"list in list", store.Data{"l": []any{[]any{}}}},
		{"reserved field name", store.Data{"__name__": int64(1)}},
		{"invalid UTF-8", store.Data{"s": "\xff"}},
		{"time before year 1", store.Data{"t": time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"nested unsupported", store.Data{"m": map[string]any{"x": []string{"a"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Normalize(tc.data); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestSplitDoc(t *testing.T) {
	tests := []struct {
		path, coll, id string
		ok             bool
	}{
		{"customers/cus_1", "customers", "cus_1", true},
		{"runs/2026-10/charges/cus_1", "runs/2026-10/charges", "cus_1", true},
		{"customers", "", "", false},
		{"/customers/cus_1", "", "", false},
		{"customers/cus_1/", "", "", false},
		{"customers/..", "", "", false},
		{"customers/__x__", "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			coll, id, err := SplitDoc(tc.path)
			if (err == nil) != tc.ok || coll != tc.coll || id != tc.id {
				t.Errorf("SplitDoc = %q, %q, %v; want %q, %q, ok %v", coll, id, err, tc.coll, tc.id, tc.ok)
			}
		})
	}
}
