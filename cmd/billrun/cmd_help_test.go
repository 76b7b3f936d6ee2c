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
const faultsHelpIntro = `billrun --faults SPEC turns on the Stripe simulator's fault injection (local
only: demo, run, serve). --seed makes the draws reproducible: the same SPEC and
seed fail the same requests. Examples:

  billrun demo --faults drop-after=0.02,gateway-503=0.05,lock-timeout=0.05,first=1
  billrun demo --faults rate=25,concurrency=10
  billrun run --faults latency=exp:5ms:40ms,slow-commit=0.05:3s --lease 30s

The grammar and every fault, from the simulator's documentation
(go doc ./internal/stripesim ParseFaults and Faults):

`

// TestHelpFaultsMatchesTheDocs keeps faults_help.txt equal to the simulator's
// doc comments; -update rewrites it.
func TestHelpFaultsMatchesTheDocs(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go not in PATH")
	}
	var b strings.Builder
	b.WriteString(faultsHelpIntro)
	for _, sym := range []string{"ParseFaults", "Faults", "Latency"} {
		out, err := exec.Command("go", "doc", "billrun.dev/billrun/internal/stripesim", sym).Output()
		if err != nil {
			t.Fatalf("go doc %s: %v", sym, err)
		}
		// Drop the "package …" line and the blank after it.
		text := string(out)
		if _, rest, ok := strings.Cut(text, "\n\n"); ok && strings.HasPrefix(text, "package ") {
			text = rest
		}
		b.WriteString(text + "\n")
	}
	want := b.String()
	if *update {
		if err := os.WriteFile("faults_help.txt", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if faultsHelp != want {
		t.Fatal("faults_help.txt differs from the simulator's documentation: run go generate ./cmd/billrun")
	}
}
