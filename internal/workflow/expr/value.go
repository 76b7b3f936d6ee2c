package expr

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// FuncRef is a function used as a value rather than called, e.g. the value of
// `${http.default_retry_predicate}` or of a subworkflow's name in a retry policy.
type FuncRef struct{ Name string }

// Names returned by TypeName, as Google's get_type documents them.
const (
	TypeBool     = "bool"
	TypeBytes    = "bytes"
	TypeDouble   = "double"
	TypeFunction = "function"
	TypeInteger  = "integer"
	TypeList     = "list"
	TypeMap      = "map"
	TypeNull     = "null"
	TypeString   = "string"
)

// TypeName returns Google's name for v's type (what get_type returns), or "" for
// a Go value that is not a Workflows value.
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return TypeNull
	case bool:
		return TypeBool
	case int64:
		return TypeInteger
	case float64:
		return TypeDouble
	case string:
		return TypeString
	case []byte:
		return TypeBytes
	case []any:
		return TypeList
	case map[string]any:
		return TypeMap
	case FuncRef:
		return TypeFunction
	}
	return ""
}

// typeOf names v's type for error messages, Go's name for a non-Workflows value.
func typeOf(v any) string {
	if n := TypeName(v); n != "" {
		return n
	}
	return fmt.Sprintf("%T", v)
}

// Equal reports whether a and b are equal values, as `==` does: ints and doubles
// compare by numeric value, lists element-wise, maps by keys and values; values
// of unrelated types are unequal rather than an error (undocumented; chosen
// because Google documents `==` as taking any operands and map.get style code
// compares against null freely).
func Equal(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case int64:
		switch y := b.(type) {
		case int64:
			return x == y
		case float64:
			return intEqualsDouble(x, y)
		}
		return false
	case float64:
		switch y := b.(type) {
		case float64:
			return x == y
		case int64:
			return intEqualsDouble(y, x)
		}
		return false
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []byte:
		y, ok := b.([]byte)
		return ok && string(x) == string(y)
	case []any:
		y, ok := b.([]any)
		return ok && slices.EqualFunc(x, y, Equal)
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !Equal(xv, yv) {
				return false
			}
		}
		return true
	case FuncRef:
		y, ok := b.(FuncRef)
		return ok && x == y
	}
	return false
}

// intEqualsDouble compares exactly, without rounding i to the nearest double.
func intEqualsDouble(i int64, d float64) bool {
	if d != math.Trunc(d) || d < -9.223372036854775808e18 || d >= 9.223372036854775808e18 {
		return false
	}
	return int64(d) == i
}

// compare orders two values for < <= > >=: numbers with numbers, strings with
// strings (byte-wise, which is code point order for UTF-8), bools with bools
// (false < true). Anything else is a TypeError.
func compare(a, b any) (int, error) {
	switch x := a.(type) {
	case int64:
		switch y := b.(type) {
		case int64:
			return cmpOrdered(x, y), nil
		case float64:
			return compareIntDouble(x, y), nil
		}
	case float64:
		switch y := b.(type) {
		case float64:
			return cmpOrdered(x, y), nil
		case int64:
			return -compareIntDouble(y, x), nil
		}
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), nil
		}
	case bool:
		if y, ok := b.(bool); ok {
			return cmpOrdered(boolInt(x), boolInt(y)), nil
		}
	}
	return 0, TypeError("cannot compare %s with %s", typeOf(a), typeOf(b))
}

func cmpOrdered[T int64 | float64](x, y T) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func compareIntDouble(i int64, d float64) int {
	if math.IsNaN(d) {
		return 1 // NaN cannot come from JSON or literals; any fixed answer will do.
	}
	if intEqualsDouble(i, d) {
		return 0
	}
	return cmpOrdered(float64(i), d)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// SizeOf is the memory a value counts for against the 512 KB variable limit,
// by Google's documented rules: int, double and bool 8 bytes; string, bytes and
// list 8 bytes plus their contents; map 8 bytes plus its keys and values. null
// counts as 8 bytes like the other scalars (undocumented). A string's content is
// its UTF-8 length in bytes.
func SizeOf(v any) int {
	switch x := v.(type) {
	case string:
		return 8 + len(x)
	case []byte:
		return 8 + len(x)
	case []any:
		n := 8
		for _, e := range x {
			n += SizeOf(e)
		}
		return n
	case map[string]any:
		n := 8
		for k, e := range x {
			n += SizeOf(k) + SizeOf(e)
		}
		return n
	case FuncRef:
		return 8 + len(x.Name)
	}
	return 8
}

// Display renders a value as the string() helper and string concatenation do:
// strings as is, integers in decimal, doubles by FormatDouble, booleans as
// true/false, null as "null", and lists and maps as their JSON encoding.
func Display(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return FormatDouble(x)
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return "null"
	case []byte:
		return string(x)
	case FuncRef:
		return x.Name
	}
	b, err := EncodeJSON(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// FormatDouble is the one place doubles become text (string(), concatenation,
// JSON): the shortest decimal that reads back as the same double, without a
// fraction when the value is integral, and with an exponent beyond 1e21 or
// below 1e-6 in magnitude. Google documents time.parse as returning a double
// and shows its result as `1715169660`, and sys.now as `1715172805.2818468`;
// the exponent thresholds are undocumented (these are JavaScript's).
func FormatDouble(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	}
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// deepCopy copies lists, maps and bytes, so that values the registry holds
// (constants, parameter defaults) cannot be changed through what a caller got;
// other values are immutable.
func deepCopy(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []byte:
		return slices.Clone(x)
	}
	return v
}
