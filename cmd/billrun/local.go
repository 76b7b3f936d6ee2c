package main

// What the local commands share: flags, the data directory, finding or
// starting the local stack, and following an execution.

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
	"syscall"
	"time"

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/config"
	"billrun.dev/billrun/internal/localstack"
	"billrun.dev/billrun/internal/store/embedded"
	"billrun.dev/billrun/internal/stripesim"
)

// Defaults of the local commands.
const (
	defaultDataDir = config.DefaultDataDir
	// serverFile, in the data directory, tells other billrun processes where
	// the stack that owns the directory listens.
	serverFile = "server.json"
	// lockFile is held (flock) by the process whose stack owns the data
	// directory: one simulator per directory.
	lockFile = "stack.lock"
	// progressEvery is how often a live view redraws.
	progressEvery = 200 * time.Millisecond
)

// Exit statuses beyond 0 (done), 1 (failed) and 2 (usage).
const (
	exitAlreadyRunning = 3 // another execution is billing the period
)

// dataDirFlag registers --data-dir.
func dataDirFlag(fs *flag.FlagSet) *string {
	return fs.String("data-dir", defaultDataDir, "the local stack's state: store, Stripe simulator, executions (`DIR`)")
}

// periodFlag registers --period; "" means the previous calendar month.
func periodFlag(fs *flag.FlagSet) *string {
	return fs.String("period", "", "billing period `YYYY-MM` (default: the previous calendar month in the workflow's BILLRUN_TIME_ZONE, UTC unless --env sets it)")
}

// resolvePeriod validates p, or, when it is "", computes the previous calendar
// month in zone ("" is UTC) exactly as the workflow does for a run started
// without a period, so that the CLI follows the period the workflow bills.
func resolvePeriod(p string, now time.Time, zone string) (string, error) {
	if p == "" {
		loc := time.UTC
		if zone != "" {
			var err error
			if loc, err = time.LoadLocation(zone); err != nil {
				return "", fmt.Errorf("BILLRUN_TIME_ZONE: %w", err)
			}
		}
		now = now.In(loc)
		first := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, loc)
		return first.AddDate(0, -1, 0).Format("2006-01"), nil
	}
	if err := billing.ValidatePeriod(p, now); err != nil {
		return "", fmt.Errorf("--period: %w", err)
	}
	return p, nil
}

// openStore opens the data directory's embedded store (several processes may
// use it at once).
func openStore(ctx context.Context, dataDir string) (*embedded.DB, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	return embedded.Open(ctx, filepath.Join(dataDir, config.EmbeddedFile))
}

// serverInfo is serverFile's content.
type serverInfo struct {
	PID int `json:"pid"`
	// Command is the billrun command holding the directory; only serve's
	// stack outlives its own work and takes other processes' executions.
	Command      string `json:"command"`
	API          string `json:"api"` // host:port of the Executions API
	SimURL       string `json:"stripe_simulator"`
	FunctionsURL string `json:"functions"`
}

// runningServer returns the billrun serve serving dataDir from another
// process, if one answers.
func runningServer(dataDir string) (serverInfo, bool) {
	var info serverInfo
	b, err := os.ReadFile(filepath.Join(dataDir, serverFile))
	if err != nil || json.Unmarshal(b, &info) != nil || info.PID == os.Getpid() || info.Command != "serve" {
		return info, false
	}
	c, err := net.DialTimeout("tcp", info.API, time.Second)
	if err != nil {
		return info, false
	}
	c.Close()
	return info, true
}

// stackOptions are the flags of the commands that may start a stack.
type stackOptions struct {
	workflow string
	lease    time.Duration
	faults   faultsFlag
	seed     int64
	logLevel string
	env      envFlag
}

// defaultStackOptions are the flags' defaults, for commands that start a stack
// without offering its flags.
func defaultStackOptions() stackOptions {
	var o stackOptions
	o.register(flag.NewFlagSet("", flag.ContinueOnError))
	return o
}

func (o *stackOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.workflow, "workflow", "", "the billing workflow's YAML `FILE` (default: the production workflow built into billrun)")
	fs.DurationVar(&o.lease, "lease", config.DefaultLease, "run lease: how long a silent execution keeps the period before another may take over")
	fs.Var(&o.faults, "faults", "inject Stripe simulator and store faults (local only): `SPEC`, see billrun help faults")
	fs.Int64Var(&o.seed, "seed", 1, "seed of the sample customers and of the faults")
	fs.StringVar(&o.logLevel, "log-level", "error", "level of the stack's logs on stderr: debug, info, warn, error")
	o.env = envFlag{}
	fs.Var(o.env, "env", "set the workflow's environment variable `K=V` (BILLRUN_PAGE_SIZE, BILLRUN_CONCURRENCY, a function URL…; repeatable)")
}

// ownedStack is a stack this process started, holding the data directory.
type ownedStack struct {
	*localstack.Stack
	lock    *os.File
	dataDir string
	// faults are the simulator's; the store's live in the functions'
	// environment.
	faults stripesim.Faults
}

// startStack starts the local stack on dataDir for command (run, demo,
// serve…); dataDir must not be held by another process.
func startStack(ctx context.Context, env *cliEnv, command, dataDir, apiAddr string, o stackOptions) (*ownedStack, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(dataDir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		var info serverInfo
		b, _ := os.ReadFile(filepath.Join(dataDir, serverFile))
		if json.Unmarshal(b, &info) == nil && info.PID != 0 {
			return nil, fmt.Errorf("billrun %s (pid %d) is using %s: wait for it to end (billrun status shows its progress), or start billrun serve there to share one stack", info.Command, info.PID, dataDir)
		}
		return nil, fmt.Errorf("another billrun process is starting or stopping a stack on %s; try again", dataDir)
	}
	s, err := localstack.Start(ctx, localstack.Config{
		DataDir: dataDir, StripeKey: localStripeKey(env.getenv), VaultSigningSecret: env.getenv("BILLRUN_VAULT_SIGNING_SECRET"),
		WorkflowFile: o.workflow, Lease: o.lease, APIAddr: apiAddr, Logs: env.stderr, LogLevel: level,
		WorkflowEnv: o.env, SimFaults: o.faults.sim, Seed: o.seed, StoreFaults: o.faults.storePlan(o.seed),
	})
	if err != nil {
		lock.Close()
		return nil, err
	}
	info := serverInfo{PID: os.Getpid(), Command: command, API: strings.TrimPrefix(s.APIURL, "http://"), SimURL: s.SimURL, FunctionsURL: s.FunctionsURL}
	b, _ := json.Marshal(info)
	if err := os.WriteFile(filepath.Join(dataDir, serverFile), b, 0o600); err != nil {
		s.Close()
		lock.Close()
		return nil, err
	}
	return &ownedStack{Stack: s, lock: lock, dataDir: dataDir, faults: o.faults.sim}, nil
}

// localStripeKey is the user's STRIPE_SECRET_KEY when it is a test-mode key
// (the simulator accepts any), so a test can follow a key of its own through
// the stack; otherwise "" (the stack's constant key): a live key, perhaps set
// for audit --stripe, is never sent to the simulator.
func localStripeKey(getenv func(string) string) string {
	k := strings.TrimSpace(getenv("STRIPE_SECRET_KEY"))
	if strings.HasPrefix(k, "sk_test_") || strings.HasPrefix(k, "rk_test_") {
		return k
	}
	return ""
}

func (s *ownedStack) Close() error {
	os.Remove(filepath.Join(s.dataDir, serverFile))
	err := s.Stack.Close()
	s.lock.Close()
	return err
}

// printOut writes v as indented JSON when asJSON, else calls text.
func printOut(w io.Writer, asJSON bool, v any, text func(io.Writer) error) error {
	if !asJSON {
		return text(w)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newFlagSet returns a flag set whose usage prints synopsis, about (when not
// empty) and the flags.
func newFlagSet(name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: "+synopsis)
		if about != "" {
			fmt.Fprintln(fs.Output(), "\n"+about)
		}
		fmt.Fprintln(fs.Output(), "\nFlags:")
		fs.PrintDefaults()
	}
	return fs
}

// parseNoArgs parses flags and refuses positional arguments.
func parseNoArgs(fs *flag.FlagSet, env *cliEnv, args []string) error {
	pos, err := parseFlags(fs, env, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError(fs, "unexpected argument %q", pos[0])
	}
	return nil
}

// usageError prints msg and the flag set's usage, and returns errUsage.
func usageError(fs *flag.FlagSet, format string, args ...any) error {
	fmt.Fprintf(fs.Output(), "billrun %s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.Usage()
	return errUsage
}

// isCancelled reports whether err is the end of the command's context.
func isCancelled(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
