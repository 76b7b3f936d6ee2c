package expr

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// EncodeJSON encodes a Workflows value as compact JSON. Integers print as
// integers and doubles by FormatDouble (so 2.0 stays "2.0" and reads back as a
// double); map keys are sorted (Google does not document an order; sorted is
// stable); non-ASCII text is written as UTF-8 and <, >, & are not escaped.
// Bytes, function references and non-finite doubles cannot be encoded: a
// ValueError, as json.encode documents.
func EncodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := (jsonEncoder{b: &b}).encode(v, 0); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// EncodeJSONIndent is EncodeJSON with json.encode's indentation: every element
// of an array or object starts on a new line made of prefix and one copy of
// indent per nesting level.
func EncodeJSONIndent(v any, prefix, indent string) ([]byte, error) {
	var b bytes.Buffer
	if err := (jsonEncoder{b: &b, pretty: true, prefix: prefix, indent: indent}).encode(v, 0); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

type jsonEncoder struct {
	b              *bytes.Buffer
	pretty         bool
	prefix, indent string
}

func (e jsonEncoder) encode(v any, depth int) error {
	b := e.b
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return ValueError("cannot encode %s as JSON", FormatDouble(x))
		}
		b.WriteString(FormatDouble(x))
	case string:
		writeJSONString(b, x)
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, el := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			e.newline(depth + 1)
			if err := e.encode(el, depth+1); err != nil {
				return err
			}
		}
		e.newline(depth)
		b.WriteByte(']')
	case map[string]any:
		if len(x) == 0 {
			b.WriteString("{}")
			return nil
		}
		b.WriteByte('{')
		for i, k := range slices.Sorted(maps.Keys(x)) {
			if i > 0 {
				b.WriteByte(',')
			}
			e.newline(depth + 1)
			writeJSONString(b, k)
			b.WriteByte(':')
			if e.pretty {
				b.WriteByte(' ')
			}
			if err := e.encode(x[k], depth+1); err != nil {
				return err
			}
		}
		e.newline(depth)
		b.WriteByte('}')
	default:
		return ValueError("cannot encode %s as JSON", typeOf(v))
	}
	return nil
}

func (e jsonEncoder) newline(depth int) {
	if !e.pretty {
		return
	}
	e.b.WriteByte('\n')
	e.b.WriteString(e.prefix)
	for range depth {
		e.b.WriteString(e.indent)
	}
}

func writeJSONString(b *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\r':
				b.WriteString(`\r`)
			case c == '\t':
				b.WriteString(`\t`)
			case c < 0x20:
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xF])
			default:
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r) // an invalid byte becomes U+FFFD
		i += size
	}
	b.WriteByte('"')
}

// DecodeJSON parses one JSON document into Workflows values: a number without
// fraction or exponent that fits in int64 is an integer, any other number a
// double; objects become maps, arrays lists. Malformed input or trailing data
// is a ValueError.
func DecodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, ValueError("invalid JSON: %s", jsonErrText(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, ValueError("invalid JSON: unexpected data after the value")
	}
	return fromJSON(v)
}

func jsonErrText(err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of input"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func fromJSON(v any) (any, error) {
	var err error
	switch x := v.(type) {
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return i, nil
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, ValueError("invalid JSON: number out of range: %s", s)
		}
		return f, nil
	case []any:
		for i, e := range x {
			if x[i], err = fromJSON(e); err != nil {
				return nil, err
			}
		}
	case map[string]any:
		for k, e := range x {
			if x[k], err = fromJSON(e); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}
