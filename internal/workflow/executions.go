package workflow

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"billrun.dev/billrun/internal/workflow/expr"
)

// Sentinel errors of the Executions service.
var (
	ErrNotFound         = errors.New("not found")
	ErrArgumentTooLarge = errors.New("execution argument too large")
	ErrBadArgument      = errors.New("execution argument is not valid JSON")
	ErrNotActive        = errors.New("execution is not active")
)

// State is an execution's state, as the Executions API names it.
type State string

// The states a local execution goes through.
const (
	StateActive    State = "ACTIVE"
	StateSucceeded State = "SUCCEEDED"
	StateFailed    State = "FAILED"
	StateCancelled State = "CANCELLED"
)

// interruptedPayload is the error given, when the service starts, to an
// execution that was still ACTIVE when a previous process stopped: the local
// engine cannot resume an execution (Google would), so it is marked FAILED.
const interruptedPayload = `{"message":"the local engine stopped while this execution was running","tags":["SystemError"]}`

// Execution is the record of one execution: what the Executions API returns
// and what the data directory keeps.
type Execution struct {
	ID       string            `json:"id"`
	Workflow string            `json:"workflow"`
	Project  string            `json:"project"`
	Location string            `json:"location"`
	State    State             `json:"state"`
	Argument string            `json:"argument,omitempty"` // JSON text
	Result   string            `json:"result,omitempty"`   // JSON text
	Error    *ExecutionError   `json:"error,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	// Parent is the execution whose connector call started this one.
	Parent string `json:"parent,omitempty"`
	// LastStep is the step that finished last (the Executions API's
	// status.currentSteps).
	LastStep   *StepRef  `json:"lastStep,omitempty"`
	CreateTime time.Time `json:"createTime"`
	StartTime  time.Time `json:"startTime"`
	EndTime    time.Time `json:"endTime,omitzero"`
	Steps      int64     `json:"steps"` // step entries recorded
}

// Name is the execution's resource name.
func (x *Execution) Name() string {
	return fmt.Sprintf("projects/%s/locations/%s/workflows/%s/executions/%s", x.Project, x.Location, x.Workflow, x.ID)
}

// StepRef names a step of a routine.
type StepRef struct {
	Routine string `json:"routine"`
	Step    string `json:"step"`
}

// ExecutionError is Google's error of a failed execution.
type ExecutionError struct {
	Payload    string       `json:"payload"` // the error map as JSON
	Context    string       `json:"context"`
	StackTrace []StackFrame `json:"stackTrace,omitempty"`
}

// WorkflowSource finds a workflow by id (as deployed workflows are found by
// name).
type WorkflowSource func(id string) (*Workflow, error)

// DirSource serves the workflows of a directory: id.yaml, id.yml or id.json,
// loaded afresh on each execution so that edits are picked up like a deploy.
func DirSource(dir string) WorkflowSource {
	return func(id string) (*Workflow, error) {
		if !identRe.MatchString(strings.ReplaceAll(id, "-", "_")) {
			return nil, fmt.Errorf("workflow %q: %w", id, ErrNotFound)
		}
		for _, ext := range []string{".yaml", ".yml", ".json"} {
			w, err := LoadFile(filepath.Join(dir, id+ext))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return w, err
		}
		return nil, fmt.Errorf("workflow %q in %s: %w", id, dir, ErrNotFound)
	}
}

// StaticSource serves already loaded workflows by Name.
func StaticSource(ws ...*Workflow) WorkflowSource {
	return func(id string) (*Workflow, error) {
		for _, w := range ws {
			if w.Name == id {
				return w, nil
			}
		}
		return nil, fmt.Errorf("workflow %q: %w", id, ErrNotFound)
	}
}

// ExecutionsConfig configures an Executions service.
type ExecutionsConfig struct {
	// Engine configures the engine that runs the executions; its Children
	// field is replaced by the service itself.
	Engine Options
	// Workflows finds workflows by id. Required.
	Workflows WorkflowSource
	// DataDir keeps every execution (record, step history, logs) under
	// DataDir/executions/<workflow>/<id>/. Empty: memory only.
	DataDir string
	// OnEvent, if set, sees every step entry, sys.log record and state change
	// of every execution (for progress views). It must be safe for concurrent
	// use and return quickly.
	OnEvent func(Event)
}

// Executions starts, tracks and keeps executions: the local counterpart of
// the Workflow Executions API, used by its REST server and by the CLI.
type Executions struct {
	cfg    ExecutionsConfig
	engine *Engine
	base   context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	runs map[string]*run // by execution id
}

// run is an execution the service knows: finished ones have done closed.
type run struct {
	mu     sync.Mutex
	rec    Execution
	cancel context.CancelFunc
	done   chan struct{}
	hist   *history
}

// NewExecutions returns a service, loading the executions kept in DataDir.
func NewExecutions(cfg ExecutionsConfig) (*Executions, error) {
	if cfg.Workflows == nil {
		return nil, errors.New("executions: a workflow source is required")
	}
	s := &Executions{cfg: cfg, runs: map[string]*run{}}
	opts := cfg.Engine
	opts.Children = s
	s.engine = NewEngine(opts)
	s.base, s.stop = context.WithCancel(context.Background())
	if cfg.DataDir != "" {
		if err := s.load(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Close cancels the executions still running and waits for them.
func (s *Executions) Close() error {
	s.stop()
	s.wg.Wait()
	return nil
}

// StartOptions are the optional settings of a new execution.
type StartOptions struct {
	// Env adds user environment variables for this execution only.
	Env    map[string]string
	Labels map[string]string
	// Parent is the id of the execution starting this one (the connector
	// sets it).
	Parent string
}

// Start creates an execution of workflow id with a JSON argument ("" for
// none) and runs it in the background.
func (s *Executions) Start(workflowID, argument string, opts StartOptions) (*Execution, error) {
	if len(argument) > MaxArgumentBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrArgumentTooLarge, len(argument), MaxArgumentBytes)
	}
	var arg any
	if strings.TrimSpace(argument) != "" {
		var err error
		if arg, err = expr.DecodeJSON([]byte(argument)); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadArgument, err)
		}
	}
	w, err := s.cfg.Workflows(workflowID)
	if err != nil {
		return nil, fmt.Errorf("start execution: %w", err)
	}
	// Execution ids are always random, whatever Options.UUID returns for
	// uuid.generate (tests often fix it).
	id, err := newUUID()
	if err != nil {
		return nil, fmt.Errorf("start execution: %w", err)
	}
	now := s.engine.opts.Clock.Now()
	r := &run{done: make(chan struct{}), rec: Execution{
		ID: id, Workflow: workflowID, Project: s.engine.opts.Project, Location: s.engine.opts.Location,
		State: StateActive, Argument: argument, Labels: opts.Labels, Parent: opts.Parent, CreateTime: now, StartTime: now,
	}}
	if r.hist, err = s.openHistory(&r.rec); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(s.base)
	r.cancel = cancel
	s.mu.Lock()
	s.runs[id] = r
	s.mu.Unlock()
	s.save(r)
	s.emit(Event{Execution: id, Time: now, State: StateActive})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		res, err := s.engine.Execute(ctx, w, arg, RunConfig{ExecutionID: id, Env: opts.Env, Events: func(ev Event) {
			r.hist.add(ev)
			if ev.Step != nil {
				r.mu.Lock()
				r.rec.LastStep = &StepRef{Routine: ev.Step.Routine, Step: ev.Step.Step}
				r.mu.Unlock()
			}
			s.emit(ev)
		}})
		s.finish(r, res, err)
	}()
	return r.snapshot(), nil
}

// finish records the outcome of a run.
func (s *Executions) finish(r *run, res any, err error) {
	r.mu.Lock()
	r.rec.EndTime = s.engine.opts.Clock.Now()
	var re *RunError
	switch {
	case err == nil:
		b, jerr := expr.EncodeJSON(res)
		if jerr != nil {
			r.rec.State = StateFailed
			r.rec.Error = &ExecutionError{Payload: fmt.Sprintf(`{"message":%q,"tags":["TypeError"]}`, "result is not JSON: "+jerr.Error())}
			break
		}
		r.rec.State, r.rec.Result = StateSucceeded, string(b)
	case errors.Is(err, context.Canceled):
		r.rec.State = StateCancelled
	case errors.As(err, &re):
		r.rec.State = StateFailed
		r.rec.Error = &ExecutionError{Payload: re.Payload(), Context: re.Context(), StackTrace: re.Stack}
	default:
		r.rec.State = StateFailed
		r.rec.Error = &ExecutionError{Payload: fmt.Sprintf(`{"message":%q,"tags":["SystemError"]}`, err.Error())}
	}
	r.rec.Steps = r.hist.count()
	state, end := r.rec.State, r.rec.EndTime
	r.mu.Unlock()
	r.hist.close()
	s.save(r)
	s.emit(Event{Execution: r.rec.ID, Time: end, State: state})
	close(r.done)
}

func (s *Executions) emit(ev Event) {
	if s.cfg.OnEvent != nil {
		s.cfg.OnEvent(ev)
	}
}

func (r *run) snapshot() *Execution {
	r.mu.Lock()
	defer r.mu.Unlock()
	x := r.rec
	if x.State == StateActive && r.hist != nil {
		x.Steps = r.hist.count()
	}
	return &x
}

func (s *Executions) get(id string) (*run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.runs[id]; ok {
		return r, nil
	}
	return nil, fmt.Errorf("execution %s: %w", id, ErrNotFound)
}

// Get returns an execution by id.
func (s *Executions) Get(id string) (*Execution, error) {
	r, err := s.get(id)
	if err != nil {
		return nil, err
	}
	return r.snapshot(), nil
}

// List returns the executions of a workflow ("" for all), newest first.
func (s *Executions) List(workflowID string) []*Execution {
	s.mu.Lock()
	runs := make([]*run, 0, len(s.runs))
	for _, r := range s.runs {
		runs = append(runs, r)
	}
	s.mu.Unlock()
	var out []*Execution
	for _, r := range runs {
		if x := r.snapshot(); workflowID == "" || x.Workflow == workflowID {
			out = append(out, x)
		}
	}
	slices.SortFunc(out, func(a, b *Execution) int {
		if c := b.CreateTime.Compare(a.CreateTime); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return out
}

// Cancel cancels an active execution and waits until it has stopped.
func (s *Executions) Cancel(id string) (*Execution, error) {
	r, err := s.get(id)
	if err != nil {
		return nil, err
	}
	select {
	case <-r.done:
		return nil, fmt.Errorf("cancel execution %s: %w", id, ErrNotActive)
	default:
	}
	r.cancel()
	<-r.done
	return r.snapshot(), nil
}

// Wait blocks until the execution has ended (or ctx is done).
func (s *Executions) Wait(ctx context.Context, id string) (*Execution, error) {
	r, err := s.get(id)
	if err != nil {
		return nil, err
	}
	select {
	case <-r.done:
		return r.snapshot(), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Run starts an execution and waits for it.
func (s *Executions) Run(ctx context.Context, workflowID, argument string, opts StartOptions) (*Execution, error) {
	x, err := s.Start(workflowID, argument, opts)
	if err != nil {
		return nil, err
	}
	return s.Wait(ctx, x.ID)
}

// RunChild runs a child execution for the execution connector: it waits for
// the child, cancelling it if ctx ends first, and returns its decoded result.
func (s *Executions) RunChild(ctx context.Context, workflowID string, argument any) (any, error) {
	arg := ""
	if argument != nil {
		b, err := expr.EncodeJSON(argument)
		if err != nil {
			return nil, expr.TypeError("%s: argument is not JSON: %v", ConnectorRun, err)
		}
		arg = string(b)
	}
	var opts StartOptions
	if fr := frameFrom(ctx); fr != nil {
		opts.Parent = fr.x.id
	}
	x, err := s.Start(workflowID, arg, opts)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, expr.NewError(expr.TagOperationError, "%s: workflow %s not found", ConnectorRun, workflowID)
	case errors.Is(err, ErrArgumentTooLarge):
		return nil, expr.NewError(expr.TagResourceLimitError, "%s: %v", ConnectorRun, err)
	case err != nil:
		return nil, expr.NewError(expr.TagOperationError, "%s: %v", ConnectorRun, err)
	}
	done, err := s.Wait(ctx, x.ID)
	if err != nil {
		if _, cerr := s.Cancel(x.ID); cerr != nil && !errors.Is(cerr, ErrNotActive) {
			return nil, errors.Join(err, cerr)
		}
		return nil, err
	}
	switch done.State {
	case StateSucceeded:
		if len(done.Result) > MaxResultBytes {
			return nil, expr.NewError(expr.TagResultSizeLimitExceededError, "child execution result exceeds %d bytes", MaxResultBytes)
		}
		return expr.DecodeJSON([]byte(done.Result))
	case StateCancelled:
		return nil, childError(done, &ExecutionError{Payload: `{"message":"execution cancelled","tags":["OperationError"]}`})
	}
	return nil, childError(done, done.Error)
}

// childError is the OperationError raised for a failed child (see
// childFailedMessage in rules.go).
func childError(x *Execution, e *ExecutionError) error {
	op := expr.NewError(expr.TagOperationError, "%s", childFailedMessage)
	errMap := map[string]any{}
	if e != nil {
		errMap = map[string]any{"payload": e.Payload, "context": e.Context}
	}
	op.Extra = map[string]any{"operation": map[string]any{
		"name": x.Name(), "state": string(x.State), "error": errMap,
	}}
	return op
}

// Steps returns an execution's step history.
func (s *Executions) Steps(id string) ([]StepEntry, error) {
	r, err := s.get(id)
	if err != nil {
		return nil, err
	}
	return r.hist.steps()
}

// Logs returns an execution's sys.log records.
func (s *Executions) Logs(id string) ([]LogEntry, error) {
	r, err := s.get(id)
	if err != nil {
		return nil, err
	}
	return r.hist.logs()
}

// --- persistence

func (s *Executions) dir(x *Execution) string {
	return filepath.Join(s.cfg.DataDir, "executions", x.Workflow, x.ID)
}

// save writes the execution record (atomically, by rename).
func (s *Executions) save(r *run) {
	if s.cfg.DataDir == "" {
		return
	}
	x := r.snapshot()
	b, err := json.MarshalIndent(x, "", "  ")
	if err == nil {
		path := filepath.Join(s.dir(x), "execution.json")
		tmp := path + ".tmp"
		if err = os.WriteFile(tmp, b, 0o644); err == nil {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		s.engine.opts.Logger.Error("save execution", "execution", x.ID, "error", err)
	}
}

// load reads the executions kept in DataDir.
func (s *Executions) load() error {
	paths, err := filepath.Glob(filepath.Join(s.cfg.DataDir, "executions", "*", "*", "execution.json"))
	if err != nil {
		return fmt.Errorf("load executions: %w", err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("load executions: %w", err)
		}
		r := &run{done: make(chan struct{})}
		if err := json.Unmarshal(b, &r.rec); err != nil {
			return fmt.Errorf("load execution %s: %w", p, err)
		}
		r.hist = &history{dir: filepath.Dir(p)}
		if r.rec.State == StateActive {
			r.rec.State = StateFailed
			r.rec.EndTime = s.engine.opts.Clock.Now()
			r.rec.Error = &ExecutionError{Payload: interruptedPayload}
			r.cancel = func() {}
			defer s.save(r)
		}
		close(r.done)
		s.runs[r.rec.ID] = r
	}
	return nil
}

func (s *Executions) openHistory(x *Execution) (*history, error) {
	h := &history{}
	if s.cfg.DataDir == "" {
		return h, nil
	}
	h.dir = s.dir(x)
	if err := os.MkdirAll(h.dir, 0o755); err != nil {
		return nil, fmt.Errorf("execution history: %w", err)
	}
	for _, f := range []struct {
		name string
		w    **bufio.Writer
		file **os.File
	}{{"steps.jsonl", &h.stepsW, &h.stepsF}, {"logs.jsonl", &h.logsW, &h.logsF}} {
		file, err := os.Create(filepath.Join(h.dir, f.name))
		if err != nil {
			return nil, fmt.Errorf("execution history: %w", err)
		}
		*f.file, *f.w = file, bufio.NewWriter(file)
	}
	return h, nil
}

// history is the step entries and log records of one execution: appended to
// JSON-lines files in the data directory, or kept in memory without one.
type history struct {
	dir string

	mu            sync.Mutex
	n             int64
	stepsF, logsF *os.File
	stepsW, logsW *bufio.Writer
	memSteps      []StepEntry
	memLogs       []LogEntry
}

func (h *history) add(ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case ev.Step != nil:
		h.n++
		if h.stepsW == nil {
			if h.dir == "" {
				h.memSteps = append(h.memSteps, *ev.Step)
			}
			return
		}
		writeLine(h.stepsW, ev.Step)
	case ev.Log != nil:
		if h.logsW == nil {
			if h.dir == "" {
				h.memLogs = append(h.memLogs, *ev.Log)
			}
			return
		}
		writeLine(h.logsW, ev.Log)
	}
}

func writeLine(w *bufio.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	w.Write(b)
	w.WriteByte('\n')
}

func (h *history) count() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// flush writes buffered lines so that readers see them.
func (h *history) flush() {
	for _, w := range []*bufio.Writer{h.stepsW, h.logsW} {
		if w != nil {
			w.Flush()
		}
	}
}

func (h *history) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.flush()
	for _, f := range []*os.File{h.stepsF, h.logsF} {
		if f != nil {
			f.Close()
		}
	}
	h.stepsW, h.logsW, h.stepsF, h.logsF = nil, nil, nil, nil
}

func (h *history) steps() ([]StepEntry, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dir == "" {
		return slices.Clone(h.memSteps), nil
	}
	h.flush()
	return readLines[StepEntry](filepath.Join(h.dir, "steps.jsonl"))
}

func (h *history) logs() ([]LogEntry, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dir == "" {
		return slices.Clone(h.memLogs), nil
	}
	h.flush()
	return readLines[LogEntry](filepath.Join(h.dir, "logs.jsonl"))
}

func readLines[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}
