package executionsapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	executions "cloud.google.com/go/workflows/executions/apiv1"
	executionspb "cloud.google.com/go/workflows/executions/apiv1/executionspb"
	"google.golang.org/api/option"
	workflowexecutions "google.golang.org/api/workflowexecutions/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"billrun.dev/billrun/internal/workflow"
)

// startServer serves the Executions API for testdata/ on a local port.
func startServer(t *testing.T) (addr string, svc *workflow.Executions) {
	t.Helper()
	svc, err := workflow.NewExecutions(workflow.ExecutionsConfig{
		Engine:    workflow.Options{Logger: slog.New(slog.DiscardHandler), Project: "billrun-local", Location: "local"},
		Workflows: workflow.DirSource("testdata"),
		DataDir:   t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(svc).Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		svc.Close()
	})
	return l.Addr().String(), svc
}

const greetParent = "projects/billrun-local/locations/local/workflows/greet"

// TestGoClient drives a local execution with Google's Go client.
func TestGoClient(t *testing.T) {
	addr, _ := startServer(t)
	ctx := context.Background()
	c, err := executions.NewClient(ctx,
		option.WithEndpoint(addr),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	x, err := c.CreateExecution(ctx, &executionspb.CreateExecutionRequest{
		Parent: greetParent, Execution: &executionspb.Execution{Argument: `{"name": "Ada"}`},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(x.GetName(), greetParent+"/executions/") {
		t.Fatalf("name %q", x.GetName())
	}
	got := waitDone(t, c, x.GetName())
	if got.GetState() != executionspb.Execution_SUCCEEDED || got.GetResult() != `"Hello Ada"` {
		t.Errorf("execution: %v", got)
	}

	failed, err := c.CreateExecution(ctx, &executionspb.CreateExecutionRequest{
		Parent: greetParent, Execution: &executionspb.Execution{Argument: `{"name": ""}`},
	})
	if err != nil {
		t.Fatal(err)
	}
	f := waitDone(t, c, failed.GetName())
	if f.GetState() != executionspb.Execution_FAILED ||
		f.GetError().GetPayload() != `{"message":"empty name","tags":["ValueError"]}` ||
		f.GetError().GetContext() != "empty name\nin step \"check\", routine \"main\", line: 8" ||
		f.GetError().GetStackTrace().GetElements()[0].GetPosition().GetColumn() != 7 {
		t.Errorf("failed execution: %v", f)
	}

	it := c.ListExecutions(ctx, &executionspb.ListExecutionsRequest{Parent: greetParent, PageSize: 1})
	var names []string
	for {
		e, err := it.Next()
		if err != nil {
			break
		}
		names = append(names, e.GetName())
	}
	if len(names) != 2 || names[0] != failed.GetName() {
		t.Errorf("list (newest first, pages of 1): %v", names)
	}

	sleeper, err := c.CreateExecution(ctx, &executionspb.CreateExecutionRequest{
		Parent: "projects/billrun-local/locations/local/workflows/sleeper", Execution: &executionspb.Execution{},
	})
	if err != nil {
		t.Fatal(err)
	}
	cancelled, err := c.CancelExecution(ctx, &executionspb.CancelExecutionRequest{Name: sleeper.GetName()})
	if err != nil || cancelled.GetState() != executionspb.Execution_CANCELLED {
		t.Errorf("cancel: %v, %v", cancelled, err)
	}

	_, err = c.GetExecution(ctx, &executionspb.GetExecutionRequest{Name: greetParent + "/executions/nope"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("get unknown: %v, want NotFound", err)
	}
}

func waitDone(t *testing.T, c *executions.Client, name string) *executionspb.Execution {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		x, err := c.GetExecution(context.Background(), &executionspb.GetExecutionRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if x.GetState() != executionspb.Execution_ACTIVE {
			return x
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("execution %s still active", name)
	return nil
}

// TestREST checks the JSON of the REST API, step entries and errors.
func TestREST(t *testing.T) {
	addr, svc := startServer(t)
	base := "http://" + addr + "/v1/" + greetParent + "/executions"
	var created struct {
		Name  string `json:"name"`
		State string `json:"state"`
	}
	post(t, base, `{"argument": "{\"name\": \"Ada\"}"}`, http.StatusOK, &created)
	id := created.Name[strings.LastIndex(created.Name, "/")+1:]
	if _, err := svc.Wait(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	get(t, base+"/"+id, http.StatusOK, &got)
	if got["state"] != "SUCCEEDED" || got["result"] != `"Hello Ada"` || got["argument"] != `{"name": "Ada"}` {
		t.Errorf("get: %v", got)
	}
	if st, _ := json.Marshal(got["status"]); string(st) != `{"currentSteps":[{"routine":"main","step":"greet"}]}` {
		t.Errorf("status %s", st)
	}
	var steps struct {
		StepEntries []map[string]any `json:"stepEntries"`
	}
	get(t, base+"/"+id+"/stepEntries", http.StatusOK, &steps)
	var seq []string
	for _, e := range steps.StepEntries {
		seq = append(seq, e["step"].(string)+":"+e["stepType"].(string)+":"+e["state"].(string))
	}
	want := "log:STEP_STD_LIB_CALL:STATE_SUCCEEDED check:STEP_SWITCH:STATE_SUCCEEDED greet:STEP_RETURN:STATE_SUCCEEDED"
	if strings.Join(seq, " ") != want {
		t.Errorf("step entries %v, want %s", seq, want)
	}
	var e struct {
		Error struct {
			Code   int    `json:"code"`
			Status string `json:"status"`
		} `json:"error"`
	}
	get(t, "http://"+addr+"/v1/projects/p/locations/l/workflows/nope/executions/x", http.StatusNotFound, &e)
	if e.Error.Status != "NOT_FOUND" || e.Error.Code != 404 {
		t.Errorf("error JSON %+v", e)
	}
	post(t, "http://"+addr+"/v1/projects/p/locations/l/workflows/nope/executions", `{}`, http.StatusNotFound, &e)
	post(t, base, `{"argument": "{"}`, http.StatusBadRequest, &e)
	if e.Error.Status != "INVALID_ARGUMENT" {
		t.Errorf("bad argument: %+v", e)
	}
}

func post(t *testing.T, url, body string, wantCode int, out any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	decode(t, resp, wantCode, out)
}

func get(t *testing.T, url string, wantCode int, out any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	decode(t, resp, wantCode, out)
}

func decode(t *testing.T, resp *http.Response, wantCode int, out any) {
	t.Helper()
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantCode {
		t.Fatalf("%s %s: status %d, want %d: %s", resp.Request.Method, resp.Request.URL, resp.StatusCode, wantCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}

// TestGcloudWorkflowsRun runs `gcloud workflows run` against the local API.
func TestGcloudWorkflowsRun(t *testing.T) {
	gcloud, err := exec.LookPath("gcloud")
	if err != nil {
		t.Skip("gcloud is not installed: skipping the gcloud workflows run test")
	}
	if testing.Short() {
		t.Skip("gcloud starts slowly: skipped in -short mode")
	}
	addr, _ := startServer(t)
	cfg := t.TempDir()
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, gcloud, args...)
		cmd.Env = append(os.Environ(), "CLOUDSDK_CONFIG="+cfg, "CLOUDSDK_CORE_DISABLE_PROMPTS=1")
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = errors.New(string(ee.Stderr))
		}
		return string(out), err
	}
	for _, kv := range [][2]string{
		{"core/project", "billrun-local"},
		{"auth/disable_credentials", "true"},
		{"api_endpoint_overrides/workflowexecutions", "http://" + addr + "/"},
	} {
		if _, err := run("config", "set", kv[0], kv[1]); err != nil {
			t.Fatalf("gcloud config set %s: %v", kv[0], err)
		}
	}
	out, err := run("workflows", "run", "greet", "--location=local", `--data={"name": "gcloud"}`, "--format=json")
	if err != nil {
		t.Fatalf("gcloud workflows run: %v", err)
	}
	var x map[string]any
	if err := json.Unmarshal([]byte(out), &x); err != nil {
		t.Fatalf("gcloud output %q: %v", out, err)
	}
	if x["state"] != "SUCCEEDED" || x["result"] != `"Hello gcloud"` {
		t.Errorf("gcloud workflows run: %v", x)
	}
}

// TestGoRESTClient drives the REST API with Google's discovery-based Go
// client (google.golang.org/api/workflowexecutions/v1), including step entries.
func TestGoRESTClient(t *testing.T) {
	addr, _ := startServer(t)
	ctx := context.Background()
	svc, err := workflowexecutions.NewService(ctx, option.WithEndpoint("http://"+addr+"/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	ex := svc.Projects.Locations.Workflows.Executions
	x, err := ex.Create(greetParent, &workflowexecutions.Execution{Argument: `{"name": "REST"}`}).Do()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for x.State == "ACTIVE" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		if x, err = ex.Get(x.Name).Do(); err != nil {
			t.Fatal(err)
		}
	}
	if x.State != "SUCCEEDED" || x.Result != `"Hello REST"` {
		t.Fatalf("execution %+v", x)
	}
	list, err := ex.List(greetParent).Do()
	if err != nil || len(list.Executions) != 1 || list.Executions[0].Name != x.Name {
		t.Errorf("list: %+v, %v", list, err)
	}
	steps, err := ex.StepEntries.List(x.Name).Do()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range steps.StepEntries {
		names = append(names, e.Step+":"+e.StepType+":"+e.State)
	}
	if got := strings.Join(names, " "); got != "log:STEP_STD_LIB_CALL:STATE_SUCCEEDED check:STEP_SWITCH:STATE_SUCCEEDED greet:STEP_RETURN:STATE_SUCCEEDED" {
		t.Errorf("step entries: %s", got)
	}
	if _, err := ex.Get(greetParent + "/executions/nope").Do(); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("get unknown: %v, want a 404", err)
	}
}
