package expr_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"billrun.dev/billrun/internal/workflow/expr"
)

func TestParseValue(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		ok       bool
		src      string // the expression text when ok
		errMsg   string
	}{
		{name: "whole expression", in: "${a + 1}", ok: true, src: "a + 1"},
		{name: "plain string", in: "hello", ok: false},
		{name: "no interpolation", in: "Hello ${name}", ok: false},
		{name: "prefix only", in: "${a} tail", ok: false},
		{name: "dollar without brace", in: "$a}", ok: false},
		{name: "two expressions are one bad one", in: "${a} ${b}", ok: true, errMsg: `unexpected character '$'`},
		{name: "empty expression", in: "${}", ok: true, errMsg: "unexpected end of expression"},
		{name: "colon inside string", in: `${"foo: " + x}`, ok: true, src: `"foo: " + x`},
		{name: "map literal inside", in: `${ {"a": 1} }`, ok: true, src: ` {"a": 1} `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, ok, err := expr.ParseValue(tc.in)
			if ok != tc.ok {
				t.Fatalf("ParseValue(%q) ok = %v, want %v", tc.in, ok, tc.ok)
			}
			if tc.errMsg != "" {
				var se *expr.SyntaxError
				if !errors.As(err, &se) || se.Msg != tc.errMsg {
					t.Fatalf("ParseValue(%q) error = %v, want syntax error %q", tc.in, err, tc.errMsg)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseValue(%q): %v", tc.in, err)
			}
			if ok && e.String() != tc.src {
				t.Fatalf("ParseValue(%q) source = %q, want %q", tc.in, e.String(), tc.src)
			}
		})
	}
}

func TestReferences(t *testing.T) {
	for _, tc := range []struct {
		name, src         string
		vars, refs, calls []string
	}{
		{name: "variables", src: `a + b.c[d].e`, vars: []string{"a", "b", "d"}, refs: []string{"a", "b.c", "d"}},
		{name: "constants and calls", src: `map.get(retry.default_backoff, "x") + len(l)`,
			vars: []string{"l", "retry"}, refs: []string{"l", "retry.default_backoff"}, calls: []string{"len", "map.get"}},
		{name: "call result member", src: `text.split(s, ",")[0]`, vars: []string{"s"}, refs: []string{"s"}, calls: []string{"text.split"}},
		{name: "literals only", src: `[1, {"k": true}]`},
		{name: "duplicates once", src: `x + x.y + x`, vars: []string{"x"}, refs: []string{"x", "x.y"}},
		{name: "subworkflow call", src: `my_sub(a)`, vars: []string{"a"}, refs: []string{"a"}, calls: []string{"my_sub"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := expr.Parse(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			for _, got := range []struct {
				what      string
				got, want []string
			}{{"Vars", e.Vars(), tc.vars}, {"Refs", e.Refs(), tc.refs}, {"Calls", e.Calls(), tc.calls}} {
				if len(got.got) != 0 || len(got.want) != 0 {
					if !slices.Equal(got.got, got.want) {
						t.Errorf("%s(%q) = %q, want %q", got.what, tc.src, got.got, got.want)
					}
				}
			}
		})
	}
}

func TestCheck(t *testing.T) {
	lib := testLib(t).Clone()
	if err := lib.AddFunc(&expr.Func{Name: "sys.sleep", Blocking: true, Params: []expr.Param{{Name: "seconds"}},
		Call: func(context.Context, []any) (any, error) { return nil, nil }}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, src string
		want      []error
		offsets   []int
	}{
		{name: "fine", src: `len(text.split(s, ","))`},
		{name: "unknown", src: `1 + nope(2)`, want: []error{expr.ErrUnknownFunction}, offsets: []int{4}},
		{name: "blocking", src: `sys.sleep(1)`, want: []error{expr.ErrBlockingCall}, offsets: []int{0}},
		{name: "arity", src: `text.substring("a", 1)`, want: []error{expr.ErrArgCount}, offsets: []int{0}},
		{name: "optional argument", src: `sys.get_env("X")`},
		{name: "several in source order", src: `nope() + len()`, want: []error{expr.ErrUnknownFunction, expr.ErrArgCount}, offsets: []int{0, 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := expr.Parse(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			err = e.Check(lib)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Check(%q) = %v, want nil", tc.src, err)
				}
				return
			}
			joined, ok := err.(interface{ Unwrap() []error })
			if !ok {
				t.Fatalf("Check(%q) = %v, want joined errors", tc.src, err)
			}
			errs := joined.Unwrap()
			if len(errs) != len(tc.want) {
				t.Fatalf("Check(%q) = %v, want %d errors", tc.src, err, len(tc.want))
			}
			for i, e := range errs {
				var ce *expr.CheckError
				if !errors.As(e, &ce) || !errors.Is(e, tc.want[i]) || ce.Offset != tc.offsets[i] {
					t.Errorf("Check(%q) error %d = %v, want %v at offset %d", tc.src, i, e, tc.want[i], tc.offsets[i])
				}
			}
		})
	}
}

func TestBindNamed(t *testing.T) {
	f, ok := testLib(t).Func("text.replace_all")
	if !ok {
		t.Fatal("text.replace_all is not registered")
	}
	g, _ := testLib(t).Func("sys.get_env")
	// A subworkflow may give a default to a parameter before a required one.
	sub := &expr.Func{Name: "sub", Params: []expr.Param{{Name: "a"}, {Name: "b", Optional: true, Default: []any{int64(1)}}, {Name: "c"}}}
	for _, tc := range []struct {
		name string
		f    *expr.Func
		args map[string]any
		want []any
		err  string
	}{
		{name: "all named", f: f, args: map[string]any{"source": "a-b", "substr": "-", "repl": "+"}, want: []any{"a-b", "-", "+"}},
		{name: "default filled", f: g, args: map[string]any{"name": "X"}, want: []any{"X", nil}},
		{name: "default in the middle", f: sub, args: map[string]any{"a": 1.5, "c": "x"}, want: []any{1.5, []any{int64(1)}, "x"}},
		{name: "unknown and missing", f: f, args: map[string]any{"source": "a", "sep": "-"},
			err: "TypeError: text.replace_all: unknown argument(s) sep; missing required argument(s) substr, repl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.f.BindNamed(tc.args)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err || !errors.Is(err, expr.ErrArgCount) {
					t.Fatalf("BindNamed = %v, want %q wrapping ErrArgCount", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("BindNamed = %#v, %v; want %#v", got, err, tc.want)
			}
		})
	}
}

func TestBind(t *testing.T) {
	sub := &expr.Func{Name: "sub", Params: []expr.Param{{Name: "a"}, {Name: "b", Optional: true, Default: []any{int64(1)}}, {Name: "c", Optional: true, Default: "z"}}}
	got, err := sub.Bind([]any{int64(0)})
	if err != nil || !reflect.DeepEqual(got, []any{int64(0), []any{int64(1)}, "z"}) {
		t.Fatalf("Bind = %#v, %v", got, err)
	}
	got[1].([]any)[0] = "mutated"
	if again, _ := sub.Bind([]any{int64(0)}); again[1].([]any)[0] != int64(1) {
		t.Fatalf("a mutated default leaked into the next call: %#v", again)
	}
	middle := &expr.Func{Name: "middle", Params: []expr.Param{{Name: "a", Optional: true}, {Name: "b"}}}
	if _, err := middle.Bind([]any{int64(0)}); err == nil || err.Error() != "TypeError: middle() takes 2 arguments (1 given)" {
		t.Fatalf("Bind with a required parameter after an optional one = %v", err)
	}
}

func TestErrorValues(t *testing.T) {
	t.Run("map of a tagged error", func(t *testing.T) {
		e := expr.KeyError("key not found: %s", "x")
		e.Extra = map[string]any{"code": int64(404)}
		want := map[string]any{"message": "key not found: x", "tags": []any{"KeyError"}, "code": int64(404)}
		if got := e.Map(); !reflect.DeepEqual(got, want) {
			t.Fatalf("Map() = %#v, want %#v", got, want)
		}
		if !reflect.DeepEqual(e.Value(), want) {
			t.Fatalf("Value() = %#v, want the map", e.Value())
		}
	})
	t.Run("raised string stays a string", func(t *testing.T) {
		e := expr.ErrorFromValue("Something went wrong.")
		if e.Value() != "Something went wrong." || e.Message != "Something went wrong." {
			t.Fatalf("Value() = %#v, Message = %q", e.Value(), e.Message)
		}
	})
	t.Run("raised null stays null", func(t *testing.T) {
		if v := expr.ErrorFromValue(nil).Value(); v != nil {
			t.Fatalf("Value() = %#v, want nil", v)
		}
	})
	t.Run("raised map keeps its keys", func(t *testing.T) {
		raised := map[string]any{"code": int64(55), "message": "Something went wrong.", "tags": []any{"MyError"}}
		e := expr.ErrorFromValue(raised)
		if !reflect.DeepEqual(e.Value(), raised) || !e.HasTag("MyError") || e.Extra["code"] != int64(55) {
			t.Fatalf("ErrorFromValue(%v) = %#v", raised, e)
		}
	})
	t.Run("Go error becomes SystemError", func(t *testing.T) {
		e := expr.AsError(errors.New("disk on fire"))
		if e.Error() != "SystemError: disk on fire" {
			t.Fatalf("AsError = %q", e.Error())
		}
		wrapped := expr.AsError(errors.Join(errors.New("context"), expr.ValueError("bad")))
		if !wrapped.HasTag(expr.TagValueError) {
			t.Fatalf("AsError did not find the wrapped *Error: %v", wrapped)
		}
	})
}

func TestEvalBoundary(t *testing.T) {
	lib := testLib(t).Clone()
	for _, f := range []*expr.Func{
		{Name: "boom", Call: func(context.Context, []any) (any, error) { panic("kaboom") }},
		{Name: "fails", Call: func(context.Context, []any) (any, error) { return nil, expr.NewError(expr.TagHttpError, "HTTP 503") }},
	} {
		if err := lib.AddFunc(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := lib.AddFunc(&expr.Func{Name: "boom"}); !errors.Is(err, expr.ErrDuplicate) {
		t.Fatalf("duplicate AddFunc = %v, want ErrDuplicate", err)
	}
	eval := func(ctx context.Context, src string) (any, error) {
		e, err := expr.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		return e.Eval(ctx, expr.NewEnv(nil, lib))
	}
	if _, err := eval(context.Background(), "boom()"); err == nil || err.Error() != `SystemError: internal error evaluating "boom()": kaboom` {
		t.Fatalf("panic not recovered as SystemError: %v", err)
	}
	var e *expr.Error
	if _, err := eval(context.Background(), "1 + fails()"); !errors.As(err, &e) || !e.HasTag(expr.TagHttpError) {
		t.Fatalf("function error not passed through: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := eval(ctx, `len("x")`); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
}

func TestValues(t *testing.T) {
	t.Run("SizeOf", func(t *testing.T) {
		for _, tc := range []struct {
			v    any
			want int
		}{
			{int64(1), 8}, {1.5, 8}, {true, 8}, {nil, 8},
			{"abc", 11}, {[]byte("ab"), 10},
			{[]any{int64(1), "ab"}, 8 + 8 + 10},
			{map[string]any{"k": int64(1)}, 8 + 9 + 8},
		} {
			if got := expr.SizeOf(tc.v); got != tc.want {
				t.Errorf("SizeOf(%#v) = %d, want %d", tc.v, got, tc.want)
			}
		}
	})
	t.Run("Equal", func(t *testing.T) {
		for _, tc := range []struct {
			a, b any
			want bool
		}{
			{int64(1), 1.0, true}, {int64(9007199254740993), 9007199254740992.0, false},
			{[]any{int64(1), "a"}, []any{1.0, "a"}, true}, {[]any{int64(1)}, []any{}, false},
			{map[string]any{"a": nil}, map[string]any{"b": nil}, false},
			{map[string]any{"a": []any{}}, map[string]any{"a": []any{}}, true},
			{nil, false, false}, {[]byte("a"), []byte("a"), true}, {"1", int64(1), false},
		} {
			if got := expr.Equal(tc.a, tc.b); got != tc.want {
				t.Errorf("Equal(%#v, %#v) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
		}
	})
	t.Run("FormatDouble", func(t *testing.T) {
		tenth := 0.1 // a variable, so that 0.1 + 0.2 is computed in float64
		for _, tc := range []struct {
			f    float64
			want string
		}{
			{2, "2"}, {1715169660, "1715169660"}, {1715172805.2818468, "1715172805.2818468"},
			{-0.5, "-0.5"}, {1e21, "1e+21"}, {1e20, "100000000000000000000"},
			{1e-7, "1e-07"}, {tenth + 0.2, "0.30000000000000004"}, {math.Inf(1), "Infinity"},
		} {
			if got := expr.FormatDouble(tc.f); got != tc.want {
				t.Errorf("FormatDouble(%v) = %q, want %q", tc.f, got, tc.want)
			}
		}
	})
	t.Run("JSON round trip", func(t *testing.T) {
		v := map[string]any{"i": int64(-3), "d": 2.5, "s": "é\n\"<&>", "l": []any{nil, true}, "m": map[string]any{}}
		b, err := expr.EncodeJSON(v)
		if err != nil {
			t.Fatal(err)
		}
		const want = `{"d":2.5,"i":-3,"l":[null,true],"m":{},"s":"é\n\"<&>"}`
		if string(b) != want {
			t.Fatalf("EncodeJSON = %s, want %s", b, want)
		}
		back, err := expr.DecodeJSON(b)
		if err != nil || !reflect.DeepEqual(back, v) {
			t.Fatalf("DecodeJSON(EncodeJSON(v)) = %#v, %v", back, err)
		}
	})
}

// TestConcurrentEval evaluates one parsed expression from many goroutines, as
// parallel branches do (run with -race).
func TestConcurrentEval(t *testing.T) {
	e, err := expr.Parse(`map.get(m, ["b", "c"]) + string(len(l)) + text.to_upper(s)`)
	if err != nil {
		t.Fatal(err)
	}
	env := expr.NewEnv(testVars(), testLib(t))
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for range 100 {
				if v, err := e.Eval(context.Background(), env); err != nil || v != "deep4HELLO" {
					errs <- fmt.Errorf("Eval = %v, %v", v, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestDefaultStdlib(t *testing.T) {
	lib := expr.NewStdlib(expr.StdlibOptions{})
	env := expr.NewEnv(nil, lib)
	eval := func(src string) any {
		t.Helper()
		e, err := expr.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		v, err := e.Eval(context.Background(), env)
		if err != nil {
			t.Fatalf("Eval(%q): %v", src, err)
		}
		return v
	}
	u1, u2 := eval("uuid.generate()").(string), eval("uuid.generate()").(string)
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(u1) || u1 == u2 {
		t.Fatalf("uuid.generate() = %q, %q: want distinct version 4 UUIDs", u1, u2)
	}
	if now := eval("sys.now()").(float64); math.Abs(now-float64(time.Now().UnixNano())/1e9) > 5 {
		t.Fatalf("sys.now() = %v, far from the real clock", now)
	}
	if v := eval(`sys.get_env("GOOGLE_CLOUD_PROJECT_ID")`); v != nil {
		t.Fatalf("sys.get_env without an environment = %#v, want null", v)
	}
}

func TestMessages(t *testing.T) {
	deep := strings.Repeat("(", 150) + "1" + strings.Repeat(")", 150)
	_, err := expr.Parse(deep)
	var se *expr.SyntaxError
	if !errors.As(err, &se) || se.Error() != "syntax error at offset 100: expression nested too deeply" {
		t.Fatalf("Parse(150 parentheses) = %v", err)
	}
	e, _ := expr.Parse("nope()")
	err = e.Check(testLib(t))
	var ce *expr.CheckError
	if !errors.As(err, &ce) || ce.Error() != "offset 0: nope: unknown function" {
		t.Fatalf("Check = %v", err)
	}
	if got := expr.RecursionError("call depth %d", 21).Error(); got != "RecursionError: call depth 21" {
		t.Fatalf("RecursionError = %q", got)
	}
	for _, tc := range []struct {
		v    any
		want string
	}{
		{[]any{int64(1), "a", 2.5}, `[1,"a",2.5]`}, {map[string]any{"b": nil, "a": true}, `{"a":true,"b":null}`},
		{nil, "null"}, {[]byte("raw"), "raw"}, {expr.FuncRef{Name: "retry.always"}, "retry.always"},
	} {
		if got := expr.Display(tc.v); got != tc.want {
			t.Errorf("Display(%#v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
