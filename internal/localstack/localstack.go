// Package localstack runs billrun's whole production path in one process on
// localhost: the embedded store in a data directory, the Stripe simulator
// (persisted in the same directory), the functions served by
// functions-framework-go's own server from their production registration
// (billrun.dev/billrun/functions, configured through the environment exactly as
// in the cloud), and the local Workflows engine running workflows/billing.yaml
// with its Executions API. Function URLs reach the workflow through its
// environment, as Terraform's user_env_vars do in the cloud.
//
// functions-framework-go serves one global registry, cannot be stopped, and
// the functions read their configuration from the process environment on the
// first request: so a process hosts at most one Stack for its whole life (the
// CLI's case). Tests start stacks in `billrun` subprocesses.
package localstack

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"

	"billrun.dev/billrun/internal/api"
	"billrun.dev/billrun/internal/config"
	"billrun.dev/billrun/internal/store/faultstore"
	"billrun.dev/billrun/internal/stripesim"
	"billrun.dev/billrun/internal/workflow"
	"billrun.dev/billrun/internal/workflow/executionsapi"
	"billrun.dev/billrun/workflows"

	// The production registration of the functions, served by funcframework.
	_ "billrun.dev/billrun/functions"
)

// WorkflowID is the billing workflow's id (its file name without .yaml), as
// deployed.
const WorkflowID = "billing"

// StripeKey is the test-mode key the vault proxy sends to the simulator when
// Config.StripeKey is empty. It is not a secret: the simulator accepts any
// sk_test_ key.
const StripeKey = "sk_test_billrun_local"

// Paths inside the data directory.
const (
	SimDir        = "stripesim"
	ExecutionsDir = "executions"
)

// SecretsDir is where, under the user's configuration directory
// (os.UserConfigDir), a stack keeps the vault signing secrets it generates:
// one file per data directory, named by a hash of the directory's absolute
// path. It is the local stand-in for Secret Manager: outside the data
// directory, which I5 says holds no secret, yet stable across processes, so
// keys issued by one verify in the next (a run taken over after a crash).
const SecretsDir = "billrun/vault-signing-secrets"

// Config configures a Stack.
type Config struct {
	// DataDir holds everything but secrets: the store file, the simulator's
	// state and the executions. Required.
	DataDir string
	// StripeKey is the test-mode key (sk_test_… or rk_test_…) the vault proxy
	// holds, as STRIPE_SECRET_KEY; "" means the constant StripeKey.
	StripeKey string
	// VaultSigningSecret turns vault key references into credentials
	// (BILLRUN_VAULT_SIGNING_SECRET); "" means the one generated for DataDir
	// under SecretsDir.
	VaultSigningSecret string
	// WorkflowFile is the billing workflow's YAML; "" runs the production
	// workflow embedded in the binary (package workflows).
	WorkflowFile string
	// Lease is the run lease (BILLRUN_LEASE); 0 means config.DefaultLease.
	Lease time.Duration
	// SimFaults and Seed configure the simulator's fault injection.
	SimFaults stripesim.Faults
	Seed      int64
	// StoreFaults are injected into the functions' store (the plan carries
	// its own seed), through BILLRUN_STORE_FAULTS; a plan without rules
	// injects none.
	StoreFaults faultstore.Plan
	// APIAddr is where the Executions API listens; "" means 127.0.0.1 on a free
	// port.
	APIAddr string
	// WorkflowEnv adds to or overrides the workflow's environment (page size,
	// concurrency, child executions…).
	WorkflowEnv map[string]string
	// Logs receives the functions', the simulator's and the engine's logs (at
	// LogLevel and above); nil discards them.
	Logs     io.Writer
	LogLevel slog.Level
	// OnEvent sees every execution event (workflow.ExecutionsConfig.OnEvent).
	OnEvent func(workflow.Event)
}

// Stack is a running local stack.
type Stack struct {
	// Executions runs billing executions on the local engine.
	Executions *workflow.Executions
	// Sim is the Stripe simulator.
	Sim *stripesim.Server
	// FunctionsURL, VaultProxyURL, SimURL and APIURL are the base URLs of the
	// functions, the vault proxy, the simulator and the Executions API.
	FunctionsURL, VaultProxyURL, SimURL, APIURL string
	// Env is the workflow's environment (function URLs and settings).
	Env map[string]string

	cancel  context.CancelFunc
	servers []*http.Server
	wg      sync.WaitGroup
}

// startOnce guards funcframework's server: one per process.
var startOnce sync.Once

// Start starts every part and returns when all of them answer.
func Start(ctx context.Context, cfg Config) (*Stack, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("localstack: DataDir is required")
	}
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, SimDir), 0o700); err != nil {
		return nil, fmt.Errorf("localstack: %w", err)
	}
	logs := cfg.Logs
	if logs == nil {
		logs = io.Discard
	}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: cfg.LogLevel}))
	w, err := loadWorkflow(cfg.WorkflowFile)
	if err != nil {
		return nil, fmt.Errorf("localstack: %w", err)
	}
	if w.Name != WorkflowID {
		return nil, fmt.Errorf("localstack: workflow file %s is named %q, want %q", cfg.WorkflowFile, w.Name, WorkflowID)
	}

	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Stack{cancel: cancel}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()

	sim, err := stripesim.New(stripesim.Config{
		DataDir: filepath.Join(cfg.DataDir, SimDir), Faults: cfg.SimFaults, Seed: cfg.Seed, Logger: logger,
	})
	if err != nil {
		return nil, fmt.Errorf("localstack: stripe simulator: %w", err)
	}
	s.Sim = sim
	if s.SimURL, err = s.serve("127.0.0.1:0", sim); err != nil {
		return nil, err
	}

	// VaultProxy is its own function in the cloud (FUNCTION_TARGET=VaultProxy),
	// served at the root of its URL: here, its own listener and instance.
	proxy := api.NewLazy(os.Getenv, logs).Handler(api.NameVaultProxy)
	if s.VaultProxyURL, err = s.serve("127.0.0.1:0", proxy); err != nil {
		return nil, err
	}
	if s.FunctionsURL, err = startFunctions(ctx, cfg, s.SimURL, s.VaultProxyURL); err != nil {
		return nil, err
	}

	s.Env = map[string]string{
		"BILLRUN_PREFLIGHT_URL":      s.FunctionsURL + "/" + api.NamePreflight,
		"BILLRUN_ISSUE_KEYS_URL":     s.FunctionsURL + "/" + api.NameIssueVaultKeys,
		"BILLRUN_CHARGE_URL":         s.FunctionsURL + "/" + api.NameCharge,
		"BILLRUN_MARK_COMPLETED_URL": s.FunctionsURL + "/" + api.NameMarkCompleted,
	}
	for k, v := range cfg.WorkflowEnv {
		s.Env[k] = v
	}
	s.Executions, err = workflow.NewExecutions(workflow.ExecutionsConfig{
		Engine:    workflow.Options{Logger: logger, Env: s.Env},
		Workflows: workflow.StaticSource(w),
		DataDir:   filepath.Join(cfg.DataDir, ExecutionsDir),
		OnEvent:   cfg.OnEvent,
	})
	if err != nil {
		return nil, fmt.Errorf("localstack: executions: %w", err)
	}
	addr := cfg.APIAddr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("localstack: executions API: %w", err)
	}
	s.APIURL = "http://" + l.Addr().String()
	api := executionsapi.New(s.Executions)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := api.Serve(ctx, l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("executions API", "error", err)
		}
	}()
	ok = true
	return s, nil
}

// serve serves h on its own listener and returns its base URL.
func (s *Stack) serve(addr string, h http.Handler) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("localstack: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	s.servers = append(s.servers, srv)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = srv.Serve(l)
	}()
	return "http://" + l.Addr().String(), nil
}

// startFunctions sets the functions' environment and starts
// functions-framework-go's server on a free port, keeping its "Serving
// function" lines off the process's standard output.
func startFunctions(ctx context.Context, cfg Config, simURL, proxyURL string) (string, error) {
	lease := cfg.Lease
	if lease == 0 {
		lease = config.DefaultLease
	}
	stripeKey := cfg.StripeKey
	if stripeKey == "" {
		stripeKey = StripeKey
	}
	if !strings.HasPrefix(stripeKey, "sk_test_") && !strings.HasPrefix(stripeKey, "rk_test_") {
		// Say what is wrong without echoing any of the value.
		return "", errors.New("localstack: the Stripe key must be a test-mode key (sk_test_… or rk_test_…)")
	}
	secret := cfg.VaultSigningSecret
	if secret == "" {
		configDir, err := os.UserConfigDir()
		if err != nil {
			return "", fmt.Errorf("localstack: vault signing secret: %w", err)
		}
		if secret, err = generatedSigningSecret(filepath.Join(configDir, SecretsDir), cfg.DataDir); err != nil {
			return "", fmt.Errorf("localstack: vault signing secret: %w", err)
		}
	}
	env := map[string]string{
		"FUNCTION_TARGET":         "", // serve every function at /<name>
		"BILLRUN_STORE":           config.StoreEmbedded,
		"BILLRUN_DATA_DIR":        cfg.DataDir,
		"STRIPE_SECRET_KEY":       stripeKey,
		"BILLRUN_STRIPE_API_BASE": simURL,
		"BILLRUN_LEASE":           lease.String(),
		"BILLRUN_LOG_FORMAT":      "text",
		"BILLRUN_LOG_LEVEL":       cfg.LogLevel.String(),
		// The vault: keys are issued and verified with the signing secret;
		// Charge pays through the proxy, the only holder of the Stripe key.
		"BILLRUN_VAULT_SIGNING_SECRET": secret,
		"BILLRUN_VAULT_PROXY_URL":      proxyURL,
		// Always set, so faults come from the stack's configuration only,
		// never from a variable left in the caller's environment.
		"BILLRUN_STORE_FAULTS": storeFaults(cfg.StoreFaults),
	}
	// The functions are configured from the process environment, as on Cloud
	// Run; check it first so a bad setting fails here, not on every request.
	if _, err := config.Load(func(k string) string { return env[k] }); err != nil {
		return "", fmt.Errorf("localstack: %w", err)
	}
	started := false
	var port string
	var startErr error
	startOnce.Do(func() {
		started = true
		for k, v := range env {
			if err := os.Setenv(k, v); err != nil {
				startErr = err
				return
			}
		}
		port, startErr = freePort()
		if startErr != nil {
			return
		}
		stdout := os.Stdout
		devnull, err := os.Open(os.DevNull)
		if err != nil {
			startErr = err
			return
		}
		os.Stdout = devnull
		errc := make(chan error, 1)
		go func() { errc <- funcframework.StartHostPort("127.0.0.1", port) }()
		startErr = waitListening(ctx, "127.0.0.1:"+port, errc)
		os.Stdout = stdout
	})
	if !started {
		return "", errors.New("localstack: the functions server already runs in this process (one stack per process)")
	}
	if startErr != nil {
		return "", fmt.Errorf("localstack: functions: %w", startErr)
	}
	return "http://127.0.0.1:" + port, nil
}

// storeFaults is BILLRUN_STORE_FAULTS for plan: "" when it has no rules.
func storeFaults(plan faultstore.Plan) string {
	if len(plan.Rules) == 0 {
		return ""
	}
	return plan.String()
}

// generatedSigningSecret returns the vault signing secret of dataDir kept in
// dir, generating a random one (0600) the first time. Two processes that
// generate one at once both end up using the one that was linked first:
// the file appears whole (written under a temporary name, then hard-linked,
// which never replaces an existing file), so no reader sees it half written.
func generatedSigningSecret(dir, dataDir string) (string, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", err
	}
	// The same directory through a symbolic link (macOS's /tmp) is the same
	// data directory.
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		abs = resolved
	}
	sum := sha256.Sum256([]byte(abs))
	path := filepath.Join(dir, hex.EncodeToString(sum[:16]))
	if b, err := os.ReadFile(path); err == nil {
		if len(b) < config.MinSigningSecretBytes {
			return "", fmt.Errorf("%s: shorter than %d bytes; remove it to generate a new one", path, config.MinSigningSecretBytes)
		}
		return string(b), nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".new-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	// CreateTemp makes the file 0600.
	if _, err := tmp.WriteString(hex.EncodeToString(raw)); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	b, err := os.ReadFile(path)
	return string(b), err
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// waitListening waits until addr accepts connections, the server fails, or 10 s.
func waitListening(ctx context.Context, addr string, errc <-chan error) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not start listening", addr)
		}
	}
}

// StartRun starts a billing execution for period ("" lets the workflow choose
// the previous month).
func (s *Stack) StartRun(period string) (*workflow.Execution, error) {
	arg := ""
	if period != "" {
		b, err := json.Marshal(map[string]string{"period": period})
		if err != nil {
			return nil, err
		}
		arg = string(b)
	}
	return s.Executions.Start(WorkflowID, arg, workflow.StartOptions{})
}

// Close stops the engine (cancelling nothing already finished), the API and
// the simulator. The functions server lives until the process ends.
func (s *Stack) Close() error {
	var errs []error
	if s.Executions != nil {
		errs = append(errs, s.Executions.Close())
	}
	s.cancel()
	for _, srv := range s.servers {
		errs = append(errs, srv.Close())
	}
	s.wg.Wait()
	if s.Sim != nil {
		errs = append(errs, s.Sim.Close())
	}
	return errors.Join(errs...)
}

// loadWorkflow loads the billing workflow from file, or the embedded production
// one when file is "".
func loadWorkflow(file string) (*workflow.Workflow, error) {
	if file == "" {
		return workflow.Load(workflows.BillingFile, workflows.Billing())
	}
	return workflow.LoadFile(file)
}
