package main

import (
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite generated files from their sources")

// faultsHelpIntro precedes the documentation copied from the packages.
const faultsHelpIntro = `billrun --faults SPEC injects faults (local only: demo, run, serve) into the
Stripe simulator and into the store the functions use. One SPEC mixes both:
items named commit_fail, commit_lost, read_fail or seed go to the store, all
others to the simulator. --seed makes the draws reproducible: the same SPEC
and seed fail the same requests and the same writes (a seed=N in SPEC seeds
the store's faults instead). Customers are set up with every fault off.
Examples:

  billrun demo --faults drop-after=0.02,gateway-503=0.05,lock-timeout=0.05,first=1
  billrun demo --faults rate=25,concurrency=10
  billrun run --faults latency=exp:5ms:40ms,slow-commit=0.05:3s --lease 30s
  billrun demo --faults commit_fail=charges:0.2,commit_lost=charges:0.1,500-after=0.02

`

// faultsHelpSources are the documentation faults_help.txt copies, in order:
// a heading, then go doc of each symbol ("" is the package's own doc).
var faultsHelpSources = []struct {
	heading, pkg string
	symbols      []string
}{
	{"The simulator's grammar and faults, from its documentation\n(go doc ./internal/stripesim ParseFaults and Faults):\n\n",
		"billrun.dev/billrun/internal/stripesim", []string{"ParseFaults", "Faults", "Latency"}},
	{"The store's faults, from its documentation (go doc ./internal/store/faultstore):\n\n",
		"billrun.dev/billrun/internal/store/faultstore", []string{""}},
}

// TestHelpFaultsMatchesTheDocs keeps faults_help.txt equal to the simulator's
// and the store fault injector's doc comments; -update rewrites it.
func TestHelpFaultsMatchesTheDocs(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go not in PATH")
	}
	var b strings.Builder
	b.WriteString(faultsHelpIntro)
	for _, src := range faultsHelpSources {
		b.WriteString(src.heading)
		for _, sym := range src.symbols {
			b.WriteString(goDoc(t, src.pkg, sym) + "\n")
		}
	}
	want := b.String()
	if *update {
		if err := os.WriteFile("faults_help.txt", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if faultsHelp != want {
		t.Fatal("faults_help.txt differs from the packages' documentation: run go generate ./cmd/billrun")
	}
}

// goDoc is go doc's text for pkg's symbol sym, or for the package when sym
// is "", without the "package …" line.
func goDoc(t *testing.T, pkg, sym string) string {
	t.Helper()
	args := []string{"doc", pkg}
	if sym != "" {
		args = append(args, sym)
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	// Drop the "package …" line and the blank after it.
	text := string(out)
	if _, rest, ok := strings.Cut(text, "\n\n"); ok && strings.HasPrefix(text, "package ") {
		text = rest
	}
	if sym == "" {
		// A package's doc is followed by a blank line and the compact list
		// of its exported names, which the help leaves out.
		if i := strings.LastIndex(text, "\n\n"); i >= 0 {
			text = text[:i+1]
		}
	}
	return text
}
