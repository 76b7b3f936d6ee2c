// Package docmodel holds the rules of billrun's document model that every store
// backend must apply identically: which paths and values are valid, how values
// are normalised (times in UTC at microsecond precision), Firestore's total order
// of values, and what a query filter matches. The embedded backend evaluates
// queries with it; the Firestore backend validates with it, so a request that
// Firestore would reject is rejected locally too.
package docmodel

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"billrun.dev/billrun/internal/store"
)

// Firestore's own limits, applied locally so the embedded store accepts nothing
// that the cloud would refuse.
const (
	maxPathBytes = 1500
	maxDepth     = 20
	// MaxIn is the most values an "in" filter may list.
	MaxIn = 30
)

var (
	minTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", store.ErrInvalid, fmt.Sprintf(format, args...))
}

// SplitDoc validates a document path ("customers/cus_1",
// "runs/2026-10/charges/cus_1") and splits it into its collection path and id.
func SplitDoc(path string) (collection, id string, err error) {
	n, err := checkSegments(path)
	if err != nil {
		return "", "", err
	}
	if n%2 != 0 {
		return "", "", invalid("%q is a collection path, not a document path", path)
	}
	i := strings.LastIndexByte(path, '/')
	return path[:i], path[i+1:], nil
}

// CheckCollection validates a collection path ("customers", "runs/2026-10/charges").
func CheckCollection(path string) error {
	n, err := checkSegments(path)
	if err != nil {
		return err
	}
	if n%2 != 1 {
		return invalid("%q is a document path, not a collection path", path)
	}
	return nil
}

func checkSegments(path string) (int, error) {
	if path == "" {
		return 0, invalid("empty path")
	}
	if len(path) > maxPathBytes {
		return 0, invalid("path longer than %d bytes", maxPathBytes)
	}
	if !utf8.ValidString(path) {
		return 0, invalid("path %q is not valid UTF-8", path)
	}
	segs := strings.Split(path, "/")
	for _, s := range segs {
		if err := checkName("path", path, s); err != nil {
			return 0, err
		}
	}
	return len(segs), nil
}

// checkName applies Firestore's rules for ids and field names.
func checkName(what, in, name string) error {
	switch {
	case name == "":
		return invalid("%s %q has an empty element", what, in)
	case name == "." || name == "..":
		return invalid("%s %q: %q is not allowed", what, in, name)
	case len(name) > 4 && strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__"):
		return invalid("%s %q: %q is reserved", what, in, name)
	}
	return nil
}

// Normalize validates d and returns a deep copy in which every time is UTC at
// microsecond precision, so what a backend stores is what it will return, and
// a caller mutating d afterwards cannot change a buffered write.
func Normalize(d store.Data) (store.Data, error) {
	out, err := normalizeMap(d, 0)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// NormalizeValue validates and normalises one value, as Normalize does for a
// document's fields.
func NormalizeValue(v any) (any, error) {
	return normalize(v, 0, false)
}

func normalizeMap(m map[string]any, depth int) (map[string]any, error) {
	if depth > maxDepth {
		return nil, invalid("maps nested deeper than %d levels", maxDepth)
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		if !utf8.ValidString(k) {
			return nil, invalid("field name %q is not valid UTF-8", k)
		}
		if err := checkName("field name", k, k); err != nil {
			return nil, err
		}
		nv, err := normalize(v, depth+1, false)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", k, err)
		}
		out[k] = nv
	}
	return out, nil
}

func normalize(v any, depth int, inList bool) (any, error) {
	switch x := v.(type) {
	case nil, bool, int64, float64:
		return x, nil
	case string:
		if !utf8.ValidString(x) {
			return nil, invalid("string is not valid UTF-8")
		}
		return x, nil
	case []byte:
		return bytes.Clone(x), nil
	case time.Time:
		t := x.UTC().Truncate(time.Microsecond)
		if t.Before(minTime) || t.After(maxTime) {
			return nil, invalid("time %v outside years 1 to 9999", x)
		}
		return t, nil
	case []any:
		// Firestore refuses an array directly inside an array.
		if inList {
			return nil, invalid("a list may not contain a list")
		}
		out := make([]any, len(x))
		for i, e := range x {
			ne, err := normalize(e, depth, true)
			if err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
			out[i] = ne
		}
		return out, nil
	case map[string]any:
		return normalizeMap(x, depth)
	default:
		return nil, invalid("unsupported value type %T (use int64, float64, string, bool, []byte, time.Time, []any, map[string]any or nil)", v)
	}
}

// Lookup returns the value at a dotted field path and whether it exists.
func Lookup(d store.Data, field string) (any, bool) {
	var cur any = d
	for part := range strings.SplitSeq(field, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// Kinds in Firestore's value order.
const (
	kindNull = iota
	kindBool
	kindNumber
	kindTime
	kindString
	kindBytes
	kindList
	kindMap
)

func kind(v any) int {
	switch v.(type) {
	case nil:
		return kindNull
	case bool:
		return kindBool
	case int64, float64:
		return kindNumber
	case time.Time:
		return kindTime
	case string:
		return kindString
	case []byte:
		return kindBytes
	case []any:
		return kindList
	default:
		return kindMap
	}
}

// Compare orders two normalised values as Firestore does: first by kind (null,
// bool, number, time, string, bytes, list, map), then by value; int64 and
// float64 compare by exact numeric value, NaN first among numbers.
func Compare(a, b any) int {
	ka, kb := kind(a), kind(b)
	if ka != kb {
		return cmpInt(ka, kb)
	}
	switch x := a.(type) {
	case nil:
		return 0
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case int64, float64:
		return compareNumbers(a, b)
	case time.Time:
		return x.Compare(b.(time.Time))
	case string:
		return strings.Compare(x, b.(string))
	case []byte:
		return bytes.Compare(x, b.([]byte))
	case []any:
		y := b.([]any)
		for i := 0; i < len(x) && i < len(y); i++ {
			if c := Compare(x[i], y[i]); c != 0 {
				return c
			}
		}
		return cmpInt(len(x), len(y))
	default:
		return compareMaps(a.(map[string]any), b.(map[string]any))
	}
}

func cmpInt[T int | int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func compareNumbers(a, b any) int {
	switch x := a.(type) {
	case int64:
		switch y := b.(type) {
		case int64:
			return cmpInt(x, y)
		default:
			return -compareFloatInt(y.(float64), x)
		}
	default:
		f := x.(float64)
		switch y := b.(type) {
		case int64:
			return compareFloatInt(f, y)
		default:
			g := y.(float64)
			switch {
			case math.IsNaN(f) && math.IsNaN(g):
				return 0
			case math.IsNaN(f):
				return -1
			case math.IsNaN(g):
				return 1
			}
			return cmpInt(f, g)
		}
	}
}

// compareFloatInt compares exactly, without rounding i to a float64 (which
// would make 2^53+1 equal to 2^53).
func compareFloatInt(f float64, i int64) int {
	switch {
	case math.IsNaN(f):
		return -1
	case f < -9.223372036854775808e18:
		return -1
	case f >= 9.223372036854775808e18:
		return 1
	}
	t := math.Trunc(f)
	if c := cmpInt(int64(t), i); c != 0 {
		return c
	}
	return cmpInt(f-t, 0)
}

func compareMaps(x, y map[string]any) int {
	kx, ky := sortedKeys(x), sortedKeys(y)
	for i := 0; i < len(kx) && i < len(ky); i++ {
		if c := strings.Compare(kx[i], ky[i]); c != 0 {
			return c
		}
		if c := Compare(x[kx[i]], y[ky[i]]); c != 0 {
			return c
		}
	}
	return cmpInt(len(kx), len(ky))
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// IsInequality reports whether op is one of the operators Firestore limits to
// a single field per query.
func IsInequality(op store.Op) bool {
	switch op {
	case store.OpNe, store.OpLt, store.OpLte, store.OpGt, store.OpGte:
		return true
	}
	return false
}

// CheckQuery validates q and returns a copy with normalised filter and cursor
// values. forAggregate relaxes the rule that a range filter needs a matching
// OrderBy, since aggregations ignore ordering.
func CheckQuery(q store.Query, forAggregate bool) (store.Query, error) {
	if err := CheckCollection(q.Collection); err != nil {
		return q, err
	}
	if q.Limit < 0 {
		return q, invalid("negative limit %d", q.Limit)
	}
	ineq := ""
	filters := make([]store.Filter, len(q.Filters))
	for i, f := range q.Filters {
		if err := checkField(f.Field); err != nil {
			return q, err
		}
		v, err := checkFilterValue(f)
		if err != nil {
			return q, fmt.Errorf("filter on %q: %w", f.Field, err)
		}
		if IsInequality(f.Op) {
			if ineq != "" && ineq != f.Field {
				return q, invalid("range or != filters on two fields (%q and %q); Firestore allows one", ineq, f.Field)
			}
			ineq = f.Field
		}
		filters[i] = store.Filter{Field: f.Field, Op: f.Op, Value: v}
	}
	q.Filters = filters
	if q.OrderBy != "" {
		if err := checkField(q.OrderBy); err != nil {
			return q, err
		}
	}
	if forAggregate {
		return q, nil
	}
	// The Firestore emulator refuses descending id scans ("Firestore does
	// not support descending key scans"), so no backend offers them.
	if q.Desc && q.OrderBy == "" {
		return q, invalid("descending order needs OrderBy; Firestore does not scan ids backwards")
	}
	if ineq != "" && q.OrderBy != ineq {
		return q, invalid("a range or != filter on %q needs OrderBy %q", ineq, ineq)
	}
	if q.StartAfter != nil {
		v, err := NormalizeValue(q.StartAfter)
		if err != nil {
			return q, fmt.Errorf("cursor: %w", err)
		}
		if _, isString := v.(string); q.OrderBy == "" && !isString {
			return q, invalid("cursor in id order must be a document id string, not %T", v)
		}
		q.StartAfter = v
	}
	if q.StartAfterID != "" && (q.OrderBy == "" || q.StartAfter == nil) {
		return q, invalid("StartAfterID needs OrderBy and StartAfter")
	}
	if q.StartAfterID != "" {
		if err := checkName("cursor id", q.StartAfterID, q.StartAfterID); err != nil {
			return q, err
		}
	}
	return q, nil
}

func checkField(field string) error {
	if !utf8.ValidString(field) {
		return invalid("field %q is not valid UTF-8", field)
	}
	for part := range strings.SplitSeq(field, ".") {
		if err := checkName("field", field, part); err != nil {
			return err
		}
	}
	return nil
}

func checkFilterValue(f store.Filter) (any, error) {
	switch f.Op {
	case store.OpEq, store.OpNe, store.OpLt, store.OpLte, store.OpGt, store.OpGte:
		return NormalizeValue(f.Value)
	case store.OpIn:
		list, ok := f.Value.([]any)
		if !ok {
			return nil, invalid("\"in\" needs a []any value, not %T", f.Value)
		}
		if len(list) == 0 || len(list) > MaxIn {
			return nil, invalid("\"in\" needs 1 to %d values, got %d", MaxIn, len(list))
		}
		return NormalizeValue(list)
	default:
		return nil, invalid("unknown operator %q", f.Op)
	}
}

// Matches reports whether data satisfies every filter, with Firestore's
// meaning (see store.Filter). Filters must come from CheckQuery.
func Matches(data store.Data, filters []store.Filter) bool {
	for _, f := range filters {
		v, ok := Lookup(data, f.Field)
		if !ok || !matches(v, f.Op, f.Value) {
			return false
		}
	}
	return true
}

func matches(v any, op store.Op, want any) bool {
	switch op {
	// Compare is 0 only for values of the same kind, so 1 == 1.0 but 1 != "1".
	case store.OpEq:
		return Compare(v, want) == 0
	case store.OpNe:
		return v != nil && Compare(v, want) != 0
	case store.OpIn:
		for _, w := range want.([]any) {
			if Compare(v, w) == 0 {
				return true
			}
		}
		return false
	}
	// Ranges only match values of the same kind, and never NaN or null.
	if kind(v) != kind(want) || v == nil || isNaN(v) || isNaN(want) {
		return false
	}
	c := Compare(v, want)
	switch op {
	case store.OpLt:
		return c < 0
	case store.OpLte:
		return c <= 0
	case store.OpGt:
		return c > 0
	default: // OpGte
		return c >= 0
	}
}

func isNaN(v any) bool {
	f, ok := v.(float64)
	return ok && math.IsNaN(f)
}
