package expr

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Sentinel errors for misuse that Google rejects at deploy time. The engine
// checks Calls() against its registry before running, so at run time these
// only surface if that check was skipped.
var (
	// ErrUnknownFunction: a call names no registered function.
	ErrUnknownFunction = errors.New("unknown function")
	// ErrBlockingCall: a blocking function (http.*, sys.sleep, sys.log,
	// googleapis.*) was called inside an expression instead of a call step.
	ErrBlockingCall = errors.New("blocking function called in an expression")
	// ErrArgCount: a call passes too few or too many arguments.
	ErrArgCount = errors.New("wrong number of arguments")
	// ErrDuplicate: a name was registered twice.
	ErrDuplicate = errors.New("name already registered")
)

// Param is one parameter of a function.
type Param struct {
	Name string
	// Optional parameters may be omitted; Default is then passed in their place.
	Optional bool
	Default  any
}

// Func is a function callable by name: positionally inside expressions, by
// parameter name from a call step's args.
type Func struct {
	Name   string
	Params []Param
	// Blocking functions may only be called from call steps.
	Blocking bool
	// Call receives exactly len(Params) arguments, defaults filled in.
	Call func(ctx context.Context, args []any) (any, error)
}

// arity returns how many positional arguments f accepts: at least up to its
// last required parameter, at most all of them.
func (f *Func) arity() (lo, hi int) {
	for i, p := range f.Params {
		if !p.Optional {
			lo = i + 1
		}
	}
	return lo, len(f.Params)
}

// checkCount reports a wrong number of positional arguments as a TypeError
// wrapping ErrArgCount.
func (f *Func) checkCount(n int) error {
	lo, hi := f.arity()
	if n >= lo && n <= hi {
		return nil
	}
	want := fmt.Sprint(hi)
	if lo != hi {
		want = fmt.Sprintf("%d to %d", lo, hi)
	}
	return &Error{Tags: []string{TagTypeError}, Message: fmt.Sprintf("%s() takes %s arguments (%d given)", f.Name, want, n), cause: ErrArgCount}
}

// Bind checks a positional argument list against Params and fills in the
// defaults of the omitted trailing parameters. Defaults are copied, so a
// caller that mutates an argument in place cannot change the next call's.
func (f *Func) Bind(args []any) ([]any, error) {
	if err := f.checkCount(len(args)); err != nil {
		return nil, err
	}
	out := make([]any, len(f.Params))
	copy(out, args)
	for i := len(args); i < len(f.Params); i++ {
		out[i] = deepCopy(f.Params[i].Default)
	}
	return out, nil
}

// BindNamed maps a call step's `args:` onto positions, reporting every unknown
// and every missing required argument at once (a TypeError wrapping
// ErrArgCount).
func (f *Func) BindNamed(args map[string]any) ([]any, error) {
	out := make([]any, len(f.Params))
	var missing []string
	known := make(map[string]bool, len(f.Params))
	for i, p := range f.Params {
		known[p.Name] = true
		v, ok := args[p.Name]
		switch {
		case ok:
			out[i] = v
		case p.Optional:
			out[i] = deepCopy(p.Default)
		default:
			missing = append(missing, p.Name)
		}
	}
	var unknown []string
	for name := range args {
		if !known[name] {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	var problems []string
	if len(unknown) > 0 {
		problems = append(problems, "unknown argument(s) "+strings.Join(unknown, ", "))
	}
	if len(missing) > 0 {
		problems = append(problems, "missing required argument(s) "+strings.Join(missing, ", "))
	}
	if len(problems) > 0 {
		return nil, &Error{Tags: []string{TagTypeError}, Message: f.Name + ": " + strings.Join(problems, "; "), cause: ErrArgCount}
	}
	return out, nil
}

// FuncLookup finds functions by dotted name; Registry and Env implement it.
type FuncLookup interface {
	Func(name string) (*Func, bool)
}

// Env is what an expression can see: variables by name, functions and module
// constants by dotted name. Variables shadow module names (undocumented).
type Env interface {
	Var(name string) (any, bool)
	Func(name string) (*Func, bool)
	Const(name string) (any, bool)
}

// Registry holds named functions and constants (module members that are values,
// e.g. retry.default_backoff). Build it fully before sharing it: lookups are
// safe for concurrent use, registration is not.
type Registry struct {
	funcs  map[string]*Func
	consts map[string]any
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{funcs: make(map[string]*Func), consts: make(map[string]any)}
}

// AddFunc registers f under f.Name.
func (r *Registry) AddFunc(f *Func) error {
	if r.taken(f.Name) {
		return fmt.Errorf("register function %s: %w", f.Name, ErrDuplicate)
	}
	r.funcs[f.Name] = f
	return nil
}

// AddConst registers a constant value under a dotted name.
func (r *Registry) AddConst(name string, v any) error {
	if r.taken(name) {
		return fmt.Errorf("register constant %s: %w", name, ErrDuplicate)
	}
	r.consts[name] = v
	return nil
}

func (r *Registry) taken(name string) bool {
	_, f := r.funcs[name]
	_, c := r.consts[name]
	return f || c
}

// Func looks a function up by dotted name.
func (r *Registry) Func(name string) (*Func, bool) {
	f, ok := r.funcs[name]
	return f, ok
}

// Const looks a constant up by dotted name. Lists and maps are deep-copied so
// a caller that mutates the result cannot change the registry.
func (r *Registry) Const(name string) (any, bool) {
	v, ok := r.consts[name]
	return deepCopy(v), ok
}

// Clone returns a registry with the same entries that can be extended without
// touching r (the engine adds its blocking functions and subworkflows to a
// clone of the standard library).
func (r *Registry) Clone() *Registry {
	return &Registry{funcs: maps.Clone(r.funcs), consts: maps.Clone(r.consts)}
}

// NewEnv returns an Env of fixed variables over a registry.
func NewEnv(vars map[string]any, r *Registry) Env { return mapEnv{vars: vars, Registry: r} }

type mapEnv struct {
	vars map[string]any
	*Registry
}

func (e mapEnv) Var(name string) (any, bool) {
	v, ok := e.vars[name]
	return v, ok
}
