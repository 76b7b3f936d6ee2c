package workflow

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"billrun.dev/billrun/internal/workflow/expr"
)

// Options configure an Engine. The zero value works: real time, a default HTTP
// client, slog.Default, no environment variables, no child executions.
type Options struct {
	// Clock drives sys.now, sys.sleep, retry backoff and timestamps.
	// Default: RealClock.
	Clock Clock
	// HTTPClient makes the http.* calls. Per-call timeouts come from the
	// workflow (default 300 s). Default: a client with no overall timeout
	// that keeps enough idle connections per host for a parallel step.
	HTTPClient *http.Client
	// Logger receives sys.log records, and the Executions service's own
	// failures to save a record. Default: slog.Default().
	Logger *slog.Logger
	// Env holds the workflow's user environment variables (sys.get_env).
	Env map[string]string
	// Project and Location fill GOOGLE_CLOUD_PROJECT_ID and
	// GOOGLE_CLOUD_LOCATION. Defaults: DefaultProject, DefaultLocation.
	Project, Location string
	// Children runs child executions for the
	// googleapis.workflowexecutions.v1…executions.run connector. Nil: the
	// connector raises an OperationError.
	Children ChildRunner
	// UUID generates uuid.generate values and Engine.Execute's default
	// execution id (Executions always draws random ids). Default: crypto/rand
	// version 4 UUIDs.
	UUID func() (string, error)
}

// Defaults for the built-in environment of a local execution.
const (
	DefaultProject  = "billrun-local"
	DefaultLocation = "local"
)

// ChildRunner starts a child execution of a workflow by id and waits for it,
// returning its result, or the *expr.Error the connector raises for a failed
// child. Executions implements it.
type ChildRunner interface {
	RunChild(ctx context.Context, workflowID string, argument any) (any, error)
}

// Engine runs workflows. It is safe for concurrent use by many executions.
type Engine struct {
	opts Options
}

// NewEngine returns an engine with opts, defaults filled in.
func NewEngine(opts Options) *Engine {
	if opts.Clock == nil {
		opts.Clock = RealClock{}
	}
	if opts.HTTPClient == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 2 * MaxConcurrency
		opts.HTTPClient = &http.Client{Transport: t}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Project == "" {
		opts.Project = DefaultProject
	}
	if opts.Location == "" {
		opts.Location = DefaultLocation
	}
	if opts.UUID == nil {
		opts.UUID = newUUID
	}
	return &Engine{opts: opts}
}

// RunConfig are the settings of one execution.
type RunConfig struct {
	// ExecutionID is GOOGLE_CLOUD_WORKFLOW_EXECUTION_ID. Default: a new UUID.
	ExecutionID string
	// Env adds to (and overrides) the engine's user environment variables.
	Env map[string]string
	// Events, if set, receives every step entry and sys.log record as it
	// happens, from the execution's goroutines (it must be safe for
	// concurrent use and should return quickly).
	Events func(Event)
}

// Run executes w with argument (any value encoding/json can encode, taken as
// its JSON; nil for none) and returns its result. A workflow that fails returns a *RunError (errors.As to
// *expr.Error gives the error map); a cancelled ctx returns ctx's error.
func (e *Engine) Run(ctx context.Context, w *Workflow, argument any) (any, error) {
	return e.Execute(ctx, w, argument, RunConfig{})
}

// Execute is Run with per-execution settings.
func (e *Engine) Execute(ctx context.Context, w *Workflow, argument any, cfg RunConfig) (any, error) {
	if cfg.ExecutionID == "" {
		id, err := e.opts.UUID()
		if err != nil {
			return nil, fmt.Errorf("execution id: %w", err)
		}
		cfg.ExecutionID = id
	}
	arg, size, err := workflowValue(argument)
	if err != nil {
		return nil, &RunError{Err: expr.TypeError("execution argument is not JSON: %v", err)}
	}
	if size > MaxArgumentBytes {
		return nil, &RunError{Err: expr.NewError(expr.TagResourceLimitError, "execution argument is %d bytes; the limit is %d", size, MaxArgumentBytes)}
	}
	x := e.newExecution(w, cfg)
	return x.run(ctx, arg)
}

// workflowValue returns v in Workflows' types and the size of its JSON. A
// value already in those types is kept as is (a double stays a double); any
// other Go value (int, structs…) is taken as what its encoding/json JSON
// decodes to.
func workflowValue(v any) (any, int, error) {
	if b, err := expr.EncodeJSON(v); err == nil {
		return v, len(b), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, 0, err
	}
	out, err := expr.DecodeJSON(b)
	return out, len(b), err
}

// execution is the state of one run.
type execution struct {
	eng    *Engine
	wf     *Workflow
	id     string
	reg    *expr.Registry
	subs   map[string]*expr.Func
	events func(Event)

	steps   atomic.Int64
	mem     atomic.Int64
	entryID atomic.Int64
}

func (e *Engine) newExecution(w *Workflow, cfg RunConfig) *execution {
	env := maps.Clone(e.opts.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, cfg.Env)
	maps.Copy(env, map[string]string{
		"GOOGLE_CLOUD_PROJECT_ID":            e.opts.Project,
		"GOOGLE_CLOUD_PROJECT_NUMBER":        "000000000000",
		"GOOGLE_CLOUD_LOCATION":              e.opts.Location,
		"GOOGLE_CLOUD_SERVICE_ACCOUNT_NAME":  "billrun-local@" + e.opts.Project + ".iam.gserviceaccount.com",
		"GOOGLE_CLOUD_WORKFLOW_ID":           w.Name,
		"GOOGLE_CLOUD_WORKFLOW_REVISION_ID":  "000001-local",
		"GOOGLE_CLOUD_WORKFLOW_EXECUTION_ID": cfg.ExecutionID,
	})
	x := &execution{eng: e, wf: w, id: cfg.ExecutionID, events: cfg.Events}
	x.reg = e.registry(env)
	x.subs = make(map[string]*expr.Func, len(w.Routines))
	for name, r := range w.Routines {
		if name == "main" {
			continue
		}
		x.subs[name] = x.subworkflowFunc(r)
	}
	return x
}

// registry is the function library of one execution: Google's non-blocking
// standard library over env, plus the engine's blocking functions.
func (e *Engine) registry(env map[string]string) *expr.Registry {
	r := expr.NewStdlib(expr.StdlibOptions{Now: e.opts.Clock.Now, Env: env, UUID: e.opts.UUID})
	e.addBlocking(r)
	return r
}

// catalog is the library used for deploy-time checks: names, parameters and
// whether a function blocks.
func catalog() *expr.Registry { return catalogOnce() }

var catalogOnce = sync.OnceValue(func() *expr.Registry {
	return NewEngine(Options{}).registry(nil)
})

// grow accounts for a change in variable memory and enforces the limit.
func (x *execution) grow(delta int64) error {
	if n := x.mem.Add(delta); delta > 0 && n > MaxMemoryBytes {
		return fatal(expr.NewError(expr.TagResourceLimitError, "Memory usage limit exceeded: variables use %d bytes; the limit is %d", n, MaxMemoryBytes))
	}
	return nil
}

// emit sends an event to the execution's sink, if any.
func (x *execution) emit(ev Event) {
	if x.events != nil {
		ev.Execution = x.id
		x.events(ev)
	}
}

func newUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// fatal returns an error no try/except can catch (resource limits).
func fatal(e *expr.Error) error { return &RunError{Err: e, Fatal: true} }

// isFatal reports whether err ends the execution whatever handlers there are:
// a resource limit or a cancelled execution.
func isFatal(err error) bool {
	var re *RunError
	return errors.As(err, &re) && re.Fatal || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// RunError is a failed execution: the error map and where it was raised.
type RunError struct {
	Err *expr.Error
	// Stack lists where the error passed, innermost first.
	Stack []StackFrame
	// Fatal errors (resource limits) cannot be caught.
	Fatal bool
}

// StackFrame is one step the error passed through.
type StackFrame struct {
	Routine string
	Step    string
	Line    int
	Column  int
}

func (e *RunError) Error() string {
	if len(e.Stack) == 0 {
		return e.Err.Error()
	}
	return fmt.Sprintf("%s (%s)", e.Err.Error(), e.location())
}

func (e *RunError) Unwrap() error { return e.Err }

// Context is Google's error.context: the error's message, then where it was
// raised ("…\nin step "x", routine "main", line: 4" [E]).
func (e *RunError) Context() string {
	if len(e.Stack) == 0 {
		return e.Err.Message
	}
	return e.Err.Message + "\n" + e.location()
}

// location is where the error was raised: the innermost frame.
func (e *RunError) location() string {
	f := e.Stack[0]
	return fmt.Sprintf("in step %q, routine %q, line: %d", f.Step, f.Routine, f.Line)
}

// Payload is the error map as Google's error.payload: the JSON of the value
// `except: as:` would bind.
func (e *RunError) Payload() string {
	b, err := expr.EncodeJSON(e.Err.Value())
	if err != nil {
		return fmt.Sprintf("%q", e.Err.Error())
	}
	return string(b)
}

// Event is something an execution reports while it runs.
type Event struct {
	Execution string
	Time      time.Time
	// Step is set for a finished step, Log for a sys.log record, State for a
	// change of the execution's state (Executions service only).
	Step  *StepEntry
	Log   *LogEntry
	State State
}

// StepEntry is one entry of an execution's step history.
type StepEntry struct {
	EntryID  int64          `json:"entryId"`
	Routine  string         `json:"routine"`
	Step     string         `json:"step"`
	StepType string         `json:"stepType"`
	State    string         `json:"state"` // STATE_SUCCEEDED or STATE_FAILED
	Start    time.Time      `json:"createTime"`
	End      time.Time      `json:"updateTime"`
	Attempts int            `json:"attempts,omitempty"` // tries of a try step with retry
	Error    map[string]any `json:"error,omitempty"`
}

// LogEntry is one sys.log record.
type LogEntry struct {
	Time     time.Time `json:"time"`
	Severity string    `json:"severity"`
	Text     string    `json:"text,omitempty"`
	JSON     any       `json:"json,omitempty"`
	Step     string    `json:"step,omitempty"`
}
