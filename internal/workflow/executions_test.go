package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func newTestExecutions(t *testing.T, dataDir string, clock Clock, onEvent func(Event)) *Executions {
	t.Helper()
	s, err := NewExecutions(ExecutionsConfig{
		Engine:    Options{Clock: clock, Logger: slog.New(slog.DiscardHandler)},
		Workflows: DirSource("testdata/executions"),
		DataDir:   dataDir,
		OnEvent:   onEvent,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestExecutionsChildConnector(t *testing.T) {
	dir := t.TempDir()
	var (
		mu     sync.Mutex
		states []State
		logs   int
	)
	s := newTestExecutions(t, dir, NewManualClock(epoch), func(ev Event) {
		mu.Lock()
		defer mu.Unlock()
		if ev.State != "" {
			states = append(states, ev.State)
		}
		if ev.Log != nil {
			logs++
		}
	})
	x, err := s.Run(context.Background(), "parent", `{"numbers": [2, -1, 3]}`, StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if x.State != StateSucceeded {
		t.Fatalf("state %s, error %+v", x.State, x.Error)
	}
	want := `[4,"OperationError \"negative -1\"",9]`
	if x.Result != want {
		t.Errorf("result %s, want %s", x.Result, want)
	}
	// The parent and its three children are all kept.
	if n := len(s.List("child")); n != 3 {
		t.Errorf("%d child executions, want 3", n)
	}
	for _, c := range s.List("child") {
		if c.Parent != x.ID {
			t.Errorf("child %s has parent %q, want %s", c.ID, c.Parent, x.ID)
		}
	}
	if n := len(s.List("")); n != 4 {
		t.Errorf("%d executions, want 4", n)
	}
	mu.Lock()
	if len(states) != 8 || logs != 3 {
		t.Errorf("events: states %v, %d logs; want 8 states and 3 logs", states, logs)
	}
	mu.Unlock()

	// A new service on the same data directory sees the same executions,
	// with their step history and logs.
	s2 := newTestExecutions(t, dir, NewManualClock(epoch), nil)
	got, err := s2.Get(x.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Result != want || got.Steps == 0 {
		t.Errorf("reloaded: %+v", got)
	}
	steps, err := s2.Steps(x.ID)
	if err != nil || int64(len(steps)) != got.Steps {
		t.Fatalf("steps: %d entries (want %d), %v", len(steps), got.Steps, err)
	}
	if last := steps[len(steps)-1]; last.Step != "done" || last.StepType != "STEP_RETURN" || last.State != "STATE_SUCCEEDED" {
		t.Errorf("last step entry %+v", last)
	}
	children := s2.List("child")
	var failed *Execution
	for _, c := range children {
		if c.State == StateFailed {
			failed = c
		}
	}
	if failed == nil || failed.Error.Context != "negative -1\nin step \"check\", routine \"main\", line: 9" || failed.Error.Payload != `"negative -1"` {
		t.Fatalf("failed child: %+v", failed.Error)
	}
	logs2, err := s2.Logs(failed.ID)
	if err != nil || len(logs2) != 1 || logs2[0].Text != "child -1" || logs2[0].Severity != "INFO" {
		t.Errorf("child logs %+v, %v", logs2, err)
	}
}

func TestExecutionsCancel(t *testing.T) {
	s := newTestExecutions(t, t.TempDir(), RealClock{}, nil)
	x, err := s.Start("sleeper", "", StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Cancel(x.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != StateCancelled || got.EndTime.IsZero() {
		t.Errorf("after cancel: %+v", got)
	}
	if _, err := s.Cancel(x.ID); !errors.Is(err, ErrNotActive) {
		t.Errorf("second cancel: %v, want ErrNotActive", err)
	}
}

func TestExecutionsInterruptedOnRestart(t *testing.T) {
	dir := t.TempDir()
	rec := Execution{ID: "abc", Workflow: "child", Project: "p", Location: "l", State: StateActive, CreateTime: epoch, StartTime: epoch}
	path := filepath.Join(dir, "executions", "child", "abc", "execution.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rec)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s := newTestExecutions(t, dir, NewManualClock(epoch.Add(time.Hour)), nil)
	got, err := s.Get("abc")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != StateFailed || got.Error == nil || got.Error.Payload != interruptedPayload {
		t.Errorf("interrupted execution: %+v", got)
	}
}

func TestExecutionsStartErrors(t *testing.T) {
	s := newTestExecutions(t, "", NewManualClock(epoch), nil)
	tests := []struct {
		name     string
		workflow string
		arg      string
		want     error
	}{
		{"unknown workflow", "nope", "", ErrNotFound},
		{"bad JSON", "child", "{", ErrBadArgument},
		{"argument over 32 KB", "child", `"` + string(make([]byte, MaxArgumentBytes)) + `"`, ErrArgumentTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.Start(tt.workflow, tt.arg, StartOptions{}); !errors.Is(err, tt.want) {
				t.Errorf("Start: %v, want %v", err, tt.want)
			}
		})
	}
}

func TestRunArgumentLimit(t *testing.T) {
	w, err := Load("arg.yaml", []byte("main:\n  params: [a]\n  steps:\n    - r:\n        return: ${len(a)}\n"))
	if err != nil {
		t.Fatal(err)
	}
	eng := NewEngine(Options{Clock: NewManualClock(epoch)})
	if res, err := eng.Run(context.Background(), w, string(make([]byte, 1000))); err != nil || res != int64(1000) {
		t.Fatalf("small argument: %v, %v", res, err)
	}
	_, err = eng.Run(context.Background(), w, string(make([]byte, MaxArgumentBytes)))
	var re *RunError
	if !errors.As(err, &re) || !re.Err.HasTag("ResourceLimitError") {
		t.Fatalf("argument over 32 KB: %v, want ResourceLimitError", err)
	}
}

func TestRunArgumentTypes(t *testing.T) {
	w, err := Load("types.yaml", []byte("main:\n  params: [a]\n  steps:\n    - r:\n        return: ${[get_type(a.i), get_type(a.d), get_type(a.s.N)]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	eng := NewEngine(Options{Clock: NewManualClock(epoch)})
	tests := []struct {
		name string
		arg  any
	}{
		{"workflow types", map[string]any{"i": int64(1), "d": 2.0, "s": map[string]any{"N": "x"}}},
		{"Go types", map[string]any{"i": 1, "d": 2.5, "s": struct{ N string }{"x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := eng.Run(context.Background(), w, tt.arg)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(res); got != "[integer double string]" {
				t.Errorf("types %s", got)
			}
		})
	}
}
