package expr_test

import (
	"context"
	"errors"
	"testing"

	"billrun.dev/billrun/internal/workflow/expr"
)

// fuzzSeeds are expressions in every syntactic form, valid and invalid.
var fuzzSeeds = []string{
	`1 + 2 * 3`, `(a.b[0] + "x") in m`, `not (k in m) and x or y`, `-9223372036854775808`,
	`text.split(s, ",")[0]`, `{"a": [1, 2.5e3, true, null], "b": {}}`, `"esc \" \\ \n \u00e9 \ud83d\ude00"`,
	`m["k"].x // 2 % 3`, `((((((1))))))`, `len(keys(m)) >= 1`, `a..b`, `"unterminated`, `1 +`,
	`f()(`, `[1, 2,]`, `{"a" 1}`, `{1: 2}`, `$`, `9223372036854775808`, `1e400`, `x.true.null`,
	`retry.default_backoff`, `- - -1`, `not not TRUE`, "a\n+\tb",
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := expr.Parse(src)
		if err != nil {
			var se *expr.SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q) error %T is not a *SyntaxError", src, err)
			}
			if se.Offset < 0 || se.Offset > len(src) {
				t.Fatalf("Parse(%q) offset %d outside the input", src, se.Offset)
			}
			return
		}
		_ = e.Vars()
		_ = e.Calls()
	})
}

// FuzzEval evaluates whatever parses against the test environment plus a
// variable j decoded from the second input: it may fail, but only with an
// error, never a panic or a non-Workflows value.
func FuzzEval(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, `{"a": [1, 2.5, "x", null, true, {"b": {}}]}`)
	}
	f.Add(`j.a[1] * 2 + len(keys(j))`, `{"a": [0, 3]}`)
	f.Add(`text.split(j, ",")`, `"a,,b"`)
	lib := testLib(f)
	f.Fuzz(func(t *testing.T, src, doc string) {
		e, err := expr.Parse(src)
		if err != nil {
			return
		}
		vars := testVars()
		if j, err := expr.DecodeJSON([]byte(doc)); err == nil {
			vars["j"] = j
		}
		v, err := e.Eval(context.Background(), expr.NewEnv(vars, lib))
		if err == nil && expr.TypeName(v) == "" {
			t.Fatalf("Eval(%q) = %#v, not a Workflows value", src, v)
		}
	})
}
