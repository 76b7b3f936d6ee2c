package stripesim

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Stripe's v1 API takes form-encoded parameters with bracketed nesting:
// metadata[k]=v, types[0]=a or types[]=a, created[gte]=1. Parsing happens in two
// steps: the raw form becomes a tree of strings, then an endpoint's schema checks
// and types it. Both steps report Stripe's own 400 shapes, and neither touches
// state, so a malformed request changes nothing.

// kind is the type of one parameter in a schema.
type kind int

const (
	kString kind = iota
	kInt
	kBool
	kMetadata   // map of string to string, Stripe's metadata limits
	kStringList // types[]=a&types[]=b or types[0]=a
	kObject     // nested fields
	kIntOrRange // created=123 or created[gte]=123
	kBoolOrEnum // off_session=true or off_session=one_off
)

// field describes one parameter.
type field struct {
	kind     kind
	required bool
	enum     []string         // allowed values for kString and kBoolOrEnum
	fields   map[string]field // for kObject
	maxLen   int              // for kString; 0 means 5000, Stripe's usual cap
}

// schema is the set of parameters an endpoint accepts.
type schema map[string]field

// params holds typed, validated parameters: string, int64, bool, intRange,
// map[string]string (metadata), []string, or params (objects).
type params map[string]any

// intRange is a created-style filter.
type intRange struct {
	Eq, Gt, Gte, Lt, Lte *int64
}

func (r intRange) contains(v int64) bool {
	return (r.Eq == nil || v == *r.Eq) && (r.Gt == nil || v > *r.Gt) && (r.Gte == nil || v >= *r.Gte) &&
		(r.Lt == nil || v < *r.Lt) && (r.Lte == nil || v <= *r.Lte)
}

func (p params) str(name string) string {
	s, _ := p[name].(string)
	return s
}

func (p params) has(name string) bool {
	_, ok := p[name]
	return ok
}

func (p params) integer(name string) (int64, bool) {
	v, ok := p[name].(int64)
	return v, ok
}

func (p params) boolean(name string) bool {
	b, _ := p[name].(bool)
	return b
}

func (p params) metadata(name string) map[string]string {
	m, _ := p[name].(map[string]string)
	return m
}

func (p params) list(name string) []string {
	l, _ := p[name].([]string)
	return l
}

func (p params) object(name string) params {
	o, _ := p[name].(params)
	return o
}

func (p params) rangeOf(name string) (intRange, bool) {
	r, ok := p[name].(intRange)
	return r, ok
}

// node is one level of the raw form tree: a leaf value or children.
type node struct {
	value    *string
	children map[string]*node
	order    []string // child keys in arrival order, so "[]" lists keep theirs
}

// parseForm turns raw form values into a tree. Keys are split at brackets;
// "[]" appends a new child with the next free index.
func parseForm(vals url.Values, rawOrder []string) (*node, *apiError) {
	root := &node{children: map[string]*node{}}
	for _, key := range rawOrder {
		for _, v := range vals[key] {
			segs, err := splitKey(key)
			if err != nil {
				return nil, invalidRequest(fmt.Sprintf("Invalid parameter name: %s", key), key, "parameter_unknown")
			}
			cur := root
			for i, seg := range segs {
				if cur.value != nil {
					return nil, invalidRequest(fmt.Sprintf("Invalid hash: %s", joinKey(segs[:i])), joinKey(segs[:i]), "parameter_invalid_string")
				}
				if cur.children == nil {
					cur.children = map[string]*node{}
				}
				if seg == "" {
					seg = strconv.Itoa(len(cur.order))
				}
				child, ok := cur.children[seg]
				if !ok {
					child = &node{}
					cur.children[seg] = child
					cur.order = append(cur.order, seg)
				}
				cur = child
			}
			if cur.children != nil {
				return nil, invalidRequest(fmt.Sprintf("Invalid string: %s", key), key, "parameter_invalid_string")
			}
			val := v
			cur.value = &val
		}
	}
	return root, nil
}

// formKeys returns the keys of a raw query in their order of appearance, so that
// list parameters keep the caller's order.
func formKeys(raw string) []string {
	seen := map[string]bool{}
	var keys []string
	for _, part := range strings.Split(raw, "&") {
		if part == "" {
			continue
		}
		k, _, _ := strings.Cut(part, "=")
		k, err := url.QueryUnescape(k)
		if err != nil || seen[k] {
			continue
		}
		seen[k] = true
		keys = append(keys, k)
	}
	return keys
}

func splitKey(key string) ([]string, error) {
	name, rest, found := strings.Cut(key, "[")
	if name == "" {
		return nil, fmt.Errorf("empty name")
	}
	segs := []string{name}
	if !found {
		return segs, nil
	}
	rest = "[" + rest
	for rest != "" {
		if rest[0] != '[' {
			return nil, fmt.Errorf("bad bracket")
		}
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return nil, fmt.Errorf("unclosed bracket")
		}
		segs = append(segs, rest[1:end])
		rest = rest[end+1:]
	}
	return segs, nil
}

func joinKey(segs []string) string {
	if len(segs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(segs[0])
	for _, s := range segs[1:] {
		b.WriteString("[" + s + "]")
	}
	return b.String()
}

// validate checks a form tree against a schema and returns typed params.
func (s schema) validate(root *node) (params, *apiError) {
	return validateObject(s, root, nil)
}

func validateObject(s schema, n *node, path []string) (params, *apiError) {
	out := params{}
	for _, name := range n.order {
		child := n.children[name]
		p := append(append([]string{}, path...), name)
		f, ok := s[name]
		if !ok {
			key := joinKey(p)
			return nil, invalidRequest("Received unknown parameter: "+key, key, "parameter_unknown")
		}
		v, err := f.convert(child, p)
		if err != nil {
			return nil, err
		}
		out[name] = v
	}
	names := make([]string, 0, len(s))
	for name := range s {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, present := out[name]; !present && s[name].required {
			key := joinKey(append(append([]string{}, path...), name))
			return nil, invalidRequest("Missing required param: "+key+".", key, "parameter_missing")
		}
	}
	return out, nil
}

func (f field) convert(n *node, path []string) (any, *apiError) {
	key := joinKey(path)
	leaf := func() (string, *apiError) {
		if n.value == nil {
			return "", invalidRequest("Invalid string: "+key+" must be a string, not a hash", key, "parameter_invalid_string")
		}
		return *n.value, nil
	}
	switch f.kind {
	case kString:
		v, err := leaf()
		if err != nil {
			return nil, err
		}
		max := f.maxLen
		if max == 0 {
			max = 5000
		}
		if len(v) > max {
			return nil, invalidRequest(fmt.Sprintf("Invalid string: %s... must be at most %d characters", truncate(v, 10), max), key, "parameter_invalid_string")
		}
		if len(f.enum) > 0 && !contains(f.enum, v) {
			return nil, invalidRequest(fmt.Sprintf("Invalid %s: must be one of %s", key, strings.Join(f.enum, ", ")), key, "parameter_invalid_string")
		}
		return v, nil
	case kInt:
		v, err := leaf()
		if err != nil {
			return nil, err
		}
		i, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil {
			return nil, invalidRequest("Invalid integer: "+v, key, "parameter_invalid_integer")
		}
		return i, nil
	case kBool:
		v, err := leaf()
		if err != nil {
			return nil, err
		}
		b, ok := parseBool(v)
		if !ok {
			return nil, invalidRequest("Invalid boolean: "+v, key, "parameter_invalid_string")
		}
		return b, nil
	case kBoolOrEnum:
		v, err := leaf()
		if err != nil {
			return nil, err
		}
		if b, ok := parseBool(v); ok {
			return b, nil
		}
		if contains(f.enum, v) {
			return true, nil
		}
		return nil, invalidRequest(fmt.Sprintf("Invalid %s: must be a boolean or one of %s", key, strings.Join(f.enum, ", ")), key, "parameter_invalid_string")
	case kMetadata:
		return convertMetadata(n, key)
	case kStringList:
		if n.value != nil {
			return nil, invalidRequest("Invalid array", key, "parameter_invalid_string")
		}
		keys := append([]string{}, n.order...)
		for _, k := range keys {
			if _, err := strconv.Atoi(k); err != nil {
				return nil, invalidRequest("Invalid array", key, "parameter_invalid_string")
			}
		}
		sort.SliceStable(keys, func(i, j int) bool {
			a, _ := strconv.Atoi(keys[i])
			b, _ := strconv.Atoi(keys[j])
			return a < b
		})
		out := make([]string, 0, len(keys))
		for _, k := range keys {
			c := n.children[k]
			if c.value == nil {
				return nil, invalidRequest("Invalid array", key, "parameter_invalid_string")
			}
			out = append(out, *c.value)
		}
		return out, nil
	case kObject:
		if n.value != nil {
			if *n.value == "" {
				return params{}, nil // Stripe accepts an empty string to clear an object
			}
			return nil, invalidRequest("Invalid object", key, "parameter_invalid_string")
		}
		return validateObject(f.fields, n, path)
	case kIntOrRange:
		if n.value != nil {
			i, err := strconv.ParseInt(*n.value, 10, 64)
			if err != nil {
				return nil, invalidRequest("Invalid integer: "+*n.value, key, "parameter_invalid_integer")
			}
			return intRange{Eq: &i}, nil
		}
		var r intRange
		for _, op := range n.order {
			c := n.children[op]
			ck := key + "[" + op + "]"
			if c.value == nil {
				return nil, invalidRequest("Invalid integer", ck, "parameter_invalid_integer")
			}
			i, err := strconv.ParseInt(*c.value, 10, 64)
			if err != nil {
				return nil, invalidRequest("Invalid integer: "+*c.value, ck, "parameter_invalid_integer")
			}
			switch op {
			case "gt":
				r.Gt = &i
			case "gte":
				r.Gte = &i
			case "lt":
				r.Lt = &i
			case "lte":
				r.Lte = &i
			default:
				return nil, invalidRequest("Received unknown parameter: "+ck, ck, "parameter_unknown")
			}
		}
		return r, nil
	}
	return nil, apiErrorf(500, "api_error", "", "unsupported parameter kind for %s", key)
}

// Stripe's documented metadata limits.
const (
	maxMetadataKeys     = 50
	maxMetadataKeyLen   = 40
	maxMetadataValueLen = 500
)

func convertMetadata(n *node, key string) (any, *apiError) {
	if n.value != nil {
		if *n.value == "" {
			return map[string]string{}, nil
		}
		return nil, invalidRequest("Invalid hash", key, "parameter_invalid_string")
	}
	if len(n.order) > maxMetadataKeys {
		return nil, invalidRequest(fmt.Sprintf("Invalid metadata: metadata can have at most %d keys", maxMetadataKeys), key, "parameter_invalid_string")
	}
	out := make(map[string]string, len(n.order))
	for _, k := range n.order {
		c := n.children[k]
		ck := key + "[" + k + "]"
		if c.value == nil {
			return nil, invalidRequest("Invalid string: metadata values must be strings", ck, "parameter_invalid_string")
		}
		if len(k) > maxMetadataKeyLen {
			return nil, invalidRequest(fmt.Sprintf("Invalid metadata: keys can be at most %d characters", maxMetadataKeyLen), ck, "parameter_invalid_string")
		}
		if len(*c.value) > maxMetadataValueLen {
			return nil, invalidRequest(fmt.Sprintf("Invalid metadata: values can be at most %d characters", maxMetadataValueLen), ck, "parameter_invalid_string")
		}
		out[k] = *c.value
	}
	return out, nil
}

func parseBool(v string) (bool, bool) {
	switch v {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

func contains(list []string, v string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
