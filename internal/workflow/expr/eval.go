package expr

import (
	"context"
	"fmt"
	"math"
	"strings"
)

// Eval evaluates the expression. Runtime errors are *Error (KeyError, TypeError…)
// or whatever a called function returned; a panic anywhere below is recovered
// and returned as a SystemError, so a bug never takes the engine down.
//
// The result may share lists and maps with variables read from env; copy it
// before mutating it in place.
func (e *Expr) Eval(ctx context.Context, env Env) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, SystemError("internal error evaluating %q: %v", e.src, r)
		}
	}()
	return (&evaluator{ctx: ctx, env: env}).eval(e.root)
}

type evaluator struct {
	ctx context.Context
	env Env
}

func (ev *evaluator) eval(n node) (any, error) {
	switch n := n.(type) {
	case *litNode:
		return n.val, nil
	case *pathNode:
		return ev.path(n.names)
	case *memberNode:
		x, err := ev.eval(n.x)
		if err != nil {
			return nil, err
		}
		return member(x, n.name)
	case *indexNode:
		x, err := ev.eval(n.x)
		if err != nil {
			return nil, err
		}
		idx, err := ev.eval(n.index)
		if err != nil {
			return nil, err
		}
		return Index(x, idx)
	case *callNode:
		return ev.call(n)
	case *unaryNode:
		x, err := ev.eval(n.x)
		if err != nil {
			return nil, err
		}
		if n.op == tokNot {
			b, ok := x.(bool)
			if !ok {
				return nil, TypeError("operand of not must be a boolean, got %s", typeOf(x))
			}
			return !b, nil
		}
		return negate(x)
	case *binaryNode:
		return ev.binary(n)
	case *listNode:
		out := make([]any, len(n.elems))
		for i, x := range n.elems {
			v, err := ev.eval(x)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case *mapNode:
		out := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			v, err := ev.eval(n.vals[i])
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	}
	return nil, SystemError("unknown expression node %T", n)
}

// path resolves `a.b.c`: a variable named a first; otherwise the longest
// registered constant or function name that prefixes the path (a function
// used as a value is a FuncRef); the remaining names are member accesses.
func (ev *evaluator) path(path []string) (any, error) {
	v, ok := ev.env.Var(path[0])
	rest := path[1:]
	if !ok {
		for i := len(path); i >= 1 && !ok; i-- {
			name := strings.Join(path[:i], ".")
			if v, ok = ev.env.Const(name); !ok {
				if _, isFunc := ev.env.Func(name); isFunc {
					v, ok = FuncRef{Name: name}, true
				}
			}
			rest = path[i:]
		}
		if !ok {
			return nil, KeyError("variable %q is not defined", path[0])
		}
	}
	for _, name := range rest {
		var err error
		if v, err = member(v, name); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (ev *evaluator) call(n *callNode) (any, error) {
	if err := ev.ctx.Err(); err != nil {
		return nil, err
	}
	f, ok := ev.env.Func(n.name)
	if !ok {
		return nil, fmt.Errorf("%s: %w", n.name, ErrUnknownFunction)
	}
	if f.Blocking {
		return nil, fmt.Errorf("%s: %w", n.name, ErrBlockingCall)
	}
	args := make([]any, len(n.args))
	for i, a := range n.args {
		v, err := ev.eval(a)
		if err != nil {
			return nil, err
		}
		args[i] = v
	}
	bound, err := f.Bind(args)
	if err != nil {
		return nil, err
	}
	return f.Call(ev.ctx, bound)
}

// member is `x.name`: a map key, KeyError when absent; TypeError on non-maps.
func member(x any, name string) (any, error) {
	m, ok := x.(map[string]any)
	if !ok {
		return nil, TypeError("cannot access field %q of %s", name, typeOf(x))
	}
	v, ok := m[name]
	if !ok {
		return nil, KeyError("key not found: %s", name)
	}
	return v, nil
}

// Index is `x[i]` with Google's errors: an integer index into a list (0-based;
// negative indexes are an IndexError, as wrap-around is undocumented and would
// hide off-by-one bugs), or a string key into a map (KeyError when absent).
// The engine uses it for assignment targets such as `l[i]: v` so that both
// paths fail with the same messages.
func Index(x, i any) (any, error) {
	switch c := x.(type) {
	case []any:
		n, ok := i.(int64)
		if !ok {
			return nil, TypeError("list index must be an integer, got %s", typeOf(i))
		}
		if n < 0 || n >= int64(len(c)) {
			return nil, IndexError("list index out of range: %d", n)
		}
		return c[n], nil
	case map[string]any:
		k, ok := i.(string)
		if !ok {
			return nil, TypeError("map key must be a string, got %s", typeOf(i))
		}
		v, ok := c[k]
		if !ok {
			return nil, KeyError("key not found: %s", k)
		}
		return v, nil
	}
	return nil, TypeError("cannot index %s", typeOf(x))
}

func negate(x any) (any, error) {
	switch v := x.(type) {
	case int64:
		if v == math.MinInt64 {
			return nil, overflow("-")
		}
		return -v, nil
	case float64:
		return -v, nil
	}
	return nil, TypeError("operand of unary - must be a number, got %s", typeOf(x))
}

func (ev *evaluator) binary(n *binaryNode) (any, error) {
	l, err := ev.eval(n.l)
	if err != nil {
		return nil, err
	}
	if n.op == tokAnd || n.op == tokOr {
		return ev.logical(n, l)
	}
	r, err := ev.eval(n.r)
	if err != nil {
		return nil, err
	}
	return binaryOp(n.op, l, r)
}

// logical evaluates and/or with short-circuit: undocumented, but Google's
// samples guard a field read with `"k" in m and m.k != ""`, which only works
// short-circuited. Both operands must be booleans.
func (ev *evaluator) logical(n *binaryNode, l any) (any, error) {
	lb, ok := l.(bool)
	if !ok {
		return nil, TypeError("operands of %s must be booleans, got %s", n.op, typeOf(l))
	}
	if (n.op == tokAnd && !lb) || (n.op == tokOr && lb) {
		return lb, nil
	}
	r, err := ev.eval(n.r)
	if err != nil {
		return nil, err
	}
	rb, ok := r.(bool)
	if !ok {
		return nil, TypeError("operands of %s must be booleans, got %s", n.op, typeOf(r))
	}
	return rb, nil
}

func binaryOp(op tokKind, l, r any) (any, error) {
	switch op {
	case tokEq:
		return Equal(l, r), nil
	case tokNe:
		return !Equal(l, r), nil
	case tokLt, tokLe, tokGt, tokGe:
		c, err := compare(l, r)
		if err != nil {
			return nil, err
		}
		switch op {
		case tokLt:
			return c < 0, nil
		case tokLe:
			return c <= 0, nil
		case tokGt:
			return c > 0, nil
		}
		return c >= 0, nil
	case tokIn:
		return contains(r, l)
	case tokPlus:
		if s, ok := concat(l, r); ok {
			return s, nil
		}
	}
	return arith(op, l, r)
}

// concat implements Google's + table for strings: a string plus an integer,
// double, boolean or string (either side) is a string.
func concat(l, r any) (string, bool) {
	_, ls := l.(string)
	_, rs := r.(string)
	if !ls && !rs {
		return "", false
	}
	if !concatenable(l) || !concatenable(r) {
		return "", false
	}
	return Display(l) + Display(r), true
}

func concatenable(v any) bool {
	switch v.(type) {
	case string, int64, float64, bool:
		return true
	}
	return false
}

func contains(container, x any) (any, error) {
	switch c := container.(type) {
	case []any:
		for _, e := range c {
			if Equal(e, x) {
				return true, nil
			}
		}
		return false, nil
	case map[string]any:
		k, ok := x.(string)
		if !ok {
			return nil, TypeError("map key must be a string, got %s", typeOf(x))
		}
		_, found := c[k]
		return found, nil
	}
	return nil, TypeError("right operand of in must be a list or a map, got %s", typeOf(container))
}

// arith applies + - * / // % to numbers: int op int stays int (except /, which
// is always a double), any double makes a double. Overflow, integer or double,
// is a ValueError: Google's datatypes page says overflow of integer or double
// addition is an error without naming its tag.
func arith(op tokKind, l, r any) (any, error) {
	li, lInt := l.(int64)
	ri, rInt := r.(int64)
	lf, lNum := toFloat(l)
	rf, rNum := toFloat(r)
	if !lNum || !rNum {
		return nil, TypeError("unsupported operand types for %s: %s and %s", op, typeOf(l), typeOf(r))
	}
	if (op == tokSlash || op == tokSlashSlash || op == tokPercent) && rf == 0 {
		return nil, ZeroDivisionError("division by zero")
	}
	if lInt && rInt && op != tokSlash {
		return intArith(op, li, ri)
	}
	var f float64
	switch op {
	case tokPlus:
		f = lf + rf
	case tokMinus:
		f = lf - rf
	case tokStar:
		f = lf * rf
	case tokSlash:
		f = lf / rf
	case tokSlashSlash:
		f = math.Floor(lf / rf)
	default:
		f = floatMod(lf, rf)
	}
	// Google names double addition overflow as an error alongside integer
	// overflow; no operation yields an infinity from finite operands here.
	if math.IsInf(f, 0) && !math.IsInf(lf, 0) && !math.IsInf(rf, 0) {
		return nil, ValueError("double overflow in %s", op)
	}
	return f, nil
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func intArith(op tokKind, a, b int64) (any, error) {
	switch op {
	case tokPlus:
		s := a + b
		if (a >= 0) == (b >= 0) && (s >= 0) != (a >= 0) {
			return nil, overflow("+")
		}
		return s, nil
	case tokMinus:
		d := a - b
		if (a >= 0) != (b >= 0) && (d >= 0) != (a >= 0) {
			return nil, overflow("-")
		}
		return d, nil
	case tokStar:
		if a == 0 || b == 0 {
			return int64(0), nil
		}
		p := a * b
		if p/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
			return nil, overflow("*")
		}
		return p, nil
	case tokSlashSlash:
		if a == math.MinInt64 && b == -1 {
			return nil, overflow("//")
		}
		q := a / b
		if (a%b != 0) && ((a < 0) != (b < 0)) {
			q--
		}
		return q, nil
	}
	// %: the remainder takes the divisor's sign, so that a == (a//b)*b + a%b
	// holds with floor division (undocumented; Python's rule, which // follows).
	if b == -1 {
		return int64(0), nil
	}
	m := a % b
	if m != 0 && (m < 0) != (b < 0) {
		m += b
	}
	return m, nil
}

func floatMod(a, b float64) float64 {
	m := math.Mod(a, b)
	if m != 0 && (m < 0) != (b < 0) {
		m += b
	}
	return m
}

func overflow(op string) *Error {
	return ValueError("integer overflow in %s", op)
}
