package workflow

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"gopkg.in/yaml.v3"

	"billrun.dev/billrun/internal/workflow/expr"
)

// Value is a YAML value of a workflow source whose strings may be whole
// expressions (`${…}`), anywhere in lists and maps. A Value with no
// expressions evaluates to one shared literal: the engine never mutates values
// in place (indexed assignments copy the path they change).
type Value struct {
	Pos  Pos
	lit  any        // the value when it holds no expression
	ex   *expr.Expr // a whole-string expression
	list []*Value   // a list holding expressions
	keys []string   // a map holding expressions: keys in source order
	vals []*Value
	kind valueKind
}

type valueKind int

const (
	valueLiteral valueKind = iota
	valueExpr
	valueList
	valueMap
)

// Eval computes the value in env.
func (v *Value) Eval(ctx context.Context, env expr.Env) (any, error) {
	switch v.kind {
	case valueExpr:
		return v.ex.Eval(ctx, env)
	case valueList:
		out := make([]any, len(v.list))
		for i, item := range v.list {
			x, err := item.Eval(ctx, env)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case valueMap:
		out := make(map[string]any, len(v.keys))
		for i, k := range v.keys {
			x, err := v.vals[i].Eval(ctx, env)
			if err != nil {
				return nil, err
			}
			out[k] = x
		}
		return out, nil
	}
	return v.lit, nil
}

// Literal returns the value and true when v holds no expression.
func (v *Value) Literal() (any, bool) { return v.lit, v.kind == valueLiteral }

// Expr returns the expression when v is a whole-string expression.
func (v *Value) Expr() *expr.Expr {
	if v.kind == valueExpr {
		return v.ex
	}
	return nil
}

// walkExprs calls f for every expression in v.
func (v *Value) walkExprs(f func(*expr.Expr, Pos)) {
	switch v.kind {
	case valueExpr:
		f(v.ex, v.Pos)
	case valueList:
		for _, item := range v.list {
			item.walkExprs(f)
		}
	case valueMap:
		for _, item := range v.vals {
			item.walkExprs(f)
		}
	}
}

// compileValue turns a YAML node into a Value, reporting expressions that do
// not parse and duplicate map keys.
func compileValue(d *diag, n *yaml.Node) *Value {
	n = resolveAlias(n)
	v := &Value{Pos: posOf(n)}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!str" {
			e, ok, err := expr.ParseValue(n.Value)
			if err != nil {
				d.errorf(exprPos(n, err), "expression does not parse: %v", syntaxMsg(err))
				v.lit = n.Value
				return v
			}
			if ok {
				v.kind, v.ex = valueExpr, e
				return v
			}
			v.lit = n.Value
			return v
		}
		lit, err := scalarLiteral(n)
		if err != nil {
			d.errorf(v.Pos, "%v", err)
		}
		v.lit = lit
		return v
	case yaml.SequenceNode:
		items := make([]*Value, len(n.Content))
		literal := true
		for i, c := range n.Content {
			items[i] = compileValue(d, c)
			literal = literal && items[i].kind == valueLiteral
		}
		if !literal {
			v.kind, v.list = valueList, items
			return v
		}
		lits := make([]any, len(items))
		for i, item := range items {
			lits[i] = item.lit
		}
		v.lit = lits
		return v
	case yaml.MappingNode:
		seen := map[string]bool{}
		literal := true
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := resolveAlias(n.Content[i])
			if k.Kind != yaml.ScalarNode {
				d.errorf(posOf(k), "map keys must be strings")
				continue
			}
			if seen[k.Value] {
				d.errorf(posOf(k), "duplicate key %q", k.Value)
				continue
			}
			seen[k.Value] = true
			item := compileValue(d, n.Content[i+1])
			literal = literal && item.kind == valueLiteral
			v.keys = append(v.keys, k.Value)
			v.vals = append(v.vals, item)
		}
		if !literal {
			v.kind = valueMap
			return v
		}
		m := make(map[string]any, len(v.keys))
		for i, k := range v.keys {
			m[k] = v.vals[i].lit
		}
		v.lit, v.keys, v.vals = m, nil, nil
		return v
	}
	d.errorf(v.Pos, "unsupported YAML value")
	return v
}

// scalarLiteral decodes a non-string YAML scalar into Workflows' types.
func scalarLiteral(n *yaml.Node) (any, error) {
	switch n.Tag {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		err := n.Decode(&b)
		return b, err
	case "!!int":
		i, err := strconv.ParseInt(n.Value, 0, 64)
		if err != nil {
			var x int64
			if derr := n.Decode(&x); derr != nil {
				return nil, fmt.Errorf("integer %s does not fit in 64 bits", n.Value)
			}
			return x, nil
		}
		return i, nil
	case "!!float":
		var f float64
		err := n.Decode(&f)
		return f, err
	}
	return n.Value, nil
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func posOf(n *yaml.Node) Pos { return Pos{Line: n.Line, Col: n.Column} }

// exprPos locates a syntax error inside a one-line scalar `${…}`.
func exprPos(n *yaml.Node, err error) Pos {
	p := posOf(n)
	var se *expr.SyntaxError
	if errors.As(err, &se) && n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
		quote := 0
		if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
			quote = 1
		}
		p.Col += quote + 2 + se.Offset
	}
	return p
}

func syntaxMsg(err error) string {
	var se *expr.SyntaxError
	if errors.As(err, &se) {
		return se.Msg
	}
	return err.Error()
}
