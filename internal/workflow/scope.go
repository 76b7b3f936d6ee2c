package workflow

import (
	"context"
	"slices"
	"sync"

	"billrun.dev/billrun/internal/workflow/expr"
)

// scope holds the variables of a routine, a loop iteration, an except block or
// a parallel branch. Parallel branches read and (for shared variables) write
// their parents' scopes concurrently, so each scope guards its own map.
type scope struct {
	parent   *scope
	x        *execution
	boundary bool // a parallel branch or iteration: writes beyond it need the assignment lock
	// locals are the variables declared in this scope by the source (Google's
	// scoping is static): an assignment to one of them lands here even before
	// it has a value, and reading it before then is an error.
	locals map[string]bool

	// assignMu makes assignments to this scope's variables from parallel
	// branches atomic (evaluation and store together). It is per scope, not
	// per execution, so that an expression calling a subworkflow while it is
	// held cannot deadlock: the subworkflow cannot reach this scope.
	assignMu sync.Mutex

	mu   sync.Mutex
	vars map[string]any
	size int64 // bytes these variables count for (expr.SizeOf), included in x.mem
}

func newScope(x *execution, parent *scope, boundary bool, locals map[string]bool) *scope {
	return &scope{parent: parent, x: x, boundary: boundary, locals: locals, vars: map[string]any{}}
}

// get reads a variable from the innermost scope that has it.
func (s *scope) get(name string) (any, bool) {
	for c := s; c != nil; c = c.parent {
		c.mu.Lock()
		v, ok := c.vars[name]
		c.mu.Unlock()
		if ok || c.locals[name] {
			return v, ok
		}
	}
	return nil, false
}

// owner returns the scope holding name, nil if none, and whether reaching it
// crosses a parallel boundary (the variable is shared).
func (s *scope) owner(name string) (owner *scope, shared bool) {
	for c := s; c != nil; c = c.parent {
		c.mu.Lock()
		_, ok := c.vars[name]
		c.mu.Unlock()
		if ok || c.locals[name] {
			return c, shared
		}
		shared = shared || c.boundary
	}
	return nil, false
}

// define sets a variable in this very scope (parameters, loop variables, the
// except variable).
func (s *scope) define(name string, v any) error {
	return s.store(name, v)
}

// store sets name in s, accounting for its memory.
func (s *scope) store(name string, v any) error {
	s.mu.Lock()
	old, had := s.vars[name]
	delta := int64(expr.SizeOf(v))
	if had {
		delta -= int64(expr.SizeOf(old))
	}
	s.vars[name] = v
	s.size += delta
	s.mu.Unlock()
	return s.x.grow(delta)
}

// storeAt sets the element of name's value at path (already evaluated keys and
// indexes), copying the containers along the path so that no other variable
// sharing them changes.
func (s *scope) storeAt(name string, path []any, v any) error {
	s.mu.Lock()
	root, ok := s.vars[name]
	if !ok {
		s.mu.Unlock()
		return expr.KeyError("variable %q is not defined", name)
	}
	updated, delta, err := setPath(root, path, v)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	s.vars[name] = updated
	s.size += delta
	s.mu.Unlock()
	return s.x.grow(delta)
}

// release returns the scope's memory when it ends.
func (s *scope) release() {
	s.mu.Lock()
	size := s.size
	s.size = 0
	s.mu.Unlock()
	s.x.mem.Add(-size)
}

// setPath returns a copy of container with path set to v, and the change in
// size. Paths fail as reads do (expr.Index): a missing key is an error except
// as the last element, which adds the key.
func setPath(container any, path []any, v any) (any, int64, error) {
	key := path[0]
	old, err := expr.Index(container, key)
	added := false
	if err != nil {
		if ee := expr.AsError(err); len(path) > 1 || !ee.HasTag(expr.TagKeyError) {
			return nil, 0, err
		}
		added = true
	}
	nv, delta := v, int64(0)
	switch {
	case len(path) > 1:
		if nv, delta, err = setPath(old, path[1:], v); err != nil {
			return nil, 0, err
		}
	case added:
		delta = int64(expr.SizeOf(v) + expr.SizeOf(key))
	default:
		delta = int64(expr.SizeOf(v) - expr.SizeOf(old))
	}
	switch c := container.(type) {
	case map[string]any:
		out := make(map[string]any, len(c)+1)
		for k, x := range c {
			out[k] = x
		}
		out[key.(string)] = nv
		return out, delta, nil
	case []any:
		out := slices.Clone(c)
		out[key.(int64)] = nv
		return out, delta, nil
	}
	return nil, 0, expr.TypeError("cannot index %s", expr.TypeName(container))
}

// env is what an expression sees from a scope: its variables, the library
// and the workflow's subworkflows.
type env struct {
	sc *scope
}

var _ expr.Env = env{}

func (e env) Var(name string) (any, bool) { return e.sc.get(name) }

func (e env) Func(name string) (*expr.Func, bool) { return e.sc.x.lookupFunc(name) }

func (e env) Const(name string) (any, bool) { return e.sc.x.reg.Const(name) }

// eval evaluates a value in scope s.
func (s *scope) eval(ctx context.Context, v *Value) (any, error) {
	return v.Eval(ctx, env{sc: s})
}
