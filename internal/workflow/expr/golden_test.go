package expr_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"billrun.dev/billrun/internal/workflow/expr"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestSyntaxErrorsGolden parses each line of testdata/syntax_errors.txt and
// compares the located errors with testdata/syntax_errors.golden.
func TestSyntaxErrorsGolden(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "syntax_errors.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, line := range strings.Split(strings.TrimRight(string(in), "\n"), "\n") {
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		_, err := expr.Parse(line)
		var se *expr.SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q) = %v, want a *SyntaxError", line, err)
			continue
		}
		out.WriteString(line + "\n" + strings.Repeat(" ", se.Offset) + "^ " + se.Msg + "\n\n")
	}
	golden := filepath.Join("testdata", "syntax_errors.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestSyntaxErrorsGolden -update to create it)", err)
	}
	if out.String() != string(want) {
		t.Errorf("syntax errors differ from %s (rerun with -update and review the diff):\n%s", golden, out.String())
	}
}
