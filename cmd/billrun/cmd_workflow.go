package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"billrun.dev/billrun/internal/workflow"
	"billrun.dev/billrun/internal/workflow/executionsapi"
)

// Defaults of billrun workflow.
const (
	defaultWorkflowAddr    = "127.0.0.1:8091"
	defaultWorkflowDir     = "workflows"
	defaultWorkflowDataDir = ".billrun/workflows"
)

func workflowCommand() command {
	return command{
		name:    "workflow",
		summary: "validate, run or serve Cloud Workflows YAML on the local engine",
		run:     runWorkflow,
	}
}

func workflowUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage:")
	fmt.Fprintln(w, "  billrun workflow validate FILE...")
	fmt.Fprintln(w, "  billrun workflow run FILE [--data JSON] [--env K=V]... [--data-dir DIR]")
	fmt.Fprintln(w, "  billrun workflow serve [--dir DIR] [--addr HOST:PORT] [--env K=V]... [--data-dir DIR]")
	fmt.Fprintln(w, "\nvalidate checks files as Google does at deploy time (exit 1 with located errors).")
	fmt.Fprintln(w, "run executes one workflow and prints its result as JSON, or its error map as JSON")
	fmt.Fprintln(w, "with exit status 1; sys.log records go to stderr.")
	fmt.Fprintln(w, "serve serves the Workflow Executions API (REST and gRPC) for the workflows of a")
	fmt.Fprintln(w, "directory, named by file, for gcloud (api_endpoint_overrides/workflowexecutions)")
	fmt.Fprintln(w, "and the Go client (option.WithEndpoint).")
}

func runWorkflow(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		workflowUsage(env.stdout)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	switch args[0] {
	case "validate":
		return runWorkflowValidate(env, args[1:])
	case "run":
		return runWorkflowRun(ctx, env, args[1:])
	case "serve":
		return runWorkflowServe(ctx, env, args[1:])
	}
	fmt.Fprintf(env.stderr, "billrun workflow: unknown subcommand %q\n\n", args[0])
	workflowUsage(env.stderr)
	return errUsage
}

func runWorkflowValidate(env *cliEnv, args []string) error {
	if len(args) == 0 {
		fmt.Fprintln(env.stderr, "Usage: billrun workflow validate FILE...")
		return errUsage
	}
	bad := 0
	for _, file := range args {
		if _, err := workflow.LoadFile(file); err != nil {
			fmt.Fprintln(env.stderr, err)
			bad++
			continue
		}
		fmt.Fprintf(env.stdout, "%s: ok\n", file)
	}
	if bad > 0 {
		return &exitError{code: 1, err: fmt.Errorf("workflow validate: %d of %d files invalid", bad, len(args))}
	}
	return nil
}

// envFlag collects repeated --env K=V flags.
type envFlag map[string]string

func (e envFlag) String() string { return "" }

func (e envFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want K=V, got %q", s)
	}
	e[k] = v
	return nil
}

// workflowFlags are the flags run and serve share.
type workflowFlags struct {
	env     envFlag
	dataDir string
}

func (f *workflowFlags) register(fs *flag.FlagSet) {
	f.env = envFlag{}
	fs.Var(f.env, "env", "user environment variable `K=V` for sys.get_env (repeatable)")
	fs.StringVar(&f.dataDir, "data-dir", defaultWorkflowDataDir, "directory keeping executions, step history and logs; \"\" keeps them in memory")
}

// executions builds the Executions service both subcommands use; sys.log
// records go to stderr as text.
func (f *workflowFlags) executions(env *cliEnv, source workflow.WorkflowSource) (*workflow.Executions, error) {
	return workflow.NewExecutions(workflow.ExecutionsConfig{
		Engine: workflow.Options{
			Logger: slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
			Env:    f.env,
		},
		Workflows: source,
		DataDir:   f.dataDir,
	})
}

func parseFlags(fs *flag.FlagSet, env *cliEnv, args []string) ([]string, error) {
	fs.SetOutput(env.stderr)
	// Flags may follow the file name: parse around positional arguments.
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsage
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func runWorkflowRun(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("workflow run", flag.ContinueOnError)
	data := fs.String("data", "", "execution argument (`JSON`)")
	var wf workflowFlags
	wf.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: billrun workflow run FILE [--data JSON] [--env K=V]... [--data-dir DIR]")
		fs.PrintDefaults()
	}
	pos, err := parseFlags(fs, env, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return errUsage
	}
	w, err := workflow.LoadFile(pos[0])
	if err != nil {
		fmt.Fprintln(env.stderr, err)
		return &exitError{code: 1, err: errors.New("workflow run: invalid workflow")}
	}
	// Child executions (the connector) find their workflow among the files
	// next to this one.
	siblings := workflow.DirSource(filepath.Dir(pos[0]))
	svc, err := wf.executions(env, func(id string) (*workflow.Workflow, error) {
		if id == w.Name {
			return w, nil
		}
		return siblings(id)
	})
	if err != nil {
		return fmt.Errorf("workflow run: %w", err)
	}
	defer svc.Close()
	x, err := svc.Start(w.Name, *data, workflow.StartOptions{})
	if err != nil {
		return fmt.Errorf("workflow run: %w", err)
	}
	done, err := svc.Wait(ctx, x.ID)
	if err != nil {
		// Interrupted (Ctrl-C): cancel the execution and report it.
		if done, err = svc.Cancel(x.ID); err != nil {
			return fmt.Errorf("workflow run: %w", err)
		}
	}
	switch done.State {
	case workflow.StateSucceeded:
		return printJSON(env.stdout, done.Result)
	case workflow.StateFailed:
		if err := printJSON(env.stdout, done.Error.Payload); err != nil {
			return err
		}
		return &exitError{code: 1, err: fmt.Errorf("workflow run: execution %s failed: %s", done.ID, strings.ReplaceAll(done.Error.Context, "\n", " "))}
	}
	return &exitError{code: 1, err: fmt.Errorf("workflow run: execution %s %s", done.ID, strings.ToLower(string(done.State)))}
}

// printJSON prints a JSON text indented.
func printJSON(w io.Writer, text string) error {
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return fmt.Errorf("workflow run: result: %w", err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

func runWorkflowServe(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("workflow serve", flag.ContinueOnError)
	addr := fs.String("addr", defaultWorkflowAddr, "address to listen on (`host:port`; port 0 picks one)")
	dir := fs.String("dir", defaultWorkflowDir, "directory of workflow files (name.yaml is workflow name)")
	var wf workflowFlags
	wf.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: billrun workflow serve [--dir DIR] [--addr HOST:PORT] [--env K=V]... [--data-dir DIR]")
		fs.PrintDefaults()
	}
	pos, err := parseFlags(fs, env, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		fs.Usage()
		return errUsage
	}
	if st, err := os.Stat(*dir); err != nil || !st.IsDir() {
		return fmt.Errorf("workflow serve: --dir %s is not a directory", *dir)
	}
	svc, err := wf.executions(env, workflow.DirSource(*dir))
	if err != nil {
		return fmt.Errorf("workflow serve: %w", err)
	}
	defer svc.Close()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("workflow serve: %w", err)
	}
	fmt.Fprintf(env.stdout, "serving the Workflow Executions API for %s on http://%s\n", *dir, l.Addr())
	fmt.Fprintf(env.stdout, "  gcloud config set api_endpoint_overrides/workflowexecutions http://%s/\n", l.Addr())
	return executionsapi.New(svc).Serve(ctx, l)
}
