package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWorkflowCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", `main:
  params: [args]
  steps:
    - log:
        call: sys.log
        args:
          text: ${"hi " + args.who}
    - r:
        return: ${[args.who, sys.get_env("GREETING")]}
`)
	failing := write("failing.yaml", `- boom:
    raise: {message: "no", tags: [ValueError]}
`)
	bad := write("bad.yaml", `- a:
    next: nowhere
`)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"validate ok", []string{"workflow", "validate", good}, 0, good + ": ok\n", ""},
		{"validate invalid", []string{"workflow", "validate", good, bad}, 1, good + ": ok\n",
			bad + `:2:11: next: step "nowhere" does not exist in main`},
		{"run result", []string{"workflow", "run", good, "--data", `{"who": "Ada"}`, "--env", "GREETING=hello", "--data-dir", dir}, 0,
			"[\n  \"Ada\",\n  \"hello\"\n]\n", `msg="hi Ada"`},
		{"run error map", []string{"workflow", "run", failing, "--data-dir", ""}, 1,
			"{\n  \"message\": \"no\",\n  \"tags\": [\n    \"ValueError\"\n  ]\n}\n", `failed: no in step "boom"`},
		{"run invalid", []string{"workflow", "run", bad, "--data-dir", dir}, 1, "", "does not exist"},
		{"run bad env flag", []string{"workflow", "run", good, "--env", "NOEQUALS", "--data-dir", dir}, 2, "", "want K=V"},
		{"unknown subcommand", []string{"workflow", "deploy"}, 2, "", `unknown subcommand "deploy"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(t.TempDir()) // nothing may land in the package directory
			var stdout, stderr bytes.Buffer
			env := &cliEnv{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}
			code := exitCode(env, realMain(context.Background(), env, tt.args))
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr: %s", code, tt.wantCode, stderr.String())
			}
			if stdout.String() != tt.wantStdout {
				t.Errorf("stdout %q, want %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
	// The successful run was kept in the data directory.
	kept, _ := filepath.Glob(filepath.Join(dir, "executions", "good", "*", "execution.json"))
	if len(kept) != 1 {
		t.Errorf("%d executions kept in %s, want 1", len(kept), dir)
	}
}
