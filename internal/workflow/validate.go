package workflow

import (
	"errors"
	"maps"
	"slices"
	"strings"

	"billrun.dev/billrun/internal/workflow/expr"
)

// validate applies the deploy-time rules that need the whole program: step
// names, jump targets, call targets, variable scopes, parallel rules and
// expression references.
func validate(d *diag, w *Workflow) {
	cat := catalog()
	for _, name := range sortedKeys(w.Routines) {
		r := w.Routines[name]
		v := &validator{d: d, w: w, cat: cat, routine: r, names: map[string]*blockInfo{}, blocks: map[*Step]*block{}}
		top := &block{}
		v.declare(r.Steps, top)
		vs := &vscope{vars: map[string]bool{}}
		for _, p := range r.Params {
			vs.vars[p.Name] = true
			if p.Default != nil {
				v.exprs(p.Default, vs)
			}
		}
		v.defs(r.Steps, vs)
		r.locals = vs.vars
		v.steps(r.Steps, top, vs, 0)
	}
}

// block is a list of steps; frame marks the blocks that jumps cannot leave (a
// for body, a parallel branch or iteration). Routines are frames too (parent
// nil).
type block struct {
	parent   *block
	frame    bool
	loop     bool // the body of a for loop (break and continue are allowed)
	parallel bool // inside a parallel branch or iteration
}

type blockInfo struct {
	b   *block
	pos Pos
}

// vscope is a variable scope for the deploy-time check of references and
// assignments.
type vscope struct {
	parent   *vscope
	vars     map[string]bool
	boundary bool            // a parallel branch or iteration
	shared   map[string]bool // for a boundary: the parent variables it may write
}

func (s *vscope) lookup(name string) (*vscope, bool) {
	for c := s; c != nil; c = c.parent {
		if c.vars[name] {
			return c, true
		}
	}
	return nil, false
}

type validator struct {
	d       *diag
	w       *Workflow
	cat     *expr.Registry
	routine *Routine
	names   map[string]*blockInfo
	blocks  map[*Step]*block // by the first step of each step list
}

// declare records every step name of a routine with its block, rejecting
// duplicates (names are unique within a routine).
func (v *validator) declare(steps []*Step, b *block) {
	if len(steps) > 0 {
		v.blocks[steps[0]] = b
	}
	for _, s := range steps {
		if s.Name != "" {
			if prev, dup := v.names[s.Name]; dup {
				v.d.errorf(s.Pos, "duplicate step name %q in %s (first at line %d)", s.Name, v.routine.Name, prev.pos.Line)
			} else {
				v.names[s.Name] = &blockInfo{b: b, pos: s.Pos}
			}
		}
		v.declareBody(s, b)
	}
}

func (v *validator) declareBody(s *Step, b *block) {
	switch s.Kind {
	case KindSteps:
		v.declare(s.Steps, &block{parent: b})
	case KindSwitch:
		for _, c := range s.Switch {
			v.declareBody(c.Body, b)
		}
	case KindFor:
		v.declare(s.For.Steps, &block{parent: b, frame: true, loop: true, parallel: b.parallel})
	case KindParallel:
		if s.Parallel.For != nil {
			v.declare(s.Parallel.For.Steps, &block{parent: b, frame: true, loop: true, parallel: true})
		}
		for _, br := range s.Parallel.Branches {
			v.declare(br.Steps, &block{parent: b, frame: true, parallel: true})
		}
	case KindTry:
		v.declareBody(s.Try.Body, b)
		if s.Try.Except != nil {
			v.declare(s.Try.Except.Steps, &block{parent: b})
		}
	}
}

// blockOf returns the block declare built for a step list.
func (v *validator) blockOf(steps []*Step) *block {
	if len(steps) > 0 {
		if b := v.blocks[steps[0]]; b != nil {
			return b
		}
	}
	return &block{}
}

// defs adds to vs the variables that steps create in vs's scope: assignment
// roots and call results, including those in nested steps, switch bodies and
// try bodies (routine-wide, [D] steps), excluding loop bodies, except blocks
// and parallel bodies (their own scopes).
func (v *validator) defs(steps []*Step, vs *vscope) {
	for _, s := range steps {
		v.defsBody(s, vs)
	}
}

func (v *validator) defsBody(s *Step, vs *vscope) {
	define := func(name string) {
		if _, ok := vs.lookup(name); !ok {
			vs.vars[name] = true
		}
	}
	switch s.Kind {
	case KindAssign:
		for _, a := range s.Assign {
			if len(a.Target.Path) == 0 {
				define(a.Target.Root)
			}
		}
	case KindCall:
		if s.Call.Result != "" {
			define(s.Call.Result)
		}
	case KindSteps:
		v.defs(s.Steps, vs)
	case KindSwitch:
		for _, c := range s.Switch {
			v.defsBody(c.Body, vs)
		}
	case KindTry:
		v.defsBody(s.Try.Body, vs)
	}
}

func (v *validator) steps(steps []*Step, b *block, vs *vscope, depth int) {
	for _, s := range steps {
		v.step(s, b, vs, depth)
	}
}

func (v *validator) step(s *Step, b *block, vs *vscope, depth int) {
	v.next(s, b)
	switch s.Kind {
	case KindAssign:
		for _, a := range s.Assign {
			for _, sel := range a.Target.Path {
				if sel.Index != nil {
					v.expr(sel.Index, a.Pos, vs)
				}
			}
			v.exprs(a.Value, vs)
			v.write(a.Target.Root, a.Pos, vs, len(a.Target.Path) > 0)
		}
	case KindCall:
		v.call(s.Call, vs)
	case KindSwitch:
		for _, c := range s.Switch {
			v.exprs(c.Cond, vs)
			v.step(c.Body, b, vs, depth)
		}
	case KindFor:
		v.loopBody(s.For, v.forLoop(s.For, vs, false), depth)
	case KindParallel:
		v.parallel(s, vs, depth)
	case KindTry:
		v.step(s.Try.Body, b, vs, depth)
		if s.Try.Retry != nil {
			v.retry(s.Try.Retry, vs)
		}
		if ex := s.Try.Except; ex != nil {
			es := &vscope{parent: vs, vars: map[string]bool{}}
			if ex.As != "" {
				es.vars[ex.As] = true
			}
			v.defs(ex.Steps, es)
			ex.locals = es.vars
			v.steps(ex.Steps, v.blockOf(ex.Steps), es, depth)
		}
	case KindRaise:
		v.exprs(s.Raise, vs)
	case KindReturn:
		v.exprs(s.Return, vs)
		if b.parallel && !allowReturnInParallel {
			v.d.errorf(s.Pos, "return is not allowed inside a parallel branch or iteration")
		}
	case KindSteps:
		v.steps(s.Steps, v.blockOf(s.Steps), vs, depth)
	}
}

// next checks a jump: see the jump rule in rules.go.
func (v *validator) next(s *Step, b *block) {
	switch s.Next {
	case "":
		return
	case "end":
		if b.parallel && !allowReturnInParallel {
			v.d.errorf(s.NextPos, "next: end is not allowed inside a parallel branch or iteration")
		}
		return
	case "break", "continue":
		loop := b
		for loop != nil && !loop.frame {
			loop = loop.parent
		}
		if loop == nil || !loop.loop {
			v.d.errorf(s.NextPos, "next: %s is only allowed inside a for loop", s.Next)
		} else if s.Next == "break" && loop.parallel && !allowReturnInParallel {
			v.d.errorf(s.NextPos, "next: break is not allowed in a parallel for loop")
		}
		return
	}
	target, ok := v.names[s.Next]
	if !ok {
		v.d.errorf(s.NextPos, "next: step %q does not exist in %s", s.Next, v.routine.Name)
		return
	}
	for c := b; c != nil; c = c.parent {
		if c == target.b {
			return
		}
		if c.frame {
			break
		}
	}
	v.d.errorf(s.NextPos, "next: step %q is in another block: a jump cannot enter a nested block or leave a for loop, a parallel branch or a subworkflow", s.Next)
}

// write checks an assignment to name (or into it, when indexed).
func (v *validator) write(name string, p Pos, vs *vscope, indexed bool) {
	owner, ok := vs.lookup(name)
	if !ok {
		if indexed {
			v.d.errorf(p, "assignment into undefined variable %q", name)
		}
		return
	}
	for c := vs; c != owner; c = c.parent {
		if c.boundary && !c.shared[name] {
			v.d.errorf(p, "variable %q belongs to the scope outside the parallel step: list it in shared to assign it", name)
			return
		}
	}
}

func (v *validator) call(c *Call, vs *vscope) {
	for _, a := range c.Args {
		v.exprs(a.Value, vs)
	}
	if c.Result != "" {
		v.write(c.Result, c.FuncPos, vs, false)
	}
	if r, ok := v.w.Routines[c.Func]; ok {
		c.kind = callSubworkflow
		given := map[string]bool{}
		for _, a := range c.Args {
			given[a.Name] = true
			if !slices.ContainsFunc(r.Params, func(p Param) bool { return p.Name == a.Name }) {
				v.d.errorf(a.Pos, "subworkflow %s has no parameter %q", r.Name, a.Name)
			}
		}
		for _, p := range r.Params {
			if p.Default == nil && !given[p.Name] {
				v.d.errorf(c.FuncPos, "call to %s is missing argument %q", r.Name, p.Name)
			}
		}
		return
	}
	f, ok := v.cat.Func(c.Func)
	if !ok {
		v.d.errorf(c.FuncPos, "call: %q is neither a subworkflow nor a supported standard library function or connector", c.Func)
		return
	}
	if isConnector(c.Func) {
		c.kind = callConnector
	}
	given := map[string]bool{}
	for _, a := range c.Args {
		given[a.Name] = true
		if !slices.ContainsFunc(f.Params, func(p expr.Param) bool { return p.Name == a.Name }) {
			v.d.errorf(a.Pos, "%s has no argument %q", c.Func, a.Name)
		}
	}
	for _, p := range f.Params {
		if !p.Optional && !given[p.Name] {
			v.d.errorf(c.FuncPos, "call to %s is missing argument %q", c.Func, p.Name)
		}
	}
}

// forLoop checks a loop's header and returns the scope of its body.
func (v *validator) forLoop(f *For, vs *vscope, parallel bool) *vscope {
	for _, x := range []*Value{f.In, f.Range} {
		if x != nil {
			v.exprs(x, vs)
		}
	}
	ls := &vscope{parent: vs, vars: map[string]bool{f.Value: true}, boundary: parallel}
	if f.Index != "" {
		ls.vars[f.Index] = true
	}
	// A loop variable must not be used outside its loop [D] parallel-steps.
	for name := range ls.vars {
		if _, outside := vs.lookup(name); outside {
			v.d.errorf(f.Pos, "loop variable %q is also a variable outside the loop", name)
		}
	}
	return ls
}

func (v *validator) loopBody(f *For, ls *vscope, depth int) {
	v.defs(f.Steps, ls)
	f.locals = ls.vars
	v.steps(f.Steps, v.blockOf(f.Steps), ls, depth)
}

func (v *validator) parallel(s *Step, vs *vscope, depth int) {
	p := s.Parallel
	if depth+1 > MaxParallelDepth {
		v.d.errorf(s.Pos, "parallel steps nest deeper than %d", MaxParallelDepth)
	}
	shared := map[string]bool{}
	for _, name := range p.Shared {
		if _, ok := vs.lookup(name); !ok {
			v.d.errorf(p.Pos, "shared variable %q must be assigned before the parallel step", name)
		}
		shared[name] = true
	}
	if p.ConcurrencyLimit != nil {
		v.exprs(p.ConcurrencyLimit, vs)
	}
	if p.For != nil {
		ls := v.forLoop(p.For, vs, true)
		ls.shared = shared
		v.loopBody(p.For, ls, depth+1)
	}
	for _, br := range p.Branches {
		bs := &vscope{parent: vs, vars: map[string]bool{}, boundary: true, shared: shared}
		v.defs(br.Steps, bs)
		br.locals = bs.vars
		v.steps(br.Steps, v.blockOf(br.Steps), bs, depth+1)
	}
}

// retry checks a retry policy; a custom predicate must be a subworkflow with
// one parameter.
func (v *validator) retry(r *Value, vs *vscope) {
	v.exprs(r, vs)
	if r.kind != valueMap && r.kind != valueLiteral {
		return
	}
	var pred *Value
	for i, k := range r.keys {
		if k == "predicate" {
			pred = r.vals[i]
		}
	}
	if pred == nil || pred.Expr() == nil {
		if pred != nil || r.kind == valueLiteral {
			v.d.errorf(r.Pos, "retry predicate must be an expression naming a subworkflow or ${http.default_retry_predicate}")
		}
		return
	}
	refs := pred.Expr().Refs()
	if len(refs) == 1 && len(pred.Expr().Calls()) == 0 {
		if sub, ok := v.w.Routines[refs[0]]; ok && len(sub.Params) != 1 {
			v.d.errorf(pred.Pos, "retry predicate %s must take exactly one parameter (the error)", sub.Name)
		}
	}
}

// exprs checks every expression of a value.
func (v *validator) exprs(x *Value, vs *vscope) {
	x.walkExprs(func(e *expr.Expr, p Pos) { v.expr(e, p, vs) })
}

// expr checks what an expression reads and calls: defined variables, known
// constants, subworkflows and non-blocking functions.
func (v *validator) expr(e *expr.Expr, p Pos, vs *vscope) {
	for _, ref := range e.Refs() {
		root, _, _ := strings.Cut(ref, ".")
		if _, ok := vs.lookup(root); ok {
			continue
		}
		if _, ok := v.w.Routines[root]; ok {
			continue
		}
		if v.knownPath(ref) {
			continue
		}
		v.d.errorf(p, "undefined variable %q in ${%s}", root, e)
	}
	err := e.Check(funcLookup{v})
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else if err != nil {
		errs = []error{err}
	}
	for _, err := range errs {
		msg := errors.Unwrap(err).Error()
		var ee *expr.Error
		if errors.As(err, &ee) {
			msg = ee.Message
		}
		if errors.Is(err, expr.ErrBlockingCall) {
			msg += " (use a call step)"
		}
		v.d.errorf(p, "in ${%s}: %s", e, msg)
	}
}

// funcLookup finds the functions an expression may call: subworkflows (by
// position) and the library.
type funcLookup struct{ v *validator }

func (l funcLookup) Func(name string) (*expr.Func, bool) {
	if r, ok := l.v.w.Routines[name]; ok && name != "main" {
		return &expr.Func{Name: name, Params: routineParams(r)}, true
	}
	return l.v.cat.Func(name)
}

// knownPath reports whether a prefix of a dotted path names a library constant
// or function.
func (v *validator) knownPath(ref string) bool {
	parts := strings.Split(ref, ".")
	for i := len(parts); i >= 1; i-- {
		name := strings.Join(parts[:i], ".")
		if _, ok := v.cat.Const(name); ok {
			return true
		}
		if _, ok := v.cat.Func(name); ok {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
