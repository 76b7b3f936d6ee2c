package api_test

import (
	"testing"
	"time"
)

// BenchmarkRun bills 1000 customers end to end over HTTP on the embedded
// store and the simulator, as `make demo` does: preflight, pages of 100,
// 20 charges in parallel (Workflows' parallel-for limit), mark completed.
func BenchmarkRun(b *testing.B) {
	const customers = 1000
	for b.Loop() {
		b.StopTimer()
		e := newEnv(b, openEmbedded(b), envOptions{})
		e.seed(visa(customers)...)
		b.StartTimer()
		start := time.Now()
		res := e.runWorkflow("bench", 100, 20)
		elapsed := time.Since(start)
		if res.summary.status != 200 || res.summary.num("due") != customers {
			b.Fatalf("run: %d %v", res.summary.status, res.summary.body)
		}
		b.ReportMetric(float64(customers)/elapsed.Seconds(), "customers/s")
	}
}
