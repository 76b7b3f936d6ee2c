package expr

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"
)

// StdlibOptions are the outside inputs of the standard library, injectable so
// that tests are deterministic. The zero value uses the real clock, an empty
// environment and random UUIDs.
type StdlibOptions struct {
	// Now is the clock behind sys.now. Default: time.Now.
	Now func() time.Time
	// Env holds what sys.get_env can read: user environment variables and the
	// GOOGLE_CLOUD_* built-ins the engine provides. Nil means none.
	Env map[string]string
	// UUID returns a new version 4 UUID string for uuid.generate. Default:
	// crypto/rand.
	UUID func() (string, error)
}

// The fields of retry.default_backoff, as Google documents them: delays in
// seconds, each delay multiplied by the multiplier up to the maximum.
const (
	DefaultBackoffInitialDelay int64   = 1
	DefaultBackoffMaxDelay     int64   = 60
	DefaultBackoffMultiplier   float64 = 1.25
)

// NewStdlib returns a registry holding the non-blocking standard library and
// the expression helpers (len, keys, int, double, string, default, if,
// get_type), plus the constant retry.default_backoff. The engine adds the
// blocking functions (http.*, sys.sleep, sys.log, googleapis.*) and the
// http.default_retry* policies to a Clone of it.
func NewStdlib(opts StdlibOptions) *Registry {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.UUID == nil {
		opts.UUID = randomUUID
	}
	r := NewRegistry()
	b := &builder{r: r}
	registerHelpers(b)
	registerData(b)
	registerText(b)
	registerSys(b, opts)
	b.constant("retry.default_backoff", map[string]any{
		"initial_delay": DefaultBackoffInitialDelay,
		"max_delay":     DefaultBackoffMaxDelay,
		"multiplier":    DefaultBackoffMultiplier,
	})
	return r
}

// builder registers the library; a duplicate name is a programming error in
// this file, caught by the tests, so it panics rather than returning.
type builder struct{ r *Registry }

func (b *builder) fn(name string, params []Param, call func(ctx context.Context, args []any) (any, error)) {
	if err := b.r.AddFunc(&Func{Name: name, Params: params, Call: call}); err != nil {
		panic(err)
	}
}

func (b *builder) constant(name string, v any) {
	if err := b.r.AddConst(name, v); err != nil {
		panic(err)
	}
}

// req and opt build parameter lists.
func req(name string) Param          { return Param{Name: name} }
func opt(name string, def any) Param { return Param{Name: name, Optional: true, Default: def} }
func params(ps ...Param) []Param     { return ps }
func noCtx(f func(args []any) (any, error)) func(context.Context, []any) (any, error) {
	return func(_ context.Context, args []any) (any, error) { return f(args) }
}

// argument checkers: the error names the function, the parameter and the type
// it got, as a TypeError (Google raises TypeError for a wrong argument type).

func argErr(fn, param, want string, v any) error {
	return TypeError("%s: argument %s must be %s, got %s", fn, param, want, typeOf(v))
}

func argString(fn, param string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", argErr(fn, param, "a string", v)
	}
	return s, nil
}

func argBytes(fn, param string, v any) ([]byte, error) {
	s, ok := v.([]byte)
	if !ok {
		return nil, argErr(fn, param, "bytes", v)
	}
	return s, nil
}

func argInt(fn, param string, v any) (int64, error) {
	i, ok := v.(int64)
	if !ok {
		return 0, argErr(fn, param, "an integer", v)
	}
	return i, nil
}

func argNumber(fn, param string, v any) (float64, error) {
	f, ok := toFloat(v)
	if !ok {
		return 0, argErr(fn, param, "a number", v)
	}
	return f, nil
}

func argMap(fn, param string, v any) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, argErr(fn, param, "a map", v)
	}
	return m, nil
}

func argList(fn, param string, v any) ([]any, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, argErr(fn, param, "a list", v)
	}
	return l, nil
}

// randomUUID returns an RFC 4122 version 4 UUID.
func randomUUID() (string, error) {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		return "", fmt.Errorf("uuid: %w", err)
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}
