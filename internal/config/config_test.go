package config

import (
	"bytes"
	"encoding/json"
	"reflect"
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
		VaultKeyTTL: 48 * time.Hour, VaultHistoryMultiple: 3, VaultBudgetMarginPercent: 110,
	}
	if !reflect.DeepEqual(c, want) {
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
		{"everything wrong at once", map[string]string{
			"BILLRUN_STORE": "postgres", "STRIPE_SECRET_KEY": "pk_live_123", "BILLRUN_STRIPE_API_BASE": "localhost:12111",
			"BILLRUN_STRIPE_TIMEOUT": "soon", "BILLRUN_LEASE": "0s", "BILLRUN_STALE_PENDING": "25h",
			"BILLRUN_MAX_BODY_BYTES": "lots", "BILLRUN_LOG_FORMAT": "xml", "BILLRUN_LOG_LEVEL": "loud",
			"BILLRUN_VAULT_SIGNING_SECRET": "short", "BILLRUN_VAULT_PROXY_URL": "http://proxy/v1",
			"BILLRUN_VAULT_PROXY_ID_TOKEN": "maybe", "BILLRUN_VAULT_KEY_TTL": "1s", "BILLRUN_VAULT_HISTORY_MULTIPLE": "0",
			"BILLRUN_VAULT_DEFAULT_CAPS": "usd:5", "BILLRUN_VAULT_BUDGET_MARGIN_PERCENT": "90",
			"BILLRUN_STRIPE_SECRET_NAME": "stripe-key",
		}, []string{
			`BILLRUN_STORE="postgres"`, "not a secret or restricted key", "BILLRUN_STRIPE_API_BASE", `BILLRUN_STRIPE_TIMEOUT="soon"`,
			"BILLRUN_LEASE=0s", "BILLRUN_STALE_PENDING=25h0m0s", `BILLRUN_MAX_BODY_BYTES="lots"`, `BILLRUN_LOG_FORMAT="xml"`,
			`BILLRUN_LOG_LEVEL="loud"`, "BILLRUN_VAULT_SIGNING_SECRET: at least 32 bytes", `BILLRUN_VAULT_PROXY_URL="http://proxy/v1"`,
			`BILLRUN_VAULT_PROXY_ID_TOKEN="maybe"`, "BILLRUN_VAULT_KEY_TTL=1s", "BILLRUN_VAULT_HISTORY_MULTIPLE=0",
			`BILLRUN_VAULT_DEFAULT_CAPS="usd:5"`, "BILLRUN_VAULT_BUDGET_MARGIN_PERCENT=90", `BILLRUN_STRIPE_SECRET_NAME="stripe-key"`,
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

// TestRequire: each function's own needs are checked on their own, so Charge
// runs without any Stripe secret and VaultProxy refuses to run without one.
func TestRequire(t *testing.T) {
	secret := strings.Repeat("s", 32)
	tests := []struct {
		name string
		env  map[string]string
		need Requirement
		want []string // fragments; none means no error
	}{
		{"preflight needs nothing more", map[string]string{}, 0, nil},
		{"charge without a Stripe secret", map[string]string{"BILLRUN_VAULT_SIGNING_SECRET": secret, "BILLRUN_VAULT_PROXY_URL": "http://127.0.0.1:9"},
			NeedsSigningSecret | NeedsProxyURL, nil},
		{"charge without the vault", map[string]string{"STRIPE_SECRET_KEY": "sk_test_x"}, NeedsSigningSecret | NeedsProxyURL,
			[]string{"BILLRUN_VAULT_SIGNING_SECRET: required", "BILLRUN_VAULT_PROXY_URL: required"}},
		{"proxy without a Stripe secret", map[string]string{"BILLRUN_VAULT_SIGNING_SECRET": secret}, NeedsSigningSecret | NeedsStripeSecret,
			[]string{"STRIPE_SECRET_KEY (or BILLRUN_STRIPE_SECRET_NAME): required"}},
		{"proxy with Secret Manager", map[string]string{"BILLRUN_VAULT_SIGNING_SECRET": secret,
			"BILLRUN_STRIPE_SECRET_NAME": "projects/p/secrets/stripe/versions/latest"}, NeedsSigningSecret | NeedsStripeSecret, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			err = c.Require(tc.need)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v lacks %q", err, w)
				}
			}
		})
	}
	c, err := Load(env(map[string]string{"BILLRUN_VAULT_DEFAULT_CAPS": "usd=50000, eur=40000", "BILLRUN_VAULT_PROXY_ID_TOKEN": "true"}))
	if err != nil || !reflect.DeepEqual(c.VaultDefaultCaps, map[string]int64{"usd": 50000, "eur": 40000}) || !c.VaultProxyIDToken {
		t.Errorf("caps %v, id token %v, %v", c.VaultDefaultCaps, c.VaultProxyIDToken, err)
	}
}

// TestStoreFaults: a store fault plan is read and checked with faultstore's
// parser, and refused on any store but the embedded one.
func TestStoreFaults(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string // a fragment of the error; "" means none
	}{
		{"embedded with faults", map[string]string{"BILLRUN_STORE_FAULTS": "seed=7,commit_fail=charges:0.2,commit_lost=runs@2"}, ""},
		{"unknown kind", map[string]string{"BILLRUN_STORE_FAULTS": "write_fail=charges"},
			`BILLRUN_STORE_FAULTS="write_fail=charges": faultstore: parse "write_fail=charges": unknown kind`},
		{"bad probability", map[string]string{"BILLRUN_STORE_FAULTS": "commit_fail=charges:2"}, `probability "2" is not in (0, 1]`},
		{"never against firestore", map[string]string{"BILLRUN_STORE": "firestore", "BILLRUN_GCP_PROJECT": "p",
			"BILLRUN_STORE_FAULTS": "commit_fail=charges"}, `BILLRUN_STORE_FAULTS: fault injection needs the embedded store, not "firestore"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(env(tc.env))
			if tc.want == "" {
				if err != nil || c.StoreFaults != tc.env["BILLRUN_STORE_FAULTS"] {
					t.Fatalf("store faults %q, %v", c.StoreFaults, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v lacks %q", err, tc.want)
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
	c, err := Load(env(map[string]string{"STRIPE_SECRET_KEY": "sk_test_supersecret", "BILLRUN_VAULT_SIGNING_SECRET": "supersecret signing secret of 32 bytes"}))
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
