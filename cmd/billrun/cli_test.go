package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReportFormats compares each report format with its golden file
// (go test -update rewrites them).
func TestReportFormats(t *testing.T) {
	rows := []reportRow{
		{Customer: "cus_00001", Outcome: "succeeded", Amount: 123456, Currency: "usd", Attempts: 1, Payment: "pi_1"},
		{Customer: "cus_00002", Outcome: "declined", Amount: 500, Currency: "usd", Attempts: 1, Reason: "insufficient_funds: Your card has insufficient funds."},
		{Customer: "cus_00003", Outcome: "pending", Amount: 9900, Currency: "eur", Attempts: 3},
	}
	for _, format := range []string{"table", "csv", "json"} {
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeReport(&b, format, rows); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "report."+format+".golden")
			if *update {
				if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if b.String() != string(want) {
				t.Errorf("got\n%s\nwant\n%s", b.String(), want)
			}
		})
	}
}

func TestMoney(t *testing.T) {
	for minor, want := range map[int64]string{0: "0.00", 5: "0.05", 123456: "1,234.56", 100000000: "1,000,000.00", -2550: "-25.50"} {
		if got := money(minor); got != want {
			t.Errorf("money(%d) = %q, want %q", minor, got, want)
		}
	}
}

// TestUsageErrors: bad flags and arguments exit 2 with a message saying
// what is wrong, before anything is opened.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown command", []string{"bill"}, `unknown command "bill"`},
		{"unknown flag", []string{"status", "--bogus"}, "flag provided but not defined: -bogus"},
		{"bad period", []string{"run", "--period", "2026-13"}, "--period"},
		{"report without period", []string{"report"}, "--period is required"},
		{"report format", []string{"report", "--period", "2026-10", "--format", "xml"}, `--format "xml"`},
		{"audit extra argument", []string{"audit", "--period", "2026-10", "now"}, `unexpected argument "now"`},
		{"demo customers", []string{"demo", "--customers", "0"}, "--customers must be at least 1"},
		{"customers subcommand", []string{"customers", "delete"}, `unknown subcommand "delete"`},
		{"seed count", []string{"customers", "seed"}, "--count must be at least 1"},
		{"help topic", []string{"help", "nothing"}, `no command "nothing"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			env := &cliEnv{stdout: &out, stderr: &errb, getenv: noEnv}
			args := tt.args
			if args[0] != "help" {
				args = append(args, "--data-dir", t.TempDir())
			}
			err := realMain(t.Context(), env, args)
			if code := exitCode(env, err); code != 2 {
				t.Fatalf("exit %d (%v), want 2", code, err)
			}
			if !strings.Contains(errb.String(), tt.want) {
				t.Errorf("stderr %q lacks %q", errb.String(), tt.want)
			}
		})
	}
}

func TestResolvePeriod(t *testing.T) {
	now := time.Date(2026, 2, 1, 1, 0, 0, 0, time.FixedZone("UTC+2", 2*3600)) // still 2026-01-31 in UTC
	tests := []struct {
		name, in, zone, want string
		wantErr              bool
	}{
		{name: "default is the previous month in UTC", in: "", want: "2025-12"},
		{name: "default follows the workflow's time zone", in: "", zone: "Europe/Athens", want: "2026-01"},
		{name: "a zone already in the next month", in: "", zone: "Pacific/Kiritimati", want: "2026-01"},
		{name: "a zone still in the previous month", in: "", zone: "America/Los_Angeles", want: "2025-12"},
		{name: "unknown zone", in: "", zone: "Mars/Olympus", wantErr: true},
		{name: "explicit", in: "2025-11", want: "2025-11"},
		{name: "bad month", in: "2025-13", wantErr: true},
		{name: "beyond next month", in: "2026-03", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolvePeriod(tt.in, now, tt.zone)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("resolvePeriod(%q) = %q, %v; want %q (error %t)", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestLocalStripeKey: the local stack takes the user's STRIPE_SECRET_KEY only
// when it is a test-mode key; a live one never reaches the simulator.
func TestLocalStripeKey(t *testing.T) {
	tests := []struct{ name, env, want string }{
		{name: "unset", env: "", want: ""},
		{name: "secret test key", env: "sk_test_mine", want: "sk_test_mine"},
		{name: "restricted test key, mounted with a newline", env: "rk_test_mine\n", want: "rk_test_mine"},
		{name: "live key", env: "sk_live_mine", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "STRIPE_SECRET_KEY" {
					return tt.env
				}
				return ""
			}
			if got := localStripeKey(getenv); got != tt.want {
				t.Errorf("localStripeKey with %q = %q, want %q", tt.env, got, tt.want)
			}
		})
	}
}
