package api_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"billrun.dev/billrun/internal/api"
	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/config"
	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/store/embedded"
	"billrun.dev/billrun/internal/store/firestoredb"
	"billrun.dev/billrun/internal/store/firestoredb/emulator"
	"billrun.dev/billrun/internal/stripesim"
	"billrun.dev/billrun/internal/vault"
)

// TestF2_AmountsInflatedTenfold: a period is billed normally, then a data bug
// multiplies every fourth customer's amount by ten. Caps come from the
// customer's ceiling, its payments of the period before, or the default for
// its currency, never from the amount: the inflated customers are held for
// review with the reason before anything reaches Stripe, the others are
// charged, and no payment exceeds its key's cap.
func TestF2_AmountsInflatedTenfold(t *testing.T) {
	sizes := map[string]int{"embedded": 500, "firestore": 30}
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			n := sizes[bc.name]
			b := bc.open(t)
			e := newEnv(t, b, envOptions{vault: vault.IssuerConfig{DefaultCaps: map[string]int64{"usd": 5000}}})
			// A third of the customers have a ceiling, a third a history, and
			// a third joined in October (the default cap).
			cs := visa(n)
			var old, joined []cust
			for i := range cs {
				cs[i].amount = 1000 + int64(i%500)
				switch i % 3 {
				case 0:
					cs[i].ceiling = 2 * cs[i].amount
					old = append(old, cs[i])
				case 1:
					old = append(old, cs[i])
				default:
					joined = append(joined, cs[i])
				}
			}
			e.seed(old...)
			// September is billed as usual; it is the history of October's caps.
			// Pages of the largest size: 150 records, keys, index entries and
			// 30 budget shards in one transaction, within Firestore's 500 writes.
			sept := e.runWorkflowFor("2026-09", "sept", vault.MaxPageSize, 20)
			if sept.summary.status != http.StatusOK || sept.held != 0 {
				t.Fatalf("september: %d %v, %d held", sept.summary.status, sept.summary.body, sept.held)
			}
			e.seed(joined...)
			// The data bug: every fourth amount ×10.
			inflated := map[string]bool{}
			var changed []billing.Customer
			for i, c := range cs {
				if i%4 != 0 {
					continue
				}
				cust, err := billing.GetCustomer(t.Context(), b, c.id)
				if err != nil {
					t.Fatal(err)
				}
				cust.PlanAmount *= 10
				changed = append(changed, cust)
				inflated[c.id] = true
			}
			if err := billing.PutCustomers(t.Context(), b, changed); err != nil {
				t.Fatal(err)
			}
			res := e.runWorkflow("oct", 100, 20)
			e.assertSummary(res.summary, int64(n), map[string]int64{"succeeded": int64(n - len(inflated)), "held_for_review": int64(len(inflated))})
			recs := e.assertAllTerminal()
			if res.held != len(inflated) {
				t.Errorf("pages reported %d held, want %d", res.held, len(inflated))
			}
			sources := map[string]int{}
			for id := range inflated {
				rec := recs[id]
				if _, charged := res.outcomes[id]; charged || rec.State != billing.StateHeldForReview || rec.Attempts != 0 ||
					rec.ErrorCode != vault.HoldAmountAboveCap || !strings.Contains(rec.Reason, "above cap") {
					t.Errorf("%s: %s after %d attempts (%s: %s), listed for charge %v; want held before any attempt", id, rec.State, rec.Attempts, rec.ErrorCode, rec.Reason, charged)
				}
				for _, src := range []string{"ceiling", "largest recent payment", "default cap"} {
					if strings.Contains(rec.Reason, src) {
						sources[src]++
					}
				}
			}
			if len(sources) != 3 {
				t.Errorf("held for caps from %v, want ceiling, history and default", sources)
			}
			// No payment of October exceeds its key's cap.
			var charged int64
			for id, p := range e.assertLedgerOnce() {
				ks, err := e.issuer.Key(t.Context(), recs[id].KeyRef)
				if err != nil {
					t.Fatal(err)
				}
				if p.Amount > ks.Cap || inflated[id] {
					t.Errorf("%s paid %d with cap %d (inflated %v)", id, p.Amount, ks.Cap, inflated[id])
				}
				charged += p.Amount
			}
			// The summary names the held customers (at most 100) and the budget.
			var sum billing.Summary
			raw, _ := json.Marshal(res.summary.body)
			if err := json.Unmarshal(raw, &sum); err != nil {
				t.Fatal(err)
			}
			if sum.HeldCount != int64(len(inflated)) || len(sum.Held) != min(100, len(inflated)) {
				t.Errorf("summary held_count %d with %d listed, want %d and %d", sum.HeldCount, len(sum.Held), len(inflated), min(100, len(inflated)))
			}
			for _, h := range sum.Held {
				if !inflated[h.CustomerID] || h.Code != vault.HoldAmountAboveCap || h.Reason == "" {
					t.Errorf("summary lists %+v", h)
				}
			}
			if sum.Budget == nil || sum.Budget.Used != charged || sum.Budget.Total < sum.Budget.Used {
				t.Errorf("summary budget %+v, want used = %d charged, within the total", sum.Budget, charged)
			}
			t.Logf("%d customers: %d charged (%d minor units), %d held %v; budget %+v", n, n-len(inflated), charged, len(inflated), sources, sum.Budget)
		})
	}
}

// TestIssueVaultKeys_RetriedPageSameReferences: a retried page (a lost answer,
// a workflow step retry) returns the same key references and issues no second
// key; after the keys expired, the retried page returns their renewals.
func TestIssueVaultKeys_RetriedPageSameReferences(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b store.Backend) {
		e := newEnv(t, b, envOptions{vault: vault.IssuerConfig{KeyTTL: time.Hour}})
		e.seed(visa(5)...)
		wantStatus(t, e.preflight("exec-1"), http.StatusOK, "")
		refs := func(r reply) []string {
			var out []string
			for _, c := range r.body["customers"].([]any) {
				out = append(out, c.(map[string]any)["key_ref"].(string))
			}
			return out
		}
		first := e.issue(period, "exec-1", "", 3)
		again := e.issue(period, "exec-1", "", 3)
		wantStatus(t, again, http.StatusOK, "")
		if a, b := refs(first), refs(again); len(a) != 3 || !slices.Equal(a, b) {
			t.Fatalf("retried page: %v then %v, want the same 3 references", a, b)
		}
		if again.num("due_count") != 3 {
			t.Errorf("due_count %d after a retried page, want 3", again.num("due_count"))
		}
		keys, err := b.Query(t.Context(), store.Query{Collection: "vault_keys"})
		if err != nil || len(keys) != 3 {
			t.Fatalf("%d keys stored (%v), want 3", len(keys), err)
		}
		e.clock.Advance(2 * time.Hour)
		renewed := refs(e.issue(period, "exec-1", "", 3))
		for i, ref := range refs(first) {
			assertRenewed(t, e, ref, renewed[i])
		}
	})
}

// TestF16_KeyExpiresMidRun: keys expire while a run is under way. Charge
// renews them (the next generation keeps the cap and what was spent) and goes
// on, whether the key expired before the call or between Charge's check and
// the proxy; a revoked key is refused with a clear reason and held. Nothing is
// ever sent uncapped.
func TestF16_KeyExpiresMidRun(t *testing.T) {
	t.Run("expired before the call", func(t *testing.T) {
		forEachBackend(t, func(t *testing.T, b store.Backend) {
			e := newEnv(t, b, envOptions{vault: vault.IssuerConfig{KeyTTL: time.Hour}})
			e.seed(visa(6)...)
			wantStatus(t, e.preflight("exec-1"), http.StatusOK, "")
			first := e.issue(period, "exec-1", "", 3)
			wantStatus(t, first, http.StatusOK, "")
			wantStatus(t, e.charge("c000"), http.StatusOK, "charged")
			e.clock.Advance(61 * time.Minute)
			for _, id := range []string{"c001", "c002"} {
				old := e.keyRef(period, id)
				wantStatus(t, e.charge(id), http.StatusOK, "charged")
				rec := e.record(id)
				if rec.KeyRef == old || rec.Attempts != 1 {
					t.Errorf("%s: key %s after %d attempts, want a renewed key and one attempt", id, rec.KeyRef, rec.Attempts)
				}
				assertRenewed(t, e, old, rec.KeyRef)
			}
			// The workflow's next page is issued fresh; the run completes.
			res := e.runWorkflow("exec-1", 3, 2)
			e.assertSummary(res.summary, 6, map[string]int64{"succeeded": 6})
			e.assertAllTerminal()
			if n := len(e.stripePosts()); n != 6 {
				t.Errorf("%d Stripe requests, want 6", n)
			}
		})
	})
	t.Run("expired between the check and the proxy", func(t *testing.T) {
		forEachBackend(t, func(t *testing.T, b store.Backend) {
			// The vault's clock is 10 minutes ahead: at 65 minutes the key
			// looks valid to Charge and expired to the proxy.
			e := newEnv(t, b, envOptions{vault: vault.IssuerConfig{KeyTTL: time.Hour}, vaultAhead: 10 * time.Minute})
			e.seed(visa(2)...)
			e.issueAll("exec-1")
			wantStatus(t, e.charge("c000"), http.StatusOK, "charged")
			e.clock.Advance(65 * time.Minute)
			old := e.keyRef(period, "c001")
			wantStatus(t, e.charge("c001"), http.StatusOK, "charged")
			rec := e.record("c001")
			if rec.Attempts != 2 || rec.KeyRef == old {
				t.Errorf("c001: %d attempts with key %s, want 2 (one refused as expired, one renewed)", rec.Attempts, rec.KeyRef)
			}
			assertRenewed(t, e, old, rec.KeyRef)
			if n := len(e.stripePosts()); n != 2 {
				t.Errorf("%d Stripe requests, want 2: the expired key's request never left the proxy", n)
			}
			e.assertLedgerOnce()
		})
	})
	t.Run("revoked", func(t *testing.T) {
		forEachBackend(t, func(t *testing.T, b store.Backend) {
			e := newEnv(t, b, envOptions{})
			e.seed(visa(3)...)
			e.issueAll("exec-1")
			for _, id := range []string{"c001", "c002"} {
				if err := e.issuer.Revoke(t.Context(), e.keyRef(period, id), "card reported stolen"); err != nil {
					t.Fatal(err)
				}
			}
			wantStatus(t, e.charge("c000"), http.StatusOK, "charged")
			// Charge refuses the revoked key with a clear reason and holds.
			r := e.charge("c001")
			wantStatus(t, r, http.StatusUnprocessableEntity, "held_for_review")
			if r.str("error_code") != "vault_key_revoked" || !strings.Contains(r.str("reason"), "card reported stolen") {
				t.Errorf("revoked: %v, want vault_key_revoked with the operator's reason", r.body)
			}
			// A retried page holds the other one at issuance.
			page := e.issue(period, "exec-1", "", 0)
			if page.num("held") != 1 || len(page.body["customers"].([]any)) != 0 {
				t.Errorf("retried page after revocation: %v, want c002 held and nobody to charge", page.body)
			}
			if rec := e.record("c002"); rec.State != billing.StateHeldForReview || rec.ErrorCode != vault.HoldKeyRevoked || !strings.Contains(rec.Reason, "card reported stolen") {
				t.Errorf("c002: %s %s %q, want held for review (key_revoked)", rec.State, rec.ErrorCode, rec.Reason)
			}
			sum := e.call(api.NameMarkCompleted, map[string]any{"period": period, "execution_id": "exec-1"})
			e.assertSummary(sum, 3, map[string]int64{"succeeded": 1, "held_for_review": 2})
			if n := len(e.stripePosts()); n != 1 {
				t.Errorf("%d Stripe requests, want 1", n)
			}
		})
	})
}

// TestF16_RevokedAfterAttemptWarns: a customer whose first attempt left the
// record pending (the payment went through, its answer was lost) has its key
// revoked. Whether Charge or a retried page finds the revocation, the hold's
// reason says a payment may exist (I2): a revoked key cannot list it.
func TestF16_RevokedAfterAttemptWarns(t *testing.T) {
	const warning = "1 earlier attempt(s): check Stripe for a payment before charging again"
	cases := []struct {
		name  string
		finds func(t *testing.T, e *env)
	}{
		{"found by Charge", func(t *testing.T, e *env) {
			wantStatus(t, e.charge("c000"), http.StatusUnprocessableEntity, "held_for_review")
		}},
		{"found by a retried page", func(t *testing.T, e *env) {
			wantStatus(t, e.issue(period, "exec-1", "", 0), http.StatusOK, "")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b store.Backend) {
				e := newEnv(t, b, envOptions{faults: stripesim.Faults{Error500After: 1, FirstAttempts: 1}})
				e.seed(visa(1)...)
				e.issueAll("exec-1")
				if r := e.charge("c000"); r.status != http.StatusServiceUnavailable {
					t.Fatalf("first attempt: %d %v, want 503", r.status, r.body)
				}
				e.setFaults(stripesim.Faults{})
				if err := e.issuer.Revoke(t.Context(), e.keyRef(period, "c000"), "card reported stolen"); err != nil {
					t.Fatal(err)
				}
				tc.finds(t, e)
				rec := e.record("c000")
				if rec.State != billing.StateHeldForReview || !strings.Contains(rec.Reason, "card reported stolen") || !strings.Contains(rec.Reason, warning) {
					t.Errorf("c000: %s %s %q, want held for review, the operator's reason and %q", rec.State, rec.ErrorCode, rec.Reason, warning)
				}
			})
		})
	}
}

// assertRenewed checks that ref was renewed as next: same cap, next
// generation, old one superseded.
func assertRenewed(t *testing.T, e *env, ref, next string) {
	t.Helper()
	old, err := e.issuer.Key(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := e.issuer.Key(t.Context(), next)
	if err != nil {
		t.Fatal(err)
	}
	if old.SupersededBy != next || cur.Generation != old.Generation+1 || cur.Cap != old.Cap || cur.Spent > cur.Cap {
		t.Errorf("renewal %s → %s: old %+v, new %+v; want the next generation with the same cap", ref, next, old, cur)
	}
}

// TestI5_NoSecretsWherePeopleLook runs a period through the functions built
// from the environment alone, with a unique Stripe key and signing secret, and
// finds neither, nor any key's credential, in any answer, log line, stored
// record or file of the data directory.
func TestI5_NoSecretsWherePeopleLook(t *testing.T) {
	for _, bc := range []string{"embedded", "firestore"} {
		t.Run(bc, func(t *testing.T) {
			stripeKey, signing := "sk_test_i5_"+randomHex(t), "signing-"+randomHex(t)
			sim, err := stripesim.New(stripesim.Config{})
			if err != nil {
				t.Fatal(err)
			}
			simSrv := httptest.NewServer(sim)
			defer simSrv.Close()
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			dataDir := t.TempDir()
			vars := map[string]string{
				"STRIPE_SECRET_KEY": stripeKey, "BILLRUN_STRIPE_API_BASE": simSrv.URL, "BILLRUN_LOG_LEVEL": "debug",
				"BILLRUN_VAULT_SIGNING_SECRET": signing, "BILLRUN_VAULT_PROXY_URL": "http://" + l.Addr().String(),
				"BILLRUN_VAULT_DEFAULT_CAPS": "usd=100000", "BILLRUN_DATA_DIR": dataDir,
			}
			var seedStore store.Backend
			if bc == "firestore" {
				em := emulators.Get(t)
				t.Setenv(emulator.EnvHost, em.Host())
				vars["BILLRUN_STORE"], vars["GOOGLE_CLOUD_PROJECT"] = "firestore", em.NewProject()
				client, err := em.Client(t.Context(), vars["GOOGLE_CLOUD_PROJECT"])
				if err != nil {
					t.Fatal(err)
				}
				seedStore = firestoredb.NewFromClient(client)
			}
			cfg, err := config.Load(func(k string) string { return vars[k] })
			if err != nil {
				t.Fatal(err)
			}
			var logs syncBuffer
			h, closeStore, err := api.Open(t.Context(), cfg, cfg.Logger(&logs))
			if err != nil {
				t.Fatal(err)
			}
			defer closeStore()
			proxy := &http.Server{Handler: h.VaultProxy}
			go proxy.Serve(l)
			defer proxy.Close()
			if seedStore == nil {
				db, err := embedded.Open(t.Context(), cfg.EmbeddedPath())
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				seedStore = db
			}
			// The functions, served at /<name>: a standard env over them.
			srv := httptest.NewServer(h.Mux())
			defer srv.Close()
			e := &env{t: t, clock: stripesim.NewManualClock(time.Now()), sim: sim, store: seedStore, urls: []string{srv.URL},
				http:   &http.Client{Timeout: 30 * time.Second},
				stripe: billing.NewStripeClient("sk_test_seed", simSrv.URL, simSrv.Client()), keys: map[string]string{}}
			e.seed(cust{id: "ok1", pm: "pm_card_visa", amount: 1200}, cust{id: "ok2", pm: "pm_card_visa", amount: 1300},
				cust{id: "dec", pm: "pm_card_visa_chargeDeclined", amount: 900}, cust{id: "big", pm: "pm_card_visa", amount: 500_000})
			p := time.Now().UTC().Format("2006-01")
			res := e.runWorkflowFor(p, "i5", 10, 2)
			if res.summary.status != http.StatusOK || res.held != 1 {
				t.Fatalf("run: %d %v, %d held", res.summary.status, res.summary.body, res.held)
			}
			// Every way a person could see something: answers, logs, records, files.
			var seen strings.Builder
			for _, r := range res.replies {
				raw, _ := json.Marshal(r.body)
				seen.Write(raw)
				fmt.Fprintf(&seen, "%v", r.header)
			}
			seen.WriteString(logs.String())
			refs := dumpStore(t, seedStore, p, &seen)
			if bc == "embedded" {
				err := filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
					if err != nil || d.IsDir() {
						return err
					}
					raw, err := os.ReadFile(path)
					seen.Write(raw)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			secrets := map[string]string{"Stripe key": stripeKey, "signing secret": signing}
			for _, ref := range refs {
				cred := vault.Credential([]byte(signing), ref)
				secrets["credential of "+ref] = cred
				secrets["MAC of "+ref] = cred[strings.IndexByte(cred, '.')+1:]
			}
			if len(refs) != 3 {
				t.Errorf("%d keys stored, want 3", len(refs))
			}
			all := seen.String()
			for what, secret := range secrets {
				if strings.Contains(all, secret) {
					t.Errorf("I5 violated: the %s appears where people look", what)
				}
			}
			if !strings.Contains(all, refs[0]) || !strings.Contains(all, "vault proxy: forwarded") {
				t.Errorf("the scan saw no key reference or no proxy log: it scanned the wrong things")
			}
			t.Logf("scanned %d bytes (%d answers, %d log bytes) for %d secrets", len(all), len(res.replies), len(logs.String()), len(secrets))
		})
	}
}

// dumpStore writes every document billrun keeps for period p to w and
// returns the vault key references.
func dumpStore(t *testing.T, b store.Backend, p string, w *strings.Builder) []string {
	t.Helper()
	var refs []string
	for _, coll := range []string{"customers", "runs", "runs/" + p + "/charges", "vault_keys", "vault_runs/" + p + "/customers", "vault_runs/" + p + "/budget_shards"} {
		docs, err := b.Query(context.Background(), store.Query{Collection: coll})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			raw, err := json.Marshal(d.Data)
			if err != nil {
				t.Fatal(err)
			}
			w.WriteString(d.Path)
			w.Write(raw)
			if coll == "vault_keys" {
				refs = append(refs, d.ID())
			}
		}
	}
	return refs
}

func randomHex(t *testing.T) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// syncBuffer is a log sink safe for concurrent handlers.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// TestF2_OutOfRangeAmountHeldOthersBilled: a data bug gives one customer an
// amount beyond anything the vault handles and another a negative ceiling.
// Each is one customer's problem: both are held for review with the reason
// before anything reaches Stripe, and the rest of their page is billed. The
// page is not refused whole, which would stop the run for everybody.
func TestF2_OutOfRangeAmountHeldOthersBilled(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b store.Backend) {
		e := newEnv(t, b, envOptions{})
		cs := visa(5)
		cs[1].amount = 20 * vault.MaxAmount // a unit-price bug
		cs[3].ceiling = -500                // a sign bug in the plan's ceiling
		e.seed(cs...)
		res := e.runWorkflow("exec-1", 100, 2)
		e.assertSummary(res.summary, 5, map[string]int64{"succeeded": 3, "held_for_review": 2})
		recs := e.assertAllTerminal()
		for _, id := range []string{cs[1].id, cs[3].id} {
			rec := recs[id]
			if rec.State != billing.StateHeldForReview || rec.Attempts != 0 || rec.Reason == "" {
				t.Errorf("%s: %s after %d attempts (%s: %s); want held before any attempt", id, rec.State, rec.Attempts, rec.ErrorCode, rec.Reason)
			}
		}
		if len(e.stripePosts()) != 3 {
			t.Errorf("%d payment requests reached Stripe, want 3", len(e.stripePosts()))
		}
	})
}
