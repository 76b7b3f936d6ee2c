package expr_test

import (
	"context"
	"testing"

	"billrun.dev/billrun/internal/workflow/expr"
)

// benchSrc is the shape of billing.yaml's hot expressions: a guarded response
// check and a log line.
const benchSrc = `map.get(r, ["body", "outcome"]) == "charged" and r.code == 200 and "customer " + c.id + " charged " + string(c.amount) + " " + text.to_upper(c.currency) != ""`

func benchEnv(b *testing.B) expr.Env {
	return expr.NewEnv(map[string]any{
		"r": map[string]any{"code": int64(200), "body": map[string]any{"outcome": "charged"}},
		"c": map[string]any{"id": "cus_123", "amount": int64(1999), "currency": "eur"},
	}, testLib(b))
}

func BenchmarkParse(b *testing.B) {
	for b.Loop() {
		if _, err := expr.Parse(benchSrc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEval(b *testing.B) {
	e, err := expr.Parse(benchSrc)
	if err != nil {
		b.Fatal(err)
	}
	env := benchEnv(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if v, err := e.Eval(ctx, env); err != nil || v != true {
			b.Fatalf("Eval = %v, %v", v, err)
		}
	}
}
