package expr

import (
	"encoding/base64"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// registerHelpers adds the expression helpers (stdlib/expression-helpers).
func registerHelpers(b *builder) {
	b.fn("len", params(req("value")), noCtx(func(a []any) (any, error) {
		switch v := a[0].(type) {
		case []any:
			return int64(len(v)), nil
		case map[string]any:
			return int64(len(v)), nil
		case string:
			return int64(utf8.RuneCountInString(v)), nil // "number of characters"
		}
		return nil, argErr("len", "value", "a list, map or string", a[0])
	}))
	b.fn("keys", params(req("map")), noCtx(func(a []any) (any, error) {
		m, err := argMap("keys", "map", a[0])
		if err != nil {
			return nil, err
		}
		return sortedKeys(m), nil
	}))
	b.fn("int", params(req("value")), noCtx(func(a []any) (any, error) { return toInt(a[0]) }))
	b.fn("double", params(req("value")), noCtx(func(a []any) (any, error) { return toDouble(a[0]) }))
	b.fn("string", params(req("value")), noCtx(func(a []any) (any, error) {
		switch a[0].(type) {
		case string, int64, float64, bool:
			return Display(a[0]), nil
		}
		return nil, argErr("string", "value", "an integer, double, boolean or string", a[0])
	}))
	b.fn("default", params(req("val"), req("defaultVal")), noCtx(func(a []any) (any, error) {
		if a[0] == nil {
			return a[1], nil
		}
		return a[0], nil
	}))
	b.fn("if", params(req("condition"), req("ifTrue"), req("ifFalse")), noCtx(func(a []any) (any, error) {
		switch c := a[0].(type) {
		case bool:
			if c {
				return a[1], nil
			}
			return a[2], nil
		case nil: // documented: false or null selects ifFalse
			return a[2], nil
		}
		return nil, argErr("if", "condition", "a boolean or null", a[0])
	}))
	b.fn("get_type", params(req("value")), noCtx(func(a []any) (any, error) { return typeOf(a[0]), nil }))
}

// sortedKeys lists a map's keys. Google does not document an order; sorted is
// deterministic (Go maps have none).
func sortedKeys(m map[string]any) []any {
	out := make([]any, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k)
	}
	return out
}

// decimalNumber is what int() and double() accept from a string: optional
// sign, digits, optional fraction and exponent. Go's parsers would also take
// hex floats, "Inf" and "NaN", which Google's documentation never mentions.
var decimalNumber = regexp.MustCompile(`^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$`)

func toInt(v any) (any, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case float64:
		return doubleToInt("int", x)
	case string:
		s := strings.TrimSpace(x)
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
		if decimalNumber.MatchString(s) {
			if strings.ContainsAny(s, ".eE") {
				return nil, ValueError("int: %q is not an integer", x)
			}
			return nil, ValueError("int: %q is out of the 64-bit integer range", x)
		}
		return nil, ValueError("int: cannot convert %q to an integer", x)
	}
	return nil, argErr("int", "value", "a string, integer or double", v)
}

// doubleToInt truncates toward zero, like Python's int(), and rejects values
// outside int64.
func doubleToInt(fn string, f float64) (int64, error) {
	if math.IsNaN(f) || f < -9.223372036854775808e18 || f >= 9.223372036854775808e18 {
		return 0, ValueError("%s: %s is out of the 64-bit integer range", fn, FormatDouble(f))
	}
	return int64(f), nil
}

func toDouble(v any) (any, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case int64:
		return float64(x), nil
	case string:
		s := strings.TrimSpace(x)
		if !decimalNumber.MatchString(s) {
			return nil, ValueError("double: cannot convert %q to a double", x)
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, ValueError("double: %q is out of range", x)
		}
		return f, nil
	}
	return nil, argErr("double", "value", "a string, integer or double", v)
}

// registerData adds base64, json, list, map and math.
func registerData(b *builder) {
	b.fn("base64.encode", params(req("data"), opt("padding", true)), noCtx(func(a []any) (any, error) {
		data, err := argBytes("base64.encode", "data", a[0])
		if err != nil {
			return nil, err
		}
		pad, ok := a[1].(bool)
		if !ok {
			return nil, argErr("base64.encode", "padding", "a boolean", a[1])
		}
		return base64Encoding(pad).EncodeToString(data), nil
	}))
	b.fn("base64.decode", params(req("data"), opt("padding", true)), noCtx(func(a []any) (any, error) {
		data, err := argString("base64.decode", "data", a[0])
		if err != nil {
			return nil, err
		}
		pad, ok := a[1].(bool)
		if !ok {
			return nil, argErr("base64.decode", "padding", "a boolean", a[1])
		}
		out, err := base64Encoding(pad).DecodeString(data)
		if err != nil {
			return nil, ValueError("base64.decode: invalid base64 data: %s", err.Error())
		}
		return out, nil
	}))

	b.fn("json.decode", params(req("data")), noCtx(func(a []any) (any, error) {
		switch d := a[0].(type) {
		case []byte:
			return DecodeJSON(d)
		case string:
			return DecodeJSON([]byte(d))
		}
		return nil, argErr("json.decode", "data", "bytes or a string", a[0])
	}))
	b.fn("json.encode", params(req("data"), opt("indent", nil)), noCtx(func(a []any) (any, error) {
		return encodeIndented("json.encode", a[0], a[1])
	}))
	b.fn("json.encode_to_string", params(req("data"), opt("indent", nil)), noCtx(func(a []any) (any, error) {
		out, err := encodeIndented("json.encode_to_string", a[0], a[1])
		if err != nil {
			return nil, err
		}
		return string(out), nil
	}))

	b.fn("list.concat", params(req("objs"), req("val")), noCtx(func(a []any) (any, error) {
		l, err := argList("list.concat", "objs", a[0])
		if err != nil {
			return nil, err
		}
		out := make([]any, 0, len(l)+1)
		return append(append(out, l...), a[1]), nil
	}))
	b.fn("list.prepend", params(req("objs"), req("val")), noCtx(func(a []any) (any, error) {
		l, err := argList("list.prepend", "objs", a[0])
		if err != nil {
			return nil, err
		}
		out := make([]any, 0, len(l)+1)
		return append(append(out, a[1]), l...), nil
	}))

	b.fn("map.get", params(req("map"), req("keys")), noCtx(mapGet))
	b.fn("map.delete", params(req("map"), req("key")), noCtx(func(a []any) (any, error) {
		m, err := argMap("map.delete", "map", a[0])
		if err != nil {
			return nil, err
		}
		k, err := argString("map.delete", "key", a[1])
		if err != nil {
			return nil, err
		}
		out := maps.Clone(m)
		delete(out, k)
		return out, nil
	}))
	b.fn("map.merge", params(req("first"), req("second")), noCtx(func(a []any) (any, error) {
		first, second, err := twoMaps("map.merge", a)
		if err != nil {
			return nil, err
		}
		out := maps.Clone(first)
		maps.Copy(out, second)
		return out, nil
	}))
	b.fn("map.merge_nested", params(req("first"), req("second")), noCtx(func(a []any) (any, error) {
		first, second, err := twoMaps("map.merge_nested", a)
		if err != nil {
			return nil, err
		}
		return mergeNested(first, second), nil
	}))

	b.fn("math.abs", params(req("x")), noCtx(func(a []any) (any, error) {
		switch x := a[0].(type) {
		case int64:
			if x == math.MinInt64 {
				return nil, overflow("math.abs")
			}
			if x < 0 {
				return -x, nil
			}
			return x, nil
		case float64:
			return math.Abs(x), nil
		}
		return nil, argErr("math.abs", "x", "a number", a[0])
	}))
	b.fn("math.floor", params(req("x")), noCtx(func(a []any) (any, error) {
		switch x := a[0].(type) {
		case int64:
			return x, nil
		case float64:
			return doubleToInt("math.floor", math.Floor(x))
		}
		return nil, argErr("math.floor", "x", "a number", a[0])
	}))
	b.fn("math.max", params(req("x"), req("y")), noCtx(func(a []any) (any, error) { return minMax("math.max", a, 1) }))
	b.fn("math.min", params(req("x"), req("y")), noCtx(func(a []any) (any, error) { return minMax("math.min", a, -1) }))
}

func base64Encoding(padded bool) *base64.Encoding {
	if padded {
		return base64.StdEncoding
	}
	return base64.RawStdEncoding
}

// encodeIndented applies json.encode's indent argument: null or false for
// compact output; true for four spaces; a map with optional string keys prefix
// (default "") and indent (default four spaces).
func encodeIndented(fn string, data, indent any) ([]byte, error) {
	prefix, unit := "", "    "
	switch ind := indent.(type) {
	case nil:
		return EncodeJSON(data)
	case bool:
		if !ind {
			return EncodeJSON(data)
		}
	case map[string]any:
		for k, v := range ind {
			s, ok := v.(string)
			if !ok {
				return nil, argErr(fn, "indent."+k, "a string", v)
			}
			switch k {
			case "prefix":
				prefix = s
			case "indent":
				unit = s
			default:
				return nil, ValueError("%s: unknown indent option %q", fn, k)
			}
		}
	default:
		return nil, argErr(fn, "indent", "a boolean or a map", indent)
	}
	return EncodeJSONIndent(data, prefix, unit)
}

// mapGet is map.get(map, keys): keys is one key or a list of keys naming a
// nested path. A missing key, a first argument that is not a map, or a path
// through a non-map value gives null; only a bad keys argument is an error.
func mapGet(a []any) (any, error) {
	var path []string
	switch k := a[1].(type) {
	case string:
		path = []string{k}
	case []any:
		for _, e := range k {
			s, ok := e.(string)
			if !ok {
				return nil, argErr("map.get", "keys", "a string or a list of strings", a[1])
			}
			path = append(path, s)
		}
	default:
		return nil, argErr("map.get", "keys", "a string or a list of strings", a[1])
	}
	cur := a[0]
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, nil
		}
		if cur, ok = m[k]; !ok {
			return nil, nil
		}
	}
	return cur, nil
}

func twoMaps(fn string, a []any) (map[string]any, map[string]any, error) {
	first, err := argMap(fn, "first", a[0])
	if err != nil {
		return nil, nil, err
	}
	second, err := argMap(fn, "second", a[1])
	if err != nil {
		return nil, nil, err
	}
	return first, second, nil
}

func mergeNested(first, second map[string]any) map[string]any {
	out := maps.Clone(first)
	for k, v := range second {
		if vm, ok := v.(map[string]any); ok {
			if fm, ok := out[k].(map[string]any); ok {
				out[k] = mergeNested(fm, vm)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// minMax returns the larger (sign 1) or smaller (sign -1) number, keeping its
// type; on a tie the first argument wins.
func minMax(fn string, a []any, sign int) (any, error) {
	if _, err := argNumber(fn, "x", a[0]); err != nil {
		return nil, err
	}
	if _, err := argNumber(fn, "y", a[1]); err != nil {
		return nil, err
	}
	c, err := compare(a[1], a[0])
	if err != nil {
		return nil, err
	}
	if c*sign > 0 {
		return a[1], nil
	}
	return a[0], nil
}
