package expr

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

type tokKind int

const (
	tokEOF tokKind = iota
	tokIdent
	tokInt
	tokDouble
	tokString
	tokTrue
	tokFalse
	tokNull
	tokAnd
	tokOr
	tokNot
	tokIn
	tokPlus
	tokMinus
	tokStar
	tokSlash
	tokSlashSlash
	tokPercent
	tokEq
	tokNe
	tokLt
	tokLe
	tokGt
	tokGe
	tokLParen
	tokRParen
	tokLBrack
	tokRBrack
	tokLBrace
	tokRBrace
	tokComma
	tokColon
	tokDot
)

func (k tokKind) String() string {
	switch k {
	case tokEOF:
		return "end of expression"
	case tokIdent:
		return "name"
	case tokInt:
		return "integer"
	case tokDouble:
		return "number"
	case tokString:
		return "string"
	case tokTrue:
		return "true"
	case tokFalse:
		return "false"
	case tokNull:
		return "null"
	case tokAnd:
		return "and"
	case tokOr:
		return "or"
	case tokNot:
		return "not"
	case tokIn:
		return "in"
	}
	return punctText(k)
}

type token struct {
	kind tokKind
	pos  int
	text string // identifier name, decoded string, or number text
}

// keyword returns the token of a reserved word. Google documents and/or/not
// and the booleans in lower, Title (booleans only) and upper case, never mixed
// case; null and in only in lower case.
func keyword(word string) (tokKind, bool) {
	switch word {
	case "and", "AND":
		return tokAnd, true
	case "or", "OR":
		return tokOr, true
	case "not", "NOT":
		return tokNot, true
	case "in":
		return tokIn, true
	case "true", "True", "TRUE":
		return tokTrue, true
	case "false", "False", "FALSE":
		return tokFalse, true
	case "null":
		return tokNull, true
	}
	return tokEOF, false
}

// lex splits src into tokens, ending with tokEOF.
func lex(src string) ([]token, error) {
	var toks []token
	i := 0
	for {
		for i < len(src) && strings.IndexByte(" \t\r\n", src[i]) >= 0 {
			i++
		}
		if i == len(src) {
			return append(toks, token{kind: tokEOF, pos: i}), nil
		}
		c := src[i]
		start := i
		switch {
		case isIdentStart(c):
			for i < len(src) && isIdentPart(src[i]) {
				i++
			}
			word := src[start:i]
			if k, ok := keyword(word); ok {
				toks = append(toks, token{kind: k, pos: start, text: word})
			} else {
				toks = append(toks, token{kind: tokIdent, pos: start, text: word})
			}
			continue
		case isDigit(c):
			t, n, err := lexNumber(src, start)
			if err != nil {
				return nil, err
			}
			toks = append(toks, t)
			i = n
			continue
		case c == '"':
			s, n, err := lexString(src, start)
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{kind: tokString, pos: start, text: s})
			i = n
			continue
		}
		kind, width := punct(src[i:])
		if c == '\'' {
			return nil, &SyntaxError{Offset: i, Msg: "string literals must be enclosed in double quotes"}
		}
		if width == 0 {
			r, _ := utf8.DecodeRuneInString(src[i:])
			return nil, &SyntaxError{Offset: i, Msg: "unexpected character " + strconv.QuoteRune(r)}
		}
		toks = append(toks, token{kind: kind, pos: start})
		i += width
	}
}

// punct matches the operator or delimiter at the start of s, two-character
// operators first so that they win over their one-character prefixes.
func punct(s string) (tokKind, int) {
	if len(s) >= 2 {
		for _, k := range []tokKind{tokSlashSlash, tokEq, tokNe, tokLe, tokGe} {
			if s[:2] == punctText(k) {
				return k, 2
			}
		}
	}
	for k := tokPlus; k <= tokDot; k++ {
		if t := punctText(k); len(t) == 1 && s[0] == t[0] {
			return k, 1
		}
	}
	return tokEOF, 0
}

// punctText spells an operator or delimiter token.
func punctText(k tokKind) string {
	switch k {
	case tokPlus:
		return "+"
	case tokMinus:
		return "-"
	case tokStar:
		return "*"
	case tokSlash:
		return "/"
	case tokSlashSlash:
		return "//"
	case tokPercent:
		return "%"
	case tokEq:
		return "=="
	case tokNe:
		return "!="
	case tokLt:
		return "<"
	case tokLe:
		return "<="
	case tokGt:
		return ">"
	case tokGe:
		return ">="
	case tokLParen:
		return "("
	case tokRParen:
		return ")"
	case tokLBrack:
		return "["
	case tokRBrack:
		return "]"
	case tokLBrace:
		return "{"
	case tokRBrace:
		return "}"
	case tokComma:
		return ","
	case tokColon:
		return ":"
	case tokDot:
		return "."
	}
	return "?"
}

func isIdentStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isIdentPart(c byte) bool  { return isIdentStart(c) || isDigit(c) }
func isDigit(c byte) bool      { return '0' <= c && c <= '9' }

// lexNumber reads digits with an optional fraction and exponent. A literal
// without either is an integer; its range is checked by the parser, which
// knows whether a minus sign precedes it.
func lexNumber(src string, i int) (token, int, error) {
	start := i
	for i < len(src) && isDigit(src[i]) {
		i++
	}
	kind := tokInt
	if i+1 < len(src) && src[i] == '.' && isDigit(src[i+1]) {
		kind = tokDouble
		i++
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		j := i + 1
		if j < len(src) && (src[j] == '+' || src[j] == '-') {
			j++
		}
		if j < len(src) && isDigit(src[j]) {
			kind = tokDouble
			for i = j; i < len(src) && isDigit(src[i]); i++ {
			}
		}
	}
	if i < len(src) && isIdentPart(src[i]) {
		return token{}, 0, &SyntaxError{Offset: i, Msg: "invalid character in number"}
	}
	text := src[start:i]
	if kind == tokDouble {
		if _, err := strconv.ParseFloat(text, 64); err != nil {
			return token{}, 0, &SyntaxError{Offset: start, Msg: "number out of range: " + text}
		}
	}
	return token{kind: kind, pos: start, text: text}, i, nil
}

// lexString reads a double-quoted literal (Google: "String literals must be
// enclosed in double quotes"). Escapes follow JSON: \" \\ \/ \b \f \n \r \t
// \uXXXX (surrogate pairs combined); anything else is a syntax error.
func lexString(src string, i int) (string, int, error) {
	start := i
	i++ // opening quote
	var b strings.Builder
	for {
		if i >= len(src) {
			return "", 0, &SyntaxError{Offset: start, Msg: "unterminated string"}
		}
		c := src[i]
		switch {
		case c == '"':
			return b.String(), i + 1, nil
		case c == '\\':
			if i+1 >= len(src) {
				return "", 0, &SyntaxError{Offset: start, Msg: "unterminated string"}
			}
			esc := src[i+1]
			i += 2
			switch esc {
			case '"', '\\', '/':
				b.WriteByte(esc)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				r, n, ok := readU4(src, i)
				if !ok {
					return "", 0, &SyntaxError{Offset: i - 2, Msg: `invalid \u escape`}
				}
				i = n
				if 0xD800 <= r && r < 0xDC00 && i+1 < len(src) && src[i] == '\\' && src[i+1] == 'u' {
					if lo, n2, ok := readU4(src, i+2); ok && 0xDC00 <= lo && lo < 0xE000 {
						r = (r-0xD800)<<10 + (lo - 0xDC00) + 0x10000
						i = n2
					}
				}
				b.WriteRune(r)
			default:
				return "", 0, &SyntaxError{Offset: i - 2, Msg: "invalid escape \\" + string(rune(esc))}
			}
		default:
			b.WriteByte(c)
			i++
		}
	}
}

func readU4(src string, i int) (rune, int, bool) {
	if i+4 > len(src) {
		return 0, 0, false
	}
	n, err := strconv.ParseUint(src[i:i+4], 16, 32)
	if err != nil {
		return 0, 0, false
	}
	return rune(n), i + 4, true
}
