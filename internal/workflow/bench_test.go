package workflow

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// parallelFor10k calls a local endpoint 10,000 times from a parallel for
// (20 at a time) and counts the answers in a shared variable.
const parallelFor10k = `
- init:
    assign:
      - n: 0
      - url: ${sys.get_env("URL")}
- fan_out:
    parallel:
      shared: [n]
      concurrency_limit: 20
      for:
        value: i
        range: [1, 10000]
        steps:
          - get:
              call: http.get
              args:
                url: ${url}
                query:
                  i: ${i}
              result: r
          - count:
              assign:
                - n: ${n + r.body.ok}
- done:
    return: ${n}
`

// stepsPerRun is 2 steps in main + the parallel step's 2 steps × 10,000.
const stepsPerRun = 3 + 2*10000

func okServer(tb testing.TB, onRequest func(n int64)) *httptest.Server {
	var count atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if onRequest != nil {
			onRequest(count.Add(1))
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok": 1}`)
	}))
	tb.Cleanup(srv.Close)
	return srv
}

func BenchmarkParallelFor10kHTTP(b *testing.B) {
	srv := okServer(b, nil)
	w, err := Load("bench.yaml", []byte(parallelFor10k))
	if err != nil {
		b.Fatal(err)
	}
	eng := NewEngine(Options{Env: map[string]string{"URL": srv.URL}, Logger: slog.New(slog.DiscardHandler)})
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		res, err := eng.Run(context.Background(), w, nil)
		if err != nil || res != int64(10000) {
			b.Fatalf("result %v, %v", res, err)
		}
	}
	b.ReportMetric(float64(b.N*stepsPerRun)/time.Since(start).Seconds(), "steps/s")
	b.ReportMetric(float64(b.N*10000)/time.Since(start).Seconds(), "calls/s")
}

// BenchmarkParallelFor10kHTTPWithHistory is the same workflow run through
// the Executions service, which writes every step entry to its data directory.
func BenchmarkParallelFor10kHTTPWithHistory(b *testing.B) {
	srv := okServer(b, nil)
	w, err := Load("bench.yaml", []byte(parallelFor10k))
	if err != nil {
		b.Fatal(err)
	}
	svc, err := NewExecutions(ExecutionsConfig{
		Engine:    Options{Env: map[string]string{"URL": srv.URL}, Logger: slog.New(slog.DiscardHandler)},
		Workflows: StaticSource(w),
		DataDir:   b.TempDir(),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close()
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		x, err := svc.Run(context.Background(), "bench", "", StartOptions{})
		if err != nil || x.Result != "10000" || x.Steps != stepsPerRun {
			b.Fatalf("execution %+v, %v", x, err)
		}
	}
	b.ReportMetric(float64(b.N*stepsPerRun)/time.Since(start).Seconds(), "steps/s")
}

// TestParallelForMemoryFlat checks that the heap does not grow with completed
// iterations: it is sampled (after a GC) when 2,000 and 9,000 of the 10,000
// calls have been answered.
func TestParallelForMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 HTTP calls: skipped in -short mode")
	}
	var (
		mu    sync.Mutex
		heaps = map[int64]uint64{}
	)
	srv := okServer(t, func(n int64) {
		if n == 2000 || n == 9000 {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			mu.Lock()
			heaps[n] = ms.HeapAlloc
			mu.Unlock()
		}
	})
	w, err := Load("bench.yaml", []byte(parallelFor10k))
	if err != nil {
		t.Fatal(err)
	}
	eng := NewEngine(Options{Env: map[string]string{"URL": srv.URL}, Logger: slog.New(slog.DiscardHandler)})
	if res, err := eng.Run(context.Background(), w, nil); err != nil || res != int64(10000) {
		t.Fatalf("result %v, %v", res, err)
	}
	const slack = 2 << 20
	if grew := int64(heaps[9000]) - int64(heaps[2000]); grew > slack {
		t.Errorf("heap grew by %d bytes between 2,000 and 9,000 completed calls (limit %d)", grew, slack)
	}
	t.Logf("heap at 2,000 calls: %d B, at 9,000: %d B", heaps[2000], heaps[9000])
}

// TestParallelConcurrencyLimit checks that iterations really run
// concurrently, up to concurrency_limit and never more: each request waits
// until `limit` requests are in flight (or a second has passed).
func TestParallelConcurrencyLimit(t *testing.T) {
	tests := []struct {
		name  string
		limit int64
		src   string
	}{
		{"limit 5", 5, "concurrency_limit: 5"},
		{"default 20", DefaultConcurrencyLimit, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				mu       sync.Mutex
				inFlight int64
				peak     int64
				reached  = make(chan struct{})
				once     sync.Once
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				inFlight++
				peak = max(peak, inFlight)
				if inFlight == tt.limit {
					once.Do(func() { close(reached) })
				}
				mu.Unlock()
				select {
				case <-reached:
				case <-time.After(time.Second):
				}
				mu.Lock()
				inFlight--
				mu.Unlock()
				io.WriteString(w, "ok")
			}))
			defer srv.Close()
			src := `
- fan_out:
    parallel:
      ` + tt.src + `
      for:
        value: i
        range: [1, 60]
        steps:
          - get:
              call: http.get
              args:
                url: ${sys.get_env("URL")}
`
			w, err := Load("limit.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			eng := NewEngine(Options{Env: map[string]string{"URL": srv.URL}})
			if _, err := eng.Run(context.Background(), w, nil); err != nil {
				t.Fatal(err)
			}
			if peak != tt.limit {
				t.Errorf("peak concurrency %d, want %d", peak, tt.limit)
			}
		})
	}
}
