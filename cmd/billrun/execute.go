package main

// Starting a billing execution and following it to its end with the progress
// view, wherever it runs: this process's stack, a running `billrun serve`, or
// Google Cloud (the last two through the Executions API client).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	executions "cloud.google.com/go/workflows/executions/apiv1"
	"cloud.google.com/go/workflows/executions/apiv1/executionspb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/localstack"
	"billrun.dev/billrun/internal/progress"
	"billrun.dev/billrun/internal/sample"
	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/workflow"
)

// ended is a finished execution.
type ended struct {
	ID           string `json:"execution"`
	State        string `json:"state"`
	Result       any    `json:"result,omitempty"`
	ErrorPayload string `json:"error,omitempty"`
	ErrorContext string `json:"error_context,omitempty"`
}

// executor starts billing executions and reports their end.
type executor interface {
	start(ctx context.Context, period string) (id string, err error)
	// poll returns nil while the execution runs.
	poll(ctx context.Context, id string) (*ended, error)
}

// stackExecutor runs executions on this process's stack.
type stackExecutor struct{ s *localstack.Stack }

func (e stackExecutor) start(_ context.Context, period string) (string, error) {
	x, err := e.s.StartRun(period)
	if err != nil {
		return "", err
	}
	return x.ID, nil
}

func (e stackExecutor) poll(_ context.Context, id string) (*ended, error) {
	x, err := e.s.Executions.Get(id)
	if err != nil {
		return nil, err
	}
	if x.State == workflow.StateActive {
		return nil, nil
	}
	out := &ended{ID: x.ID, State: string(x.State)}
	if x.Result != "" {
		if err := json.Unmarshal([]byte(x.Result), &out.Result); err != nil {
			return nil, fmt.Errorf("execution %s result: %w", x.ID, err)
		}
	}
	if x.Error != nil {
		out.ErrorPayload, out.ErrorContext = x.Error.Payload, x.Error.Context
	}
	return out, nil
}

// clientExecutor runs executions through the Executions API: Google's, or a
// local `billrun serve`'s (any project and location).
type clientExecutor struct {
	c      *executions.Client
	parent string // projects/P/locations/L/workflows/W
}

// newClientExecutor connects to Google Cloud, or to a local API when
// localAddr is set.
func newClientExecutor(ctx context.Context, project, location, localAddr string) (*clientExecutor, error) {
	var opts []option.ClientOption
	if localAddr != "" {
		opts = append(opts, option.WithEndpoint(localAddr), option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	}
	c, err := executions.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("executions client: %w", err)
	}
	return &clientExecutor{c: c, parent: fmt.Sprintf("projects/%s/locations/%s/workflows/%s", project, location, localstack.WorkflowID)}, nil
}

func (e *clientExecutor) Close() error { return e.c.Close() }

func (e *clientExecutor) start(ctx context.Context, period string) (string, error) {
	arg := ""
	if period != "" {
		b, _ := json.Marshal(map[string]string{"period": period})
		arg = string(b)
	}
	x, err := e.c.CreateExecution(ctx, &executionspb.CreateExecutionRequest{Parent: e.parent, Execution: &executionspb.Execution{Argument: arg}})
	if err != nil {
		return "", fmt.Errorf("start execution: %w", err)
	}
	return x.GetName(), nil
}

func (e *clientExecutor) poll(ctx context.Context, name string) (*ended, error) {
	x, err := e.c.GetExecution(ctx, &executionspb.GetExecutionRequest{Name: name})
	if err != nil {
		return nil, fmt.Errorf("get execution: %w", err)
	}
	switch x.GetState() {
	case executionspb.Execution_ACTIVE, executionspb.Execution_QUEUED:
		return nil, nil
	}
	out := &ended{ID: name[strings.LastIndex(name, "/")+1:], State: x.GetState().String()}
	if r := x.GetResult(); r != "" {
		if err := json.Unmarshal([]byte(r), &out.Result); err != nil {
			return nil, fmt.Errorf("execution %s result: %w", name, err)
		}
	}
	if xe := x.GetError(); xe != nil {
		out.ErrorPayload, out.ErrorContext = xe.GetPayload(), xe.GetContext()
	}
	return out, nil
}

// runOutcome is what billrun run and demo print with --json.
type runOutcome struct {
	Period   string            `json:"period"`
	Status   string            `json:"status"` // completed, already_billed, already_running, failed, cancelled
	Elapsed  string            `json:"elapsed"`
	Ended    *ended            `json:"execution"`
	Progress progress.Snapshot `json:"progress"`
}

// executePeriod starts an execution for period, follows it with the progress
// view on stdout (counts read from db), then prints the outcome. The error
// carries the exit status: 1 if the execution failed, exitAlreadyRunning if
// another execution holds the period.
func executePeriod(ctx context.Context, env *cliEnv, ex executor, db store.Backend, period string, asJSON bool) error {
	customers, err := sample.Count(ctx, db)
	if err != nil {
		return err
	}
	begin := time.Now()
	id, err := ex.start(ctx, period)
	if err != nil {
		return err
	}
	var end *ended
	view := io.Writer(env.stdout)
	if asJSON {
		view = io.Discard
	}
	snap, err := progress.Follow(ctx, view, progressEvery,
		func(ctx context.Context) (progress.Snapshot, error) { return progress.Read(ctx, db, period, customers) },
		func(ctx context.Context) (bool, error) {
			end, err = ex.poll(ctx, id)
			return end != nil, err
		})
	if err != nil {
		if isCancelled(err) {
			return fmt.Errorf("interrupted: execution %s stops with this process; the period stays claimed until its lease expires, then billrun run takes over where it stopped", id)
		}
		return err
	}
	rep := runOutcome{Period: period, Status: statusOf(end), Elapsed: time.Since(begin).Round(time.Millisecond).String(), Ended: end, Progress: snap}
	if err := printOut(env.stdout, asJSON, rep, func(w io.Writer) error { return printRun(w, rep) }); err != nil {
		return err
	}
	switch rep.Status {
	case "completed", string(billing.AlreadyBilled):
		return nil
	case string(billing.AlreadyRunning):
		return &exitError{code: exitAlreadyRunning, err: fmt.Errorf("period %s is being billed by execution %s", period, snap.Owner)}
	}
	return &exitError{code: 1, err: fmt.Errorf("execution %s %s", end.ID, strings.ToLower(end.State))}
}

// statusOf reads the run's status from an execution's end.
func statusOf(e *ended) string {
	if e.State != string(workflow.StateSucceeded) {
		return strings.ToLower(e.State)
	}
	if m, ok := e.Result.(map[string]any); ok {
		if s, ok := m["status"].(string); ok {
			return s
		}
	}
	return "completed"
}

func printRun(w io.Writer, r runOutcome) error {
	switch r.Status {
	case string(billing.AlreadyBilled):
		fmt.Fprintf(w, "billing %s: already billed, nothing charged (billrun report --period %s lists the outcomes)\n", r.Period, r.Period)
		return nil
	case string(billing.AlreadyRunning):
		fmt.Fprintf(w, "billing %s: already running in execution %s, nothing done\n", r.Period, r.Progress.Owner)
		return nil
	case "completed":
		fmt.Fprintf(w, "billing %s: completed in %s by execution %s\n", r.Period, r.Elapsed, r.Ended.ID)
	default:
		fmt.Fprintf(w, "billing %s: execution %s %s after %s\n", r.Period, r.Ended.ID, r.Status, r.Elapsed)
		if r.Ended.ErrorPayload != "" {
			fmt.Fprintf(w, "  error: %s\n  at: %s\n", r.Ended.ErrorPayload, strings.ReplaceAll(r.Ended.ErrorContext, "\n", " "))
		}
	}
	printCounts(w, r.Progress)
	return nil
}

// printCounts prints a snapshot's counts (the summary's when completed).
func printCounts(w io.Writer, s progress.Snapshot) {
	counts := map[string]int64{}
	for st, n := range s.Counts {
		counts[string(st)] = n
	}
	due := s.Due
	var totals map[string]int64
	if s.Summary != nil {
		counts, due, totals = s.Summary.Counts, s.Summary.Due, s.Summary.Totals
	}
	fmt.Fprintf(w, "  %-17s %6d\n", "due", due)
	for _, st := range billing.TerminalStates {
		fmt.Fprintf(w, "  %-17s %6d\n", st, counts[string(st)])
	}
	if n := counts[string(billing.StatePending)]; n > 0 {
		fmt.Fprintf(w, "  %-17s %6d\n", billing.StatePending, n)
	}
	fmt.Fprintf(w, "  %-17s %6d\n", "retried", s.Retried)
	currencies := make([]string, 0, len(totals))
	for c := range totals {
		currencies = append(currencies, c)
	}
	sort.Strings(currencies)
	for _, c := range currencies {
		fmt.Fprintf(w, "  charged           %s %s\n", strings.ToUpper(c), money(totals[c]))
	}
}

// money renders minor units with two decimals and thousands separators.
func money(minor int64) string {
	sign := ""
	if minor < 0 {
		sign, minor = "-", -minor
	}
	whole := fmt.Sprint(minor / 100)
	for i := len(whole) - 3; i > 0; i -= 3 {
		whole = whole[:i] + "," + whole[i:]
	}
	return fmt.Sprintf("%s%s.%02d", sign, whole, minor%100)
}
