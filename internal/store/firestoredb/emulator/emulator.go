// Package emulator runs Google's Firestore emulator for tests. A test binary
// shares at most one emulator (Pool), started on first use in its own process
// group and killed with its whole group at the end; every test gets its own
// emulator project, so tests and test binaries sharing an emulator never see
// each other's documents.
//
// In a package's tests:
//
//	var emulators emulator.Pool
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		emulators.Close()
//		os.Exit(code)
//	}
//
//	func TestSomething(t *testing.T) {
//		db := emulators.Get(t).NewDB(t) // a store.Backend on an empty project
//		…
//	}
//
// When FIRESTORE_EMULATOR_HOST is set, that emulator is used and none is
// started. When the emulator cannot run (gcloud or java missing, or it does
// not start), tests skip with the reason, or fail when BILLRUN_REQUIRE_EMULATORS
// is 1, as `make test` sets it.
package emulator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"billrun.dev/billrun/internal/store/firestoredb"
)

const (
	// EnvHost names a running emulator to use instead of starting one.
	EnvHost = "FIRESTORE_EMULATOR_HOST"
	// EnvRequire, set to 1, turns "emulator unavailable" from a skip into a
	// test failure, so CI cannot pass without having run the Firestore tests.
	EnvRequire = "BILLRUN_REQUIRE_EMULATORS"
	// startTimeout bounds the wait for the port to answer; the emulator takes
	// about 4 s on an idle 2-core machine, much longer when tests run beside it.
	startTimeout = 90 * time.Second
	// stopTimeout bounds the wait for the watchdog shell to kill the emulator.
	stopTimeout = 10 * time.Second
	// outputLimit is how much of the emulator's output is kept for error messages.
	outputLimit = 16 << 10
)

// Emulator is a Firestore emulator: one this process started, or the one
// named by FIRESTORE_EMULATOR_HOST.
type Emulator struct {
	host string
	cmd  *exec.Cmd // nil when reusing an emulator started elsewhere
	done chan struct{}
	out  *limitedBuffer
	// projects numbers the projects handed out, so each NewDB gets an empty one.
	projects atomic.Int64
}

// Start starts an emulator on a free port and waits until it answers, or
// connects to the one named by FIRESTORE_EMULATOR_HOST.
func Start(ctx context.Context) (*Emulator, error) {
	if host := os.Getenv(EnvHost); host != "" {
		e := &Emulator{host: host}
		if err := e.waitReady(ctx, 10*time.Second); err != nil {
			return nil, fmt.Errorf("emulator: %s=%s: %w", EnvHost, host, err)
		}
		return e, nil
	}
	for _, bin := range []string{"gcloud", "java"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("emulator: %s is not installed (the Firestore emulator needs gcloud with the cloud-firestore-emulator component, and Java): %w", bin, err)
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("emulator: %w", err)
	}
	e := &Emulator{host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), done: make(chan struct{}), out: &limitedBuffer{limit: outputLimit}}
	// A shell runs the emulator and watches this process: if the test binary
	// dies without calling Stop (a panic, a test timeout, SIGKILL), the shell
	// kills the emulator, and Stop asks it to with SIGTERM. gcloud moves itself
	// into a new process group, so the shell kills that group (gcloud, its
	// wrapper script and Java) as well as its own, which holds gcloud until it
	// has moved.
	script := `gcloud emulators firestore start --host-port="$1" &
g=$!
stop() { kill -KILL "-$g" 2>/dev/null; kill -KILL 0; }
trap stop TERM
while kill -0 "$2" 2>/dev/null; do sleep 1; done
stop`
	e.cmd = exec.Command("sh", "-c", script, "sh", e.host, strconv.Itoa(os.Getpid()))
	e.cmd.Stdout, e.cmd.Stderr = e.out, e.out
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Wait must not hang on the output pipe if some process kept it open.
	e.cmd.WaitDelay = 5 * time.Second
	if err := e.cmd.Start(); err != nil {
		return nil, fmt.Errorf("emulator: start gcloud: %w", err)
	}
	go func() {
		e.cmd.Wait()
		close(e.done)
	}()
	if err := e.waitReady(ctx, startTimeout); err != nil {
		e.Stop()
		return nil, fmt.Errorf("emulator: %w; its output:\n%s", err, e.out.String())
	}
	return e, nil
}

// Host is the emulator's host:port.
func (e *Emulator) Host() string { return e.host }

// Stop kills the emulator's process groups (gcloud, its wrapper script and
// Java) and waits for them to go. It does nothing for an emulator this process
// did not start.
func (e *Emulator) Stop() error {
	if e.cmd == nil {
		return nil
	}
	// The shell handles SIGTERM after its current `sleep 1`.
	e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.done:
		return nil
	case <-time.After(stopTimeout):
	}
	// The shell did not answer: kill its group, which at least ends the
	// watchdog and releases Wait.
	err := syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
	<-e.done
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("emulator: stop: %w", err)
	}
	return fmt.Errorf("emulator: stop: the watchdog shell ignored SIGTERM for %v; Java may be left running", stopTimeout)
}

func (e *Emulator) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.host+"/", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no answer on %s after %v", e.host, timeout)
		case <-e.done: // nil channel when reusing: never ready
			return fmt.Errorf("the emulator exited before answering on %s", e.host)
		case <-tick.C:
		}
	}
}

// Reset deletes every document of a project.
func (e *Emulator) Reset(ctx context.Context, projectID string) error {
	url := fmt.Sprintf("http://%s/emulator/v1/projects/%s/databases/(default)/documents", e.host, projectID)
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, url, nil)
	if err != nil {
		return fmt.Errorf("emulator: reset %s: %w", projectID, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("emulator: reset %s: %w", projectID, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("emulator: reset %s: HTTP %s", projectID, resp.Status)
	}
	return nil
}

// Client connects a Firestore client for projectID to the emulator, without
// touching the process environment.
func (e *Emulator) Client(ctx context.Context, projectID string) (*firestore.Client, error) {
	conn, err := grpc.NewClient(e.host,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(ownerCreds{}))
	if err != nil {
		return nil, fmt.Errorf("emulator: dial %s: %w", e.host, err)
	}
	client, err := firestore.NewClient(ctx, projectID, option.WithGRPCConn(conn))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("emulator: client: %w", err)
	}
	return client, nil
}

// ownerCreds presents the emulator's admin token, as the Firestore client
// does when FIRESTORE_EMULATOR_HOST is set.
type ownerCreds struct{}

func (ownerCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer owner"}, nil
}

func (ownerCreds) RequireTransportSecurity() bool { return false }

// NewProject returns a project id no other test of this process has used.
// Projects are namespaces in the emulator: a new one is empty.
func (e *Emulator) NewProject() string {
	return fmt.Sprintf("billrun-test-%d-%d", os.Getpid(), e.projects.Add(1))
}

// NewDB returns a Firestore backend on a new, empty project; the backend is
// closed and the project's documents deleted when the test ends.
func (e *Emulator) NewDB(t testing.TB) *firestoredb.DB {
	t.Helper()
	project := e.NewProject()
	client, err := e.Client(t.Context(), project)
	if err != nil {
		t.Fatal(err)
	}
	db := firestoredb.NewFromClient(client)
	t.Cleanup(func() {
		db.Close()
		if err := e.Reset(context.Background(), project); err != nil {
			t.Errorf("%v", err)
		}
	})
	return db
}

// Pool shares one emulator among the tests of a test binary, starting it on
// first use. Its zero value is ready; call Close from TestMain after m.Run.
type Pool struct {
	mu      sync.Mutex
	started bool
	emu     *Emulator
	err     error
}

// Get returns the shared emulator, starting it if needed. If it cannot run,
// Get skips the test, or fails it when BILLRUN_REQUIRE_EMULATORS=1.
func (p *Pool) Get(t testing.TB) *Emulator {
	t.Helper()
	p.mu.Lock()
	if !p.started {
		p.started = true
		p.emu, p.err = Start(context.Background())
	}
	emu, err := p.emu, p.err
	p.mu.Unlock()
	if err != nil {
		unavailable(t, err)
	}
	return emu
}

// unavailable skips the test because the emulator cannot run, or fails it
// when BILLRUN_REQUIRE_EMULATORS=1.
func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("Firestore emulator required (%s=1) but unavailable: %v", EnvRequire, err)
	}
	t.Skipf("Firestore emulator unavailable, skipping (set %s=1 to make this a failure): %v", EnvRequire, err)
}

// Close stops the emulator if Get started one.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.emu == nil {
		return nil
	}
	return p.emu.Stop()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// limitedBuffer keeps the first limit bytes written to it; the emulator's
// output is only needed to explain a failed start.
type limitedBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	limit int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.limit - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
