package billing

import (
	"fmt"
	"time"

	"billrun.dev/billrun/internal/store"
)

// fields reads typed values out of a document, remembering the first type error
// so a decoder can read every field and check once.
type fields struct {
	path string
	data store.Data
	err  error
}

func (f *fields) fail(key string, v any, want string) {
	if f.err == nil {
		f.err = fmt.Errorf("%w: %s: field %q is %T, want %s", ErrCorrupt, f.path, key, v, want)
	}
}

func (f *fields) str(key string) string {
	v, ok := f.data[key]
	if !ok || v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		f.fail(key, v, "string")
	}
	return s
}

func (f *fields) int(key string) int64 {
	v, ok := f.data[key]
	if !ok || v == nil {
		return 0
	}
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		// Documents written by other tools may hold whole numbers as doubles.
		if n == float64(int64(n)) {
			return int64(n)
		}
	}
	f.fail(key, v, "integer")
	return 0
}

func (f *fields) bool(key string) bool {
	v, ok := f.data[key]
	if !ok || v == nil {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		f.fail(key, v, "bool")
	}
	return b
}

func (f *fields) time(key string) time.Time {
	v, ok := f.data[key]
	if !ok || v == nil {
		return time.Time{}
	}
	t, ok := v.(time.Time)
	if !ok {
		f.fail(key, v, "timestamp")
	}
	return t
}

func (f *fields) list(key string) []any {
	v, ok := f.data[key]
	if !ok || v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		f.fail(key, v, "array")
	}
	return list
}

func (f *fields) strings(key string) []string {
	list := f.list(key)
	if list == nil {
		return nil
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			f.fail(key, e, "string element")
			return nil
		}
		out = append(out, s)
	}
	return out
}

func (f *fields) object(key string) store.Data {
	v, ok := f.data[key]
	if !ok || v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		f.fail(key, v, "map")
	}
	return m
}

// setTime stores t under key unless it is zero (absent fields read back as zero).
func setTime(d store.Data, key string, t time.Time) {
	if !t.IsZero() {
		d[key] = t.UTC()
	}
}

// anyStrings converts to the store's array type.
func anyStrings(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
