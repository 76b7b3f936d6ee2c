package embedded

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"billrun.dev/billrun/internal/store"
)

// Documents are stored as JSON in which every scalar except null and bool is a
// string whose first byte names its type ("i" int64, "f" float64, "s" string,
// "t" time, "b" bytes), so every value comes back with its exact Go type (JSON
// numbers would turn an int64 above 2^53 into a rounded float) and the file
// stays readable with the sqlite3 shell.
const timeLayout = "2006-01-02T15:04:05.000000Z"

func encode(d store.Data) ([]byte, error) {
	b, err := json.Marshal(tag(d))
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return b, nil
}

// tag converts a normalised value into its tagged JSON form.
func tag(v any) any {
	switch x := v.(type) {
	case nil, bool:
		return x
	case int64:
		return "i" + strconv.FormatInt(x, 10)
	case float64:
		// 'g' with -1 precision round-trips exactly, NaN and ±Inf included.
		return "f" + strconv.FormatFloat(x, 'g', -1, 64)
	case string:
		return "s" + x
	case []byte:
		return "b" + base64.StdEncoding.EncodeToString(x)
	case time.Time:
		return "t" + x.UTC().Format(timeLayout)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = tag(e)
		}
		return out
	default:
		m := x.(map[string]any)
		out := make(map[string]any, len(m))
		for k, e := range m {
			out[k] = tag(e)
		}
		return out
	}
}

func decode(b []byte) (store.Data, error) {
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if err := untagMap(raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// untagMap converts a decoded map in place.
func untagMap(m map[string]any) error {
	for k, e := range m {
		v, err := untag(e)
		if err != nil {
			return fmt.Errorf("decode field %q: %w", k, err)
		}
		m[k] = v
	}
	return nil
}

func untag(v any) (any, error) {
	switch x := v.(type) {
	case nil, bool:
		return x, nil
	case []any:
		for i, e := range x {
			u, err := untag(e)
			if err != nil {
				return nil, err
			}
			x[i] = u
		}
		return x, nil
	case map[string]any:
		return x, untagMap(x)
	case string:
		if x == "" {
			return nil, fmt.Errorf("untagged empty string")
		}
		body := x[1:]
		switch x[0] {
		case 's':
			return body, nil
		case 'i':
			return strconv.ParseInt(body, 10, 64)
		case 'f':
			return strconv.ParseFloat(body, 64)
		case 'b':
			return base64.StdEncoding.DecodeString(body)
		case 't':
			return time.Parse(timeLayout, body)
		}
		return nil, fmt.Errorf("unknown type tag %q", x[0])
	}
	return nil, fmt.Errorf("unexpected JSON value %T", v)
}
