package expr_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"billrun.dev/billrun/internal/workflow/expr"
)

// testLib is the standard library with a fixed clock, environment and UUID.
func testLib(t testing.TB) *expr.Registry {
	t.Helper()
	return expr.NewStdlib(expr.StdlibOptions{
		Now: func() time.Time { return time.Date(2024, 7, 12, 12, 50, 33, 615087000, time.UTC) },
		Env: map[string]string{
			"GOOGLE_CLOUD_PROJECT_ID": "billrun-local",
			"GOOGLE_CLOUD_LOCATION":   "us-central1",
		},
		UUID: func() (string, error) { return "123e4567-e89b-42d3-a456-426614174000", nil },
	})
}

// testVars are the variables every table case can read.
func testVars() map[string]any {
	return map[string]any{
		"i":     int64(7),
		"d":     2.5,
		"s":     "hello",
		"b":     true,
		"n":     nil,
		"l":     []any{int64(1), "two", 3.0, []any{int64(4)}},
		"m":     map[string]any{"a": int64(1), "b": map[string]any{"c": "deep"}, "n": nil},
		"bytes": []byte("Hello World"),
		"text":  "shadows the text module",
	}
}

type evalCase struct {
	name string
	src  string
	want any
	err  string // whole Error() text of the expected error, "" for success
}

func runEvalCases(t *testing.T, cases []evalCase) {
	t.Helper()
	lib := testLib(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := expr.Parse(tc.src)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.src, err)
			}
			got, err := e.Eval(context.Background(), expr.NewEnv(testVars(), lib))
			if tc.err != "" {
				if err == nil {
					t.Fatalf("Eval(%q) = %#v, want error %q", tc.src, got, tc.err)
				}
				if err.Error() != tc.err {
					t.Fatalf("Eval(%q) error = %q, want %q", tc.src, err.Error(), tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Eval(%q): %v", tc.src, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Eval(%q) = %#v, want %#v", tc.src, got, tc.want)
			}
		})
	}
}

func TestEvalOperators(t *testing.T) {
	runEvalCases(t, []evalCase{
		{name: "int add", src: "1 + 2", want: int64(3)},
		{name: "precedence mul over add", src: "1 + 2 * 3", want: int64(7)},
		{name: "parentheses", src: "(1 + 2) * 3", want: int64(9)},
		{name: "int plus double", src: "1 + 2.5", want: 3.5},
		{name: "string concat int", src: `"a" + 1`, want: "a1"},
		{name: "double concat string", src: `2.5 + "x"`, want: "2.5x"},
		{name: "bool concat string", src: `true + "x"`, want: "truex"},
		{name: "bool plus int", src: "true + 1", err: "TypeError: unsupported operand types for +: bool and integer"},
		{name: "division is float", src: "7 / 2", want: 3.5},
		{name: "floor division", src: "7 // 2", want: int64(3)},
		{name: "floor division negative", src: "-7 // 2", want: int64(-4)},
		{name: "remainder", src: "7 % 3", want: int64(1)},
		{name: "remainder takes divisor sign", src: "-7 % 3", want: int64(2)},
		{name: "division by zero", src: "1 / 0", err: "ZeroDivisionError: division by zero"},
		{name: "int overflow", src: "9223372036854775807 + 1", err: "ValueError: integer overflow in +"},
		{name: "int overflow in multiplication", src: "4611686018427387904 * 2", err: "ValueError: integer overflow in *"},
		{name: "int underflow", src: "-9223372036854775808 - 1", err: "ValueError: integer overflow in -"},
		{name: "negation overflow", src: "-(-9223372036854775808)", err: "ValueError: integer overflow in -"},
		{name: "floor division overflow", src: "-9223372036854775808 // -1", err: "ValueError: integer overflow in //"},
		{name: "double overflow", src: "1e308 * 10", err: "ValueError: double overflow in *"},
		{name: "double floor division", src: "-7.5 // 2", want: -4.0},
		{name: "double remainder", src: "7.5 % -2", want: -0.5},
		{name: "mixed floor division", src: "7 // 2.0", want: 3.0},
		{name: "modulo by zero", src: "1 % 0", err: "ZeroDivisionError: division by zero"},
		{name: "double division by zero", src: "1.5 / 0.0", err: "ZeroDivisionError: division by zero"},
		{name: "string minus", src: `"a" - "b"`, err: "TypeError: unsupported operand types for -: string and string"},
		{name: "string times int", src: `"a" * 2`, err: "TypeError: unsupported operand types for *: string and integer"},
		{name: "string plus null", src: `"a" + null`, err: "TypeError: unsupported operand types for +: string and null"},
		{name: "list plus list", src: "[1] + [2]", err: "TypeError: unsupported operand types for +: list and list"},
		{name: "unary minus on string", src: `-"a"`, err: "TypeError: operand of unary - must be a number, got string"},
		{name: "not binds tighter than in", src: `not "a" in m`, err: "TypeError: operand of not must be a boolean, got string"},
		{name: "not with parentheses", src: `not ("zz" in m)`, want: true},
		{name: "comparison chain is left to right", src: "1 < 2 < 3", err: "TypeError: cannot compare bool with integer"},
		{name: "null equality", src: "n == null", want: true},
		{name: "bool ordering", src: "false < true", want: true},
		{name: "int double ordering", src: "2 >= 2.5", want: false},
		{name: "int double inequality", src: "2 != 2.5", want: true},
		{name: "null ordering", src: "n < 1", err: "TypeError: cannot compare null with integer"},
		{name: "deep equality", src: `{"a": [1, 2.0]} == {"a": [1.0, 2]}`, want: true},
		{name: "in list deep", src: `{"a": 1} in [{"a": 1.0}]`, want: true},
		{name: "in map non-string key", src: "1 in m", err: "TypeError: map key must be a string, got integer"},
		{name: "index list with string", src: `l["0"]`, err: "TypeError: list index must be an integer, got string"},
		{name: "index list with double", src: "l[0.0]", err: "TypeError: list index must be an integer, got double"},
		{name: "index map with int", src: "m[0]", err: "TypeError: map key must be a string, got integer"},
		{name: "index null", src: "n[0]", err: "TypeError: cannot index null"},
		{name: "member of null", src: "n.x", err: `TypeError: cannot access field "x" of null`},
		{name: "member after index", src: "l[3][0] + m.b.c.x", err: `TypeError: cannot access field "x" of string`},
		{name: "null value present", src: "m.n", want: nil},
		{name: "keyword as member name", src: `{"in": 1}.in`, want: int64(1)},
		{name: "string escapes", src: `"tab\tquote\"uni\u00e9\ud83d\ude00"`, want: "tab\tquote\"uni\u00e9\U0001F600"},
		{name: "multi-line expression", src: "1 +\n  2", want: int64(3)},
		{name: "title case booleans", src: "True and not False", want: true},
		{name: "exponent literal is double", src: "1e3", want: 1000.0},
		{name: "division of ints is double", src: "4 / 2", want: 2.0},
		{name: "min int literal", src: "-9223372036854775808", want: int64(-9223372036854775808)},
		{name: "comparison", src: "1 < 2.5", want: true},
		{name: "string comparison", src: `"a" < "b"`, want: true},
		{name: "mixed comparison", src: `1 < "a"`, err: "TypeError: cannot compare integer with string"},
		{name: "equality int double", src: "1 == 1.0", want: true},
		{name: "equality unrelated", src: `1 == "1"`, want: false},
		{name: "in list", src: `"two" in l`, want: true},
		{name: "in map", src: `"a" in m`, want: true},
		{name: "in string", src: `"h" in s`, err: "TypeError: right operand of in must be a list or a map, got string"},
		{name: "and short circuit", src: `"zz" in m and m.zz > 0`, want: false},
		{name: "or short circuit", src: `not ("zz" in m) or m.zz > 0`, want: true},
		{name: "not call style", src: `not("a" in m)`, want: false},
		{name: "doc temperature", src: `"Current temperature is " + string(27 * 9/5 + 32) + " F"`, want: "Current temperature is 80.6 F"},
		{name: "or", src: "false or true", want: true},
		{name: "upper case operators", src: "NOT FALSE AND TRUE", want: true},
		{name: "not on int", src: "not 1", err: "TypeError: operand of not must be a boolean, got integer"},
		{name: "and on int", src: "1 and true", err: "TypeError: operands of and must be booleans, got integer"},
		{name: "member", src: "m.b.c", want: "deep"},
		{name: "index map", src: `m["b"]["c"]`, want: "deep"},
		{name: "missing key", src: "m.zz", err: "KeyError: key not found: zz"},
		{name: "index out of range", src: "l[4]", err: "IndexError: list index out of range: 4"},
		{name: "negative index", src: "l[-1]", err: "IndexError: list index out of range: -1"},
		{name: "member of string", src: "s.x", err: `TypeError: cannot access field "x" of string`},
		{name: "list literal", src: `[1, "a", [true]]`, want: []any{int64(1), "a", []any{true}}},
		{name: "map literal", src: `{"k": 1 + 1}`, want: map[string]any{"k": int64(2)}},
		{name: "variable shadows module", src: "text", want: "shadows the text module"},
		{name: "constant", src: "retry.default_backoff.max_delay", want: int64(60)},
		{name: "function reference", src: "retry.always", want: expr.FuncRef{Name: "retry.always"}},
		{name: "undefined variable", src: "nope", err: `KeyError: variable "nope" is not defined`},
	})
}

func TestEvalMisuse(t *testing.T) {
	lib := testLib(t).Clone()
	if err := lib.AddFunc(&expr.Func{Name: "http.get", Blocking: true, Params: []expr.Param{{Name: "url"}},
		Call: func(context.Context, []any) (any, error) { return nil, nil }}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, src string
		want      error
	}{
		{name: "blocking", src: `http.get("x")`, want: expr.ErrBlockingCall},
		{name: "unknown", src: `nothing.here(1)`, want: expr.ErrUnknownFunction},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := expr.Parse(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.Eval(context.Background(), expr.NewEnv(nil, lib)); !errors.Is(err, tc.want) {
				t.Fatalf("Eval(%q) error = %v, want %v", tc.src, err, tc.want)
			}
		})
	}
}
