package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"

	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"billrun.dev/billrun/internal/workflow/expr"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// epoch is the ManualClock's start in golden runs.
var epoch = time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)

// testServer answers the HTTP calls of golden workflows:
//
//	/status/{code}        answers code with {"code": code}
//	/echo                 answers 200 with what it received
//	/flaky/{n}/{code}     answers code n times, then 200 {"attempts": k}
//	/hangup               closes the connection without answering
//	/slow                 answers after 2 s
//	/big                  answers 2 MB + 1 byte
//	/text                 answers text/plain "hello"
func testServer(t testing.TB) *httptest.Server {
	var (
		mu    sync.Mutex
		calls = map[string]int{}
	)
	writeJSON := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.Header()["Date"] = nil // keep golden files stable
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.PathValue("code"))
		writeJSON(w, code, map[string]any{"code": code})
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		writeJSON(w, 200, map[string]any{
			"method": r.Method, "query": r.URL.RawQuery, "auth": r.Header.Get("Authorization"),
			"content_type": r.Header.Get("Content-Type"), "x_custom": r.Header.Get("X-Custom"), "body": string(body),
		})
	})
	mux.HandleFunc("/flaky/{n}/{code}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		code, _ := strconv.Atoi(r.PathValue("code"))
		mu.Lock()
		calls[r.URL.Path]++
		k := calls[r.URL.Path]
		mu.Unlock()
		if k <= n {
			writeJSON(w, code, map[string]any{"attempt": k})
			return
		}
		writeJSON(w, 200, map[string]any{"attempts": k})
	})
	mux.HandleFunc("/hangup", func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
		writeJSON(w, 200, "late")
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Date"] = nil
		w.Write(bytes.Repeat([]byte("x"), MaxHTTPResponseBytes+1))
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "hello")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// deadURL is a URL nothing listens on.
func deadURL(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// header reads `# key: value` lines at the top of a golden workflow.
func header(src []byte, key string) string {
	for _, line := range strings.Split(string(src), "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		if v, ok := strings.CutPrefix(line, "# "+key+": "); ok {
			return v
		}
	}
	return ""
}

// goldenOutcome is what a golden run produced.
func goldenOutcome(t *testing.T, file string) []byte {
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	w, err := Load(file, src)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	var arg any
	if a := header(src, "argument"); a != "" {
		if arg, err = expr.DecodeJSON([]byte(a)); err != nil {
			t.Fatalf("argument: %v", err)
		}
	}
	srv := testServer(t)
	clock := NewManualClock(epoch)
	var logs bytes.Buffer
	eng := NewEngine(Options{
		Clock:  clock,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		Env:    map[string]string{"BASE_URL": srv.URL, "DEAD_URL": deadURL(t)},
		UUID:   func() (string, error) { return "00000000-0000-4000-8000-000000000000", nil },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := eng.Run(ctx, w, arg)
	out := map[string]any{}
	var re *RunError
	switch {
	case err == nil:
		out["result"] = res
	case errors.As(err, &re):
		out["error"] = re.Err.Value()
		out["context"] = re.Context()
	default:
		t.Fatalf("run: %v", err)
	}
	if sleeps := clock.Sleeps(); len(sleeps) > 0 {
		secs := make([]any, len(sleeps))
		for i, d := range sleeps {
			secs[i] = d.Seconds()
		}
		out["sleeps"] = secs
	}
	b, err := expr.EncodeJSONIndent(out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// TestGoldenRun runs each testdata/run/*.yaml and compares the result or
// error (and the backoff sleeps) with its .json file.
func TestGoldenRun(t *testing.T) {
	files, _ := filepath.Glob("testdata/run/*.yaml")
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := goldenOutcome(t, file)
			compareGolden(t, strings.TrimSuffix(file, ".yaml")+".json", got)
		})
	}
}

// TestGoldenInvalid loads each testdata/invalid/*.yaml, which Google rejects at
// deploy time, and compares the located errors with its .err file.
func TestGoldenInvalid(t *testing.T) {
	files, _ := filepath.Glob("testdata/invalid/*.yaml")
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Load(file, src)
			if err == nil {
				t.Fatal("loaded without error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			compareGolden(t, strings.TrimSuffix(file, ".yaml")+".err", []byte(err.Error()+"\n"))
		})
	}
}

func compareGolden(t *testing.T, file string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", file, got, want)
	}
}
