package config

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestLoadDefaults(t *testing.T) {
	c, err := Load(env(map[string]string{"STRIPE_SECRET_KEY": "sk_test_abc\n"}))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Store: StoreEmbedded, DataDir: ".billrun", Database: "(default)", StripeKey: "sk_test_abc",
		StripeTimeout: 30 * time.Second, Lease: 10 * time.Minute, StalePending: 23 * time.Hour,
		MaxBodyBytes: 65536, LogFormat: "json",
	}
	if c != want {
		t.Errorf("got %+v\nwant %+v", c, want)
	}
	if got := c.EmbeddedPath(); got != ".billrun/billrun.db" {
		t.Errorf("embedded path %q", got)
	}
}

func TestLoadProblems(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		// want lists fragments; every one must appear in the one error.
		want []string
	}{
		{"nothing set", map[string]string{}, []string{"STRIPE_SECRET_KEY: required"}},
		{"everything wrong at once", map[string]string{
			"BILLRUN_STORE": "postgres", "STRIPE_SECRET_KEY": "pk_live_123", "BILLRUN_STRIPE_API_BASE": "localhost:12111",
			"BILLRUN_STRIPE_TIMEOUT": "soon", "BILLRUN_LEASE": "0s", "BILLRUN_STALE_PENDING": "25h",
			"BILLRUN_MAX_BODY_BYTES": "lots", "BILLRUN_LOG_FORMAT": "xml", "BILLRUN_LOG_LEVEL": "loud",
		}, []string{
			`BILLRUN_STORE="postgres"`, "not a secret or restricted key", "BILLRUN_STRIPE_API_BASE", `BILLRUN_STRIPE_TIMEOUT="soon"`,
			"BILLRUN_LEASE=0s", "BILLRUN_STALE_PENDING=25h0m0s", `BILLRUN_MAX_BODY_BYTES="lots"`, `BILLRUN_LOG_FORMAT="xml"`,
			`BILLRUN_LOG_LEVEL="loud"`,
		}},
		{"firestore needs a project", map[string]string{"BILLRUN_STORE": "firestore", "STRIPE_SECRET_KEY": "sk_test_x"},
			[]string{"GOOGLE_CLOUD_PROJECT"}},
		{"body limit out of range", map[string]string{"STRIPE_SECRET_KEY": "sk_test_x", "BILLRUN_MAX_BODY_BYTES": "10"},
			[]string{"BILLRUN_MAX_BODY_BYTES=10"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(env(tc.env))
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "pk_live_123") {
				t.Errorf("error echoes the key: %v", err)
			}
		})
	}
}

func TestFirestoreFromGoogleCloudProject(t *testing.T) {
	c, err := Load(env(map[string]string{"BILLRUN_STORE": "firestore", "GOOGLE_CLOUD_PROJECT": "p1", "STRIPE_SECRET_KEY": "rk_live_x"}))
	if err != nil || c.Project != "p1" {
		t.Fatalf("project %q, %v", c.Project, err)
	}
}

func TestKeyNeverRendered(t *testing.T) {
	c, err := Load(env(map[string]string{"STRIPE_SECRET_KEY": "sk_test_supersecret"}))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	c.Logger(&buf).Info("config", "config", c)
	for _, s := range []string{c.String(), buf.String()} {
		if strings.Contains(s, "supersecret") {
			t.Errorf("key rendered: %s", s)
		}
	}
}

func TestLoggerSeverity(t *testing.T) {
	c := Config{LogFormat: "json"}
	var buf bytes.Buffer
	log := c.Logger(&buf)
	log.Warn("careful", "customer", "c1")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if line["severity"] != "WARNING" || line["message"] != "careful" || line["customer"] != "c1" {
		t.Errorf("log line %v", line)
	}
}
