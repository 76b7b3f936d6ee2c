package expr

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// maxDepth bounds the nesting of brackets and operators so that hostile input
// cannot exhaust the stack (Google limits expression length instead; the limit
// is not documented, and no real expression nests this deep).
const maxDepth = 100

// Expr is a parsed expression, safe for concurrent evaluation.
type Expr struct {
	src   string
	root  node
	refs  []string
	calls []string
}

// node is one of the *…Node types below. Only calls and name paths keep a
// position: Check reports calls by offset, and a call's position is its name's.
type node any

type (
	litNode struct {
		val any
	}
	// pathNode is a name followed by member accesses, `a.b.c`: a variable
	// and its fields, or a module member such as retry.default_backoff.
	pathNode struct {
		p     int
		names []string
	}
	memberNode struct {
		x    node
		name string
	}
	indexNode struct {
		x, index node
	}
	callNode struct {
		p    int
		name string
		args []node
	}
	unaryNode struct {
		op tokKind
		x  node
	}
	binaryNode struct {
		op   tokKind
		l, r node
	}
	listNode struct {
		elems []node
	}
	mapNode struct {
		keys []string
		vals []node
	}
)

// binaryPrec is Google's precedence table (datatypes page) for binary
// operators, higher binds tighter, 0 for tokens that are not binary operators;
// all are left-associative. Unary not and - bind tighter than any of them, and
// . [] () tighter still.
func binaryPrec(k tokKind) int {
	switch k {
	case tokOr:
		return 1
	case tokAnd:
		return 2
	case tokLt, tokLe, tokGe, tokGt, tokEq, tokNe, tokIn:
		return 3
	case tokPlus, tokMinus:
		return 4
	case tokStar, tokSlash, tokSlashSlash, tokPercent:
		return 5
	}
	return 0
}

// Parse parses the text inside `${…}`. Errors are *SyntaxError with a byte
// offset into src.
func Parse(src string) (*Expr, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	root, err := p.expr(1)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, p.unexpected(t)
	}
	e := &Expr{src: src, root: root}
	e.collect(root)
	slices.Sort(e.refs)
	e.refs = slices.Compact(e.refs)
	slices.Sort(e.calls)
	e.calls = slices.Compact(e.calls)
	return e, nil
}

// ParseValue recognises a YAML scalar that is an expression. Workflows does no
// string interpolation: a value is an expression exactly when the whole string
// starts with "${" and ends with "}"; anything else (including "a ${b}") is a
// literal string and ok is false. A string of the whole form that does not
// parse is an error (ok is true), as Google rejects it at deploy time; like
// Parse's, its *SyntaxError offset counts from the start of the expression
// text, i.e. two bytes after the start of s.
func ParseValue(s string) (e *Expr, ok bool, err error) {
	if !strings.HasPrefix(s, "${") || !strings.HasSuffix(s, "}") || len(s) < 3 {
		return nil, false, nil
	}
	e, err = Parse(s[2 : len(s)-1])
	return e, true, err
}

// String returns the source text the expression was parsed from.
func (e *Expr) String() string { return e.src }

// Refs returns, sorted and without duplicates, every name path the expression
// reads: "x" for `x` or `x[0]`, "x.y.z" for `x.y.z`, "retry.default_backoff" for
// that constant. Function names that are called are in Calls, not here.
func (e *Expr) Refs() []string { return slices.Clone(e.refs) }

// Vars returns the root names of Refs: the variables (or module names, for
// constants such as http.default_retry) the expression reads.
func (e *Expr) Vars() []string {
	var out []string
	for _, r := range e.refs {
		root, _, _ := strings.Cut(r, ".")
		out = append(out, root)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Calls returns the dotted names of the functions the expression calls,
// sorted and without duplicates.
func (e *Expr) Calls() []string { return slices.Clone(e.calls) }

func (e *Expr) collect(root node) {
	walk(root, func(n node) bool {
		switch n := n.(type) {
		case *pathNode:
			e.refs = append(e.refs, strings.Join(n.names, "."))
		case *callNode:
			e.calls = append(e.calls, n.name)
		}
		return true
	})
}

type parser struct {
	toks  []token
	i     int
	depth int
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

func (p *parser) expect(k tokKind) (token, error) {
	t := p.next()
	if t.kind != k {
		return t, &SyntaxError{Offset: t.pos, Msg: "expected " + strconv.Quote(k.String()) + ", found " + describe(t)}
	}
	return t, nil
}

func (p *parser) unexpected(t token) error {
	return &SyntaxError{Offset: t.pos, Msg: "unexpected " + describe(t)}
}

func describe(t token) string {
	switch t.kind {
	case tokEOF:
		return "end of expression"
	case tokIdent:
		return "name " + t.text
	case tokString:
		return "string " + strconv.Quote(t.text)
	case tokInt, tokDouble:
		return "number " + t.text
	}
	return strconv.Quote(t.kind.String())
}

func (p *parser) enter(pos int) error {
	p.depth++
	if p.depth > maxDepth {
		return &SyntaxError{Offset: pos, Msg: "expression nested too deeply"}
	}
	return nil
}

// expr parses a binary expression whose operators bind at least as tightly as
// minPrec (precedence climbing over binaryPrec).
func (p *parser) expr(minPrec int) (node, error) {
	if err := p.enter(p.peek().pos); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		prec := binaryPrec(t.kind)
		if prec == 0 || prec < minPrec {
			return l, nil
		}
		p.next()
		r, err := p.expr(prec + 1)
		if err != nil {
			return nil, err
		}
		l = &binaryNode{op: t.kind, l: l, r: r}
	}
}

func (p *parser) unary() (node, error) {
	t := p.peek()
	switch t.kind {
	case tokNot, tokMinus:
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		p.next()
		// -9223372036854775808 is only representable with its sign.
		if n := p.peek(); t.kind == tokMinus && n.kind == tokInt {
			if u, err := strconv.ParseUint(n.text, 10, 64); err == nil && u == 1<<63 {
				p.next()
				return p.postfix(&litNode{val: int64(math.MinInt64)})
			}
		}
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &unaryNode{op: t.kind, x: x}, nil
	}
	x, err := p.primary()
	if err != nil {
		return nil, err
	}
	return p.postfix(x)
}

func (p *parser) postfix(x node) (node, error) {
	for {
		t := p.peek()
		switch t.kind {
		case tokDot:
			p.next()
			name := p.next()
			if _, isKeyword := keyword(name.text); name.kind != tokIdent && (name.kind == tokString || !isKeyword) {
				return nil, &SyntaxError{Offset: name.pos, Msg: "expected a name after \".\", found " + describe(name)}
			}
			if pn, ok := x.(*pathNode); ok {
				x = &pathNode{p: pn.p, names: append(slices.Clip(pn.names), name.text)}
			} else {
				x = &memberNode{x: x, name: name.text}
			}
		case tokLBrack:
			p.next()
			idx, err := p.expr(1)
			if err != nil {
				return nil, err
			}
			if _, err := p.expect(tokRBrack); err != nil {
				return nil, err
			}
			x = &indexNode{x: x, index: idx}
		case tokLParen:
			path, ok := x.(*pathNode)
			if !ok {
				return nil, &SyntaxError{Offset: t.pos, Msg: "only a named function can be called"}
			}
			p.next()
			args, err := p.list(tokRParen)
			if err != nil {
				return nil, err
			}
			x = &callNode{p: path.p, name: strings.Join(path.names, "."), args: args}
		default:
			return x, nil
		}
	}
}

// list parses comma-separated expressions up to the closing token (consumed).
// A trailing comma is not accepted (undocumented; Google's examples have none).
func (p *parser) list(closer tokKind) ([]node, error) {
	var out []node
	if p.peek().kind == closer {
		p.next()
		return out, nil
	}
	for {
		x, err := p.expr(1)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
		t := p.next()
		switch t.kind {
		case closer:
			return out, nil
		case tokComma:
		default:
			return nil, &SyntaxError{Offset: t.pos, Msg: "expected \",\" or " + strconv.Quote(closer.String()) + ", found " + describe(t)}
		}
	}
}

func (p *parser) primary() (node, error) {
	t := p.next()
	switch t.kind {
	case tokInt:
		v, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			return nil, &SyntaxError{Offset: t.pos, Msg: "integer out of range: " + t.text}
		}
		return &litNode{val: v}, nil
	case tokDouble:
		v, _ := strconv.ParseFloat(t.text, 64) // validated by the lexer
		return &litNode{val: v}, nil
	case tokString:
		return &litNode{val: t.text}, nil
	case tokTrue:
		return &litNode{val: true}, nil
	case tokFalse:
		return &litNode{val: false}, nil
	case tokNull:
		return &litNode{val: nil}, nil
	case tokIdent:
		return &pathNode{p: t.pos, names: []string{t.text}}, nil
	case tokLParen:
		x, err := p.expr(1)
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(tokRParen); err != nil {
			return nil, err
		}
		return x, nil
	case tokLBrack:
		elems, err := p.list(tokRBrack)
		if err != nil {
			return nil, err
		}
		return &listNode{elems: elems}, nil
	case tokLBrace:
		return p.mapLiteral()
	}
	return nil, p.unexpected(t)
}

// mapLiteral parses `{"k": v, …}`. Keys are string literals (undocumented
// whether other key expressions are allowed; literals are what Google shows).
// A repeated key is a syntax error rather than a silent overwrite.
func (p *parser) mapLiteral() (node, error) {
	m := &mapNode{}
	if p.peek().kind == tokRBrace {
		p.next()
		return m, nil
	}
	for {
		k, err := p.expect(tokString)
		if err != nil {
			return nil, &SyntaxError{Offset: k.pos, Msg: "map keys must be string literals, found " + describe(k)}
		}
		if slices.Contains(m.keys, k.text) {
			return nil, &SyntaxError{Offset: k.pos, Msg: "duplicate map key " + strconv.Quote(k.text)}
		}
		if _, err := p.expect(tokColon); err != nil {
			return nil, err
		}
		v, err := p.expr(1)
		if err != nil {
			return nil, err
		}
		m.keys = append(m.keys, k.text)
		m.vals = append(m.vals, v)
		t := p.next()
		switch t.kind {
		case tokRBrace:
			return m, nil
		case tokComma:
		default:
			return nil, &SyntaxError{Offset: t.pos, Msg: "expected \",\" or \"}\", found " + describe(t)}
		}
	}
}
