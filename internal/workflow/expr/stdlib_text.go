package expr

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/ianaindex"
	"golang.org/x/text/encoding/unicode"
)

// registerText adds the text module. Indexes are counted in code points, as
// Google documents for find_all and substring.
func registerText(b *builder) {
	b.fn("text.decode", params(req("data"), opt("charset", "UTF-8")), noCtx(func(a []any) (any, error) {
		data, err := argBytes("text.decode", "data", a[0])
		if err != nil {
			return nil, err
		}
		enc, err := charset("text.decode", a[1])
		if err != nil {
			return nil, err
		}
		// The decoders replace undecodable bytes with U+FFFD, as documented.
		out, err := enc.NewDecoder().Bytes(data)
		if err != nil {
			return nil, ValueError("text.decode: %s", err.Error())
		}
		return string(out), nil
	}))
	b.fn("text.encode", params(req("text"), opt("charset", "UTF-8")), noCtx(func(a []any) (any, error) {
		s, err := argString("text.encode", "text", a[0])
		if err != nil {
			return nil, err
		}
		enc, err := charset("text.encode", a[1])
		if err != nil {
			return nil, err
		}
		out, err := enc.NewEncoder().Bytes([]byte(s))
		if err != nil {
			return nil, ValueError("text.encode: text cannot be encoded in %v", a[1])
		}
		return out, nil
	}))
	b.fn("text.find_all", params(req("source"), req("substr")), noCtx(func(a []any) (any, error) {
		source, substr, err := twoStrings("text.find_all", "source", "substr", a)
		if err != nil {
			return nil, err
		}
		out := []any{}
		if substr == "" {
			// An empty substring matches before every code point and at the end.
			for i := range utf8.RuneCountInString(source) + 1 {
				out = append(out, int64(i))
			}
			return out, nil
		}
		for off := 0; ; {
			i := strings.Index(source[off:], substr)
			if i < 0 {
				return out, nil
			}
			out = append(out, int64(utf8.RuneCountInString(source[:off+i])))
			off += i + len(substr)
		}
	}))
	b.fn("text.find_all_regex", params(req("source"), req("regexp")), noCtx(func(a []any) (any, error) {
		source, re, err := sourceAndRegexp("text.find_all_regex", a)
		if err != nil {
			return nil, err
		}
		out := []any{}
		for _, m := range re.FindAllStringIndex(source, -1) {
			out = append(out, map[string]any{
				"index": int64(utf8.RuneCountInString(source[:m[0]])),
				"match": source[m[0]:m[1]],
			})
		}
		return out, nil
	}))
	b.fn("text.match_regex", params(req("source"), req("regexp")), noCtx(func(a []any) (any, error) {
		source, re, err := sourceAndRegexp("text.match_regex", a)
		if err != nil {
			return nil, err
		}
		return re.MatchString(source), nil
	}))
	b.fn("text.replace_all", params(req("source"), req("substr"), req("repl")), noCtx(func(a []any) (any, error) {
		source, substr, err := twoStrings("text.replace_all", "source", "substr", a)
		if err != nil {
			return nil, err
		}
		repl, err := argString("text.replace_all", "repl", a[2])
		if err != nil {
			return nil, err
		}
		return strings.ReplaceAll(source, substr, repl), nil
	}))
	b.fn("text.replace_all_regex", params(req("source"), req("regexp"), req("repl")), noCtx(func(a []any) (any, error) {
		source, re, err := sourceAndRegexp("text.replace_all_regex", a)
		if err != nil {
			return nil, err
		}
		repl, err := argString("text.replace_all_regex", "repl", a[2])
		if err != nil {
			return nil, err
		}
		// Backreferences are documented as unsupported: repl is literal.
		return re.ReplaceAllLiteralString(source, repl), nil
	}))
	b.fn("text.split", params(req("source"), req("separator")), noCtx(func(a []any) (any, error) {
		source, sep, err := twoStrings("text.split", "source", "separator", a)
		if err != nil {
			return nil, err
		}
		if sep == "" {
			return nil, ValueError("text.split: separator must not be empty")
		}
		parts := strings.Split(source, sep)
		out := make([]any, len(parts))
		for i, p := range parts {
			out[i] = p
		}
		return out, nil
	}))
	b.fn("text.substring", params(req("source"), req("start"), req("end")), noCtx(substring))
	b.fn("text.to_lower", params(req("source")), noCtx(stringFunc("text.to_lower", strings.ToLower)))
	b.fn("text.to_upper", params(req("source")), noCtx(stringFunc("text.to_upper", strings.ToUpper)))
	b.fn("text.url_encode", params(req("source")), noCtx(stringFunc("text.url_encode", func(s string) string {
		return percentEncode(s, false)
	})))
	b.fn("text.url_encode_plus", params(req("source")), noCtx(stringFunc("text.url_encode_plus", func(s string) string {
		return percentEncode(s, true)
	})))
	b.fn("text.url_decode", params(req("source")), noCtx(func(a []any) (any, error) {
		s, err := argString("text.url_decode", "source", a[0])
		if err != nil {
			return nil, err
		}
		return percentDecode(s)
	}))
}

func twoStrings(fn, p1, p2 string, a []any) (string, string, error) {
	s1, err := argString(fn, p1, a[0])
	if err != nil {
		return "", "", err
	}
	s2, err := argString(fn, p2, a[1])
	if err != nil {
		return "", "", err
	}
	return s1, s2, nil
}

// sourceAndRegexp checks (source, regexp) and compiles the expression. Go's
// regexp package implements the RE2 syntax Google documents; Longest makes it
// prefer the longest of the matches starting at one index, as Google documents,
// instead of Go's default leftmost-first.
func sourceAndRegexp(fn string, a []any) (string, *regexp.Regexp, error) {
	source, pattern, err := twoStrings(fn, "source", "regexp", a)
	if err != nil {
		return "", nil, err
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return "", nil, ValueError("%s: invalid regular expression: %s", fn, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	re.Longest()
	return source, re, nil
}

func stringFunc(fn string, f func(string) string) func([]any) (any, error) {
	return func(a []any) (any, error) {
		s, err := argString(fn, "source", a[0])
		if err != nil {
			return nil, err
		}
		return f(s), nil
	}
}

// substring is text.substring(source, start, end) over code points: start
// inclusive, end exclusive; a negative index counts from the end; indexes are
// clamped to the string, and start >= end gives "".
func substring(a []any) (any, error) {
	source, err := argString("text.substring", "source", a[0])
	if err != nil {
		return nil, err
	}
	start, err := argInt("text.substring", "start", a[1])
	if err != nil {
		return nil, err
	}
	end, err := argInt("text.substring", "end", a[2])
	if err != nil {
		return nil, err
	}
	runes := []rune(source)
	n := int64(len(runes))
	clamp := func(i int64) int64 {
		if i < 0 {
			i += n
		}
		return max(0, min(i, n))
	}
	start, end = clamp(start), clamp(end)
	if start >= end {
		return "", nil
	}
	return string(runes[start:end]), nil
}

// percentEncode escapes every byte of the UTF-8 text except letters, digits
// and . - _ (the url_encode page's list; note that ~ is escaped). With plus, a
// space becomes "+" instead of "%20".
func percentEncode(s string, plus bool) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '-', c == '_':
			b.WriteByte(c)
		case c == ' ' && plus:
			b.WriteByte('+')
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xF])
		}
	}
	return b.String()
}

// percentDecode undoes percentEncode: %XX escapes and "+" as a space (so it
// reverses url_encode_plus too; a literal "+" is always sent as %2B by both
// encoders). A malformed escape or invalid UTF-8 result is a ValueError.
func percentDecode(s string) (any, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%':
			if i+2 >= len(s) || unhex(s[i+1]) < 0 || unhex(s[i+2]) < 0 {
				return nil, ValueError("text.url_decode: invalid escape at index %d", i)
			}
			b.WriteByte(byte(unhex(s[i+1])<<4 | unhex(s[i+2])))
			i += 2
		case '+':
			b.WriteByte(' ')
		default:
			b.WriteByte(c)
		}
	}
	if !utf8.ValidString(b.String()) {
		return nil, ValueError("text.url_decode: decoded bytes are not UTF-8")
	}
	return b.String(), nil
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// charset looks an IANA charset name up, case-insensitively.
func charset(fn string, v any) (encoding.Encoding, error) {
	name, err := argString(fn, "charset", v)
	if err != nil {
		return nil, err
	}
	if strings.EqualFold(name, "UTF-8") || strings.EqualFold(name, "UTF8") {
		return unicode.UTF8, nil
	}
	enc, err := ianaindex.IANA.Encoding(name)
	if err != nil || enc == nil {
		return nil, ValueError("%s: unsupported charset %q", fn, name)
	}
	return enc, nil
}
