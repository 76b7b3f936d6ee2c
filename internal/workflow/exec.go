package workflow

import (
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"billrun.dev/billrun/internal/workflow/expr"
)

// flowKind is how control leaves a step or a list of steps.
type flowKind int

const (
	flowNormal   flowKind = iota // go on with the following step
	flowJump                     // next: a step name
	flowBreak                    // next: break
	flowContinue                 // next: continue
	flowEnd                      // next: end
	flowReturn                   // return: value
)

type flow struct {
	kind   flowKind
	target string
	value  any
}

// frame is one activation of a routine.
type frame struct {
	x       *execution
	routine *Routine
	depth   int // call depth, main is 1
	pdepth  int // parallel steps this frame runs inside
}

func (x *execution) run(ctx context.Context, argument any) (any, error) {
	main := x.wf.Main()
	var args []any
	if len(main.Params) > 0 {
		args = []any{argument}
	}
	res, err := x.call(ctx, main, args, nil, 0, 0)
	if err != nil {
		return nil, asRunError(err)
	}
	return res, nil
}

// asRunError turns whatever ended an execution into a *RunError, except a
// cancelled context, which is returned as is.
func asRunError(err error) error {
	var re *RunError
	if errors.As(err, &re) {
		return re
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &RunError{Err: expr.AsError(err)}
}

// call runs routine r with positional args or named args, at call depth
// depth+1.
func (x *execution) call(ctx context.Context, r *Routine, args []any, named map[string]any, depth, pdepth int) (any, error) {
	if depth+1 > MaxCallDepth {
		return nil, expr.RecursionError("maximum call depth of %d exceeded calling %s", MaxCallDepth, r.Name)
	}
	if len(args) > len(r.Params) {
		return nil, expr.TypeError("%s takes %d arguments (%d given)", r.Name, len(r.Params), len(args))
	}
	sc := newScope(x, nil, false, r.locals)
	defer sc.release()
	for i, p := range r.Params {
		var (
			v   any
			ok  bool
			err error
		)
		if i < len(args) {
			v, ok = args[i], true
		} else if named != nil {
			v, ok = named[p.Name]
		}
		if !ok {
			if p.Default == nil {
				return nil, expr.TypeError("%s: missing argument %q", r.Name, p.Name)
			}
			if v, err = sc.eval(ctx, p.Default); err != nil {
				return nil, err
			}
		}
		if err := sc.define(p.Name, v); err != nil {
			return nil, err
		}
	}
	fr := &frame{x: x, routine: r, depth: depth + 1, pdepth: pdepth}
	f, err := fr.runSteps(ctx, r.Steps, sc)
	if err != nil {
		return nil, err
	}
	if f.kind == flowReturn {
		return f.value, nil
	}
	return nil, nil
}

// subworkflowFunc exposes a subworkflow to expressions and retry predicates.
func (x *execution) subworkflowFunc(r *Routine) *expr.Func {
	return &expr.Func{Name: r.Name, Params: routineParams(r), Call: func(ctx context.Context, args []any) (any, error) {
		fr := frameFrom(ctx)
		depth, pdepth := 0, 0
		if fr != nil {
			depth, pdepth = fr.depth, fr.pdepth
		}
		// Drop the omitted trailing arguments so that the routine's own
		// defaults (expressions evaluated in its scope) apply.
		n := len(args)
		for n > 0 && args[n-1] == (omitted{}) {
			n--
		}
		return x.call(ctx, r, args[:n], nil, depth, pdepth)
	}}
}

// omitted marks an optional subworkflow argument the caller left out.
type omitted struct{}

// routineParams describes a routine's parameters to expressions: those with
// defaults are optional (their defaults are applied by the routine itself).
func routineParams(r *Routine) []expr.Param {
	params := make([]expr.Param, len(r.Params))
	for i, p := range r.Params {
		params[i] = expr.Param{Name: p.Name, Optional: p.Default != nil, Default: omitted{}}
	}
	return params
}

type frameKey struct{}

// frameFrom returns the frame running the current step: library functions
// and subworkflow calls reach their execution through ctx.
func frameFrom(ctx context.Context) *frame {
	fr, _ := ctx.Value(frameKey{}).(*frame)
	return fr
}

// stepKey carries the name of the step being run (for sys.log records).
type stepKey struct{}

func (fr *frame) runSteps(ctx context.Context, steps []*Step, sc *scope) (flow, error) {
	ctx = context.WithValue(ctx, frameKey{}, fr)
	for i := 0; i < len(steps); {
		f, err := fr.runStep(ctx, steps[i], sc)
		if err != nil {
			return flow{}, err
		}
		if f.kind != flowJump {
			if f.kind != flowNormal {
				return f, nil
			}
			i++
			continue
		}
		j := indexOf(steps, f.target)
		if j < 0 {
			return f, nil // the target is in an enclosing block
		}
		i = j
	}
	return flow{}, nil
}

func indexOf(steps []*Step, name string) int {
	for i, s := range steps {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// countStep counts one step against the execution's limit.
func (fr *frame) countStep() error {
	if n := fr.x.steps.Add(1); n > MaxSteps {
		return fatal(expr.NewError(expr.TagResourceLimitError, "step limit of %d reached", MaxSteps))
	}
	return nil
}

func (fr *frame) runStep(ctx context.Context, s *Step, sc *scope) (flow, error) {
	if err := ctx.Err(); err != nil {
		return flow{}, err
	}
	if err := fr.countStep(); err != nil {
		return flow{}, locate(err, fr.routine.Name, s)
	}
	var start time.Time
	if fr.x.events != nil {
		start = fr.x.eng.opts.Clock.Now()
	}
	f, attempts, err := fr.runBody(context.WithValue(ctx, stepKey{}, s.Name), s, sc)
	if fr.x.events != nil {
		fr.record(s, start, attempts, err)
	}
	if err != nil {
		return flow{}, locate(err, fr.routine.Name, s)
	}
	return f, nil
}

// locate adds the step to the stack of an error passing through it.
func locate(err error, routine string, s *Step) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	re, ok := err.(*RunError)
	if !ok {
		re = &RunError{Err: expr.AsError(err)}
	}
	re.Stack = append(re.Stack, StackFrame{Routine: routine, Step: s.Name, Line: s.Pos.Line, Column: s.Pos.Col})
	return re
}

func (fr *frame) record(s *Step, start time.Time, attempts int, err error) {
	e := &StepEntry{
		EntryID:  fr.x.entryID.Add(1),
		Routine:  fr.routine.Name,
		Step:     s.Name,
		StepType: s.StepType(),
		State:    "STATE_SUCCEEDED",
		Start:    start,
		End:      fr.x.eng.opts.Clock.Now(),
		Attempts: attempts,
	}
	if err != nil {
		e.State = "STATE_FAILED"
		if ee := expr.AsError(err); ee != nil {
			if v, ok := ee.Value().(map[string]any); ok {
				e.Error = v
			} else {
				e.Error = map[string]any{"message": ee.Message}
			}
		}
	}
	fr.x.emit(Event{Time: e.End, Step: e})
}

// runBody runs a step's body and then its next; attempts counts the tries of a
// try step.
func (fr *frame) runBody(ctx context.Context, s *Step, sc *scope) (flow, int, error) {
	var (
		f        flow
		attempts int
		err      error
	)
	switch s.Kind {
	case KindAssign:
		err = fr.assign(ctx, s.Assign, sc)
	case KindCall:
		err = fr.callStep(ctx, s.Call, sc)
	case KindSwitch:
		f, err = fr.switchStep(ctx, s.Switch, sc)
	case KindFor:
		f, err = fr.forLoop(ctx, s.For, sc)
	case KindParallel:
		err = fr.parallel(ctx, s.Parallel, sc)
	case KindTry:
		f, attempts, err = fr.try(ctx, s.Try, sc)
	case KindRaise:
		var v any
		if v, err = sc.eval(ctx, s.Raise); err == nil {
			err = expr.ErrorFromValue(v)
		}
	case KindReturn:
		f.kind = flowReturn
		f.value, err = sc.eval(ctx, s.Return)
	case KindSteps:
		f, err = fr.runSteps(ctx, s.Steps, sc)
	}
	if err != nil || f.kind != flowNormal || s.Next == "" {
		return f, attempts, err
	}
	switch s.Next {
	case "end":
		return flow{kind: flowEnd}, attempts, nil
	case "break":
		return flow{kind: flowBreak}, attempts, nil
	case "continue":
		return flow{kind: flowContinue}, attempts, nil
	}
	return flow{kind: flowJump, target: s.Next}, attempts, nil
}

func (fr *frame) assign(ctx context.Context, items []*Assignment, sc *scope) error {
	for _, a := range items {
		if err := fr.assignOne(ctx, a, sc); err != nil {
			return err
		}
	}
	return nil
}

// assignOne evaluates and stores one assignment. An assignment to a shared
// variable from a parallel branch is atomic: evaluation and store happen under
// the owning scope's assignment lock ([D] parallel-steps).
func (fr *frame) assignOne(ctx context.Context, a *Assignment, sc *scope) error {
	owner, shared := sc.owner(a.Target.Root)
	if shared {
		owner.assignMu.Lock()
		defer owner.assignMu.Unlock()
	}
	v, err := sc.eval(ctx, a.Value)
	if err != nil {
		return err
	}
	return fr.store(ctx, sc, owner, a.Target, v)
}

// store writes v to target: into owner when the root variable exists, else a
// new variable in sc.
func (fr *frame) store(ctx context.Context, sc, owner *scope, t *Target, v any) error {
	if len(t.Path) == 0 {
		if owner == nil {
			owner = sc
		}
		return owner.store(t.Root, v)
	}
	if owner == nil {
		return expr.KeyError("variable %q is not defined", t.Root)
	}
	path := make([]any, len(t.Path))
	for i, sel := range t.Path {
		if sel.Index == nil {
			path[i] = sel.Key
			continue
		}
		k, err := sel.Index.Eval(ctx, env{sc: sc})
		if err != nil {
			return err
		}
		path[i] = k
	}
	return owner.storeAt(t.Root, path, v)
}

// setResult stores a call's result in variable name.
func (fr *frame) setResult(sc *scope, name string, v any) error {
	owner, shared := sc.owner(name)
	if owner == nil {
		owner = sc
	}
	if shared {
		owner.assignMu.Lock()
		defer owner.assignMu.Unlock()
	}
	return owner.store(name, v)
}

func (fr *frame) callStep(ctx context.Context, c *Call, sc *scope) error {
	args := make(map[string]any, len(c.Args))
	for _, a := range c.Args {
		v, err := sc.eval(ctx, a.Value)
		if err != nil {
			return err
		}
		args[a.Name] = v
	}
	var (
		res any
		err error
	)
	if r, ok := fr.x.wf.Routines[c.Func]; ok {
		res, err = fr.x.call(ctx, r, nil, args, fr.depth, fr.pdepth)
	} else {
		f, ok := fr.x.reg.Func(c.Func)
		if !ok {
			return expr.NewError(expr.TagSystemError, "unknown function %s", c.Func)
		}
		var bound []any
		if bound, err = f.BindNamed(args); err != nil {
			return err
		}
		res, err = f.Call(ctx, bound)
	}
	if err != nil {
		return err
	}
	if c.Result != "" {
		return fr.setResult(sc, c.Result, res)
	}
	return nil
}

func (fr *frame) switchStep(ctx context.Context, conds []*Condition, sc *scope) (flow, error) {
	for _, c := range conds {
		v, err := sc.eval(ctx, c.Cond)
		if err != nil {
			return flow{}, err
		}
		b, ok := v.(bool)
		if !ok {
			return flow{}, expr.TypeError("switch condition must be a boolean, got %s", expr.TypeName(v))
		}
		if b {
			f, _, err := fr.runBody(ctx, c.Body, sc)
			return f, err
		}
	}
	return flow{}, nil
}

// iterations evaluates a loop's in or range into the values to iterate.
func (fr *frame) iterations(ctx context.Context, f *For, sc *scope) ([]any, error) {
	if f.In != nil {
		v, err := sc.eval(ctx, f.In)
		if err != nil {
			return nil, err
		}
		list, ok := v.([]any)
		if !ok {
			return nil, expr.TypeError("for in must be a list, got %s", expr.TypeName(v))
		}
		return list, nil
	}
	v, err := sc.eval(ctx, f.Range)
	if err != nil {
		return nil, err
	}
	r, ok := v.([]any)
	if !ok || len(r) != 2 {
		return nil, expr.TypeError("range must be a list of two numbers")
	}
	lo, hi := r[0], r[1]
	li, lok := lo.(int64)
	hi64, hok := hi.(int64)
	if lok && hok {
		if hi64-li+1 > MaxSteps {
			return nil, fatal(expr.NewError(expr.TagResourceLimitError, "range of %d iterations exceeds the step limit", hi64-li+1))
		}
		out := make([]any, 0, max(hi64-li+1, 0))
		for i := li; i <= hi64; i++ {
			out = append(out, i)
		}
		return out, nil
	}
	lf, lok := toFloat(lo)
	hf, hok := toFloat(hi)
	if !lok || !hok {
		return nil, expr.TypeError("range bounds must be numbers")
	}
	if hf-lf+1 > MaxSteps {
		return nil, fatal(expr.NewError(expr.TagResourceLimitError, "range exceeds the step limit"))
	}
	var out []any
	for x := lf; x <= hf; x++ {
		out = append(out, x)
	}
	return out, nil
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// forLoop runs a sequential for loop; each iteration has its own scope.
func (fr *frame) forLoop(ctx context.Context, f *For, sc *scope) (flow, error) {
	items, err := fr.iterations(ctx, f, sc)
	if err != nil {
		return flow{}, err
	}
	for i, item := range items {
		res, err := fr.iteration(ctx, f, sc, int64(i), item, false)
		if err != nil {
			return flow{}, err
		}
		switch res.kind {
		case flowBreak:
			return flow{}, nil
		case flowContinue, flowNormal:
			continue
		}
		return res, nil
	}
	return flow{}, nil
}

// iteration runs one iteration of a loop body in a new scope.
func (fr *frame) iteration(ctx context.Context, f *For, sc *scope, i int64, item any, boundary bool) (flow, error) {
	ls := newScope(fr.x, sc, boundary, f.locals)
	defer ls.release()
	if err := ls.define(f.Value, item); err != nil {
		return flow{}, err
	}
	if f.Index != "" {
		if err := ls.define(f.Index, i); err != nil {
			return flow{}, err
		}
	}
	return fr.runSteps(ctx, f.Steps, ls)
}

// parallel runs branches or iterations concurrently, up to the concurrency
// limit, lets all of them finish, then raises an UnhandledBranchError if any
// had an unhandled error (exception_policy continueAll, [D]).
func (fr *frame) parallel(ctx context.Context, p *Parallel, sc *scope) error {
	if fr.pdepth+1 > MaxParallelDepth {
		return expr.NewError(expr.TagParallelNestingError, "parallel steps nest deeper than %d", MaxParallelDepth)
	}
	limit := int64(DefaultConcurrencyLimit)
	if p.ConcurrencyLimit != nil {
		v, err := sc.eval(ctx, p.ConcurrencyLimit)
		if err != nil {
			return err
		}
		n, ok := v.(int64)
		if !ok || n < 1 || n > MaxConcurrency {
			return expr.ValueError("concurrency_limit must be an integer from 1 to %d, got %s", MaxConcurrency, expr.Display(v))
		}
		limit = n
	}
	type job struct {
		id  string
		run func(ctx context.Context, bf *frame) error
	}
	var jobs []job
	if p.For != nil {
		items, err := fr.iterations(ctx, p.For, sc)
		if err != nil {
			return err
		}
		jobs = make([]job, len(items))
		for i, item := range items {
			jobs[i] = job{id: strconv.Itoa(i), run: func(ctx context.Context, bf *frame) error {
				_, err := bf.iteration(ctx, p.For, sc, int64(i), item, true)
				return err
			}}
		}
	} else {
		for _, b := range p.Branches {
			jobs = append(jobs, job{id: b.Name, run: func(ctx context.Context, bf *frame) error {
				bs := newScope(fr.x, sc, true, b.locals)
				defer bs.release()
				_, err := bf.runSteps(ctx, b.Steps, bs)
				return err
			}})
		}
	}
	bf := *fr
	bf.pdepth++
	// A fatal error (a resource limit, cancellation) stops the other branches.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		failed  = map[int]any{} // by job index
		fatalEr error
		sem     = make(chan struct{}, limit)
	)
	for i, j := range jobs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			branch := bf
			err := j.run(ctx, &branch)
			if err == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if isFatal(err) {
				if fatalEr == nil {
					fatalEr = err
					stop()
				}
				return
			}
			if len(failed) < MaxUnhandledBranchErr {
				failed[i] = map[string]any{"id": j.id, "error": errorValue(err)}
			}
		}()
	}
	wg.Wait()
	if fatalEr != nil {
		return fatalEr
	}
	if len(failed) == 0 {
		return nil
	}
	branches := make([]any, 0, len(failed))
	for _, i := range slices.Sorted(maps.Keys(failed)) {
		branches = append(branches, failed[i])
	}
	e := expr.NewError(expr.TagUnhandledBranchError, "%s", unhandledBranchMessage)
	e.Extra = map[string]any{"branches": branches}
	return e
}

// errorValue is what `except: as:` binds for err.
func errorValue(err error) any { return expr.AsError(err).Value() }

// try runs a try step: the body, retried by the policy, then the except block.
func (fr *frame) try(ctx context.Context, t *Try, sc *scope) (flow, int, error) {
	var (
		pol      *retryPolicy
		attempts int
	)
	for {
		attempts++
		f, _, err := fr.runBody(ctx, t.Body, sc)
		if err == nil {
			return f, attempts, nil
		}
		if isFatal(err) {
			return flow{}, attempts, err
		}
		if t.Retry != nil {
			if pol == nil {
				var perr error
				if pol, perr = fr.retryPolicy(ctx, t.Retry, sc); perr != nil {
					return flow{}, attempts, perr
				}
			}
			again, perr := fr.shouldRetry(ctx, pol, err, attempts-1)
			if perr != nil {
				return flow{}, attempts, perr
			}
			if again {
				if serr := fr.x.eng.opts.Clock.Sleep(ctx, pol.delay(attempts-1)); serr != nil {
					return flow{}, attempts, serr
				}
				if cerr := fr.countStep(); cerr != nil {
					return flow{}, attempts, cerr
				}
				continue
			}
		}
		if t.Except == nil {
			return flow{}, attempts, err
		}
		f, eerr := fr.except(ctx, t.Except, sc, err)
		return f, attempts, eerr
	}
}

// except runs an except block with the error bound to its as variable; the
// variable and anything created in the block are local to it.
func (fr *frame) except(ctx context.Context, ex *Except, sc *scope, cause error) (flow, error) {
	if err := fr.countStep(); err != nil {
		return flow{}, err
	}
	es := newScope(fr.x, sc, false, ex.locals)
	defer es.release()
	if ex.As != "" {
		if err := es.define(ex.As, errorValue(cause)); err != nil {
			return flow{}, err
		}
	}
	return fr.runSteps(ctx, ex.Steps, es)
}

// retryPolicy is an evaluated retry policy.
type retryPolicy struct {
	predicate  expr.FuncRef
	maxRetries int64
	initial    float64 // seconds
	maxDelay   float64 // seconds
	multiplier float64
}

// delay is the backoff before retry n (0-based): initial·multiplierⁿ, capped.
func (p *retryPolicy) delay(n int) time.Duration {
	d := p.initial * math.Pow(p.multiplier, float64(n))
	d = min(d, p.maxDelay)
	return time.Duration(d * float64(time.Second))
}

func (fr *frame) retryPolicy(ctx context.Context, v *Value, sc *scope) (*retryPolicy, error) {
	raw, err := sc.eval(ctx, v)
	if err != nil {
		return nil, err
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, expr.TypeError("retry policy must be a map, got %s", expr.TypeName(raw))
	}
	p := &retryPolicy{}
	if p.predicate, ok = m["predicate"].(expr.FuncRef); !ok {
		return nil, expr.TypeError("retry predicate must be a function (a subworkflow or ${http.default_retry_predicate}), got %s", expr.TypeName(m["predicate"]))
	}
	if p.maxRetries, ok = m["max_retries"].(int64); !ok || p.maxRetries < 0 {
		return nil, expr.TypeError("retry max_retries must be a non-negative integer, got %s", expr.Display(m["max_retries"]))
	}
	b, ok := m["backoff"].(map[string]any)
	if !ok {
		return nil, expr.TypeError("retry backoff must be a map, got %s", expr.TypeName(m["backoff"]))
	}
	for key, dst := range map[string]*float64{"initial_delay": &p.initial, "max_delay": &p.maxDelay, "multiplier": &p.multiplier} {
		n, ok := toFloat(b[key])
		if !ok || n < 0 {
			return nil, expr.TypeError("retry backoff %s must be a non-negative number, got %s", key, expr.Display(b[key]))
		}
		*dst = n
	}
	return p, nil
}

// shouldRetry calls the predicate with the error (for every error) and
// reports whether retry number n+1 may run.
func (fr *frame) shouldRetry(ctx context.Context, p *retryPolicy, cause error, n int) (bool, error) {
	f, ok := fr.x.lookupFunc(p.predicate.Name)
	if !ok {
		return false, expr.NewError(expr.TagSystemError, "retry predicate %s does not exist", p.predicate.Name)
	}
	args, err := f.Bind([]any{errorValue(cause)})
	if err != nil {
		return false, err
	}
	v, err := f.Call(context.WithValue(ctx, frameKey{}, fr), args)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, expr.TypeError("retry predicate %s must return a boolean, got %s", p.predicate.Name, expr.TypeName(v))
	}
	return b && int64(n) < p.maxRetries, nil
}

// lookupFunc finds a subworkflow or library function by name.
func (x *execution) lookupFunc(name string) (*expr.Func, bool) {
	if f, ok := x.subs[name]; ok {
		return f, true
	}
	return x.reg.Func(name)
}
