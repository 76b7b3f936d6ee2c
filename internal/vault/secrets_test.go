package vault_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/stripesim"
	"billrun.dev/billrun/internal/vault"
)

// TestI5_NoSecretsWherePeopleLook runs a period with a unique STRIPE_SECRET_KEY
// and signing secret, through successes, holds, declines, lost answers, expiry
// and refusals, then scans every workflow-visible result, stored record, file
// in the data directory, log line, response and error for the Stripe secret,
// the signing secret and every usable vault credential, and finds none.
func TestI5_NoSecretsWherePeopleLook(t *testing.T) { eachBackend(t, testI5_NoSecretsWherePeopleLook) }

func testI5_NoSecretsWherePeopleLook(t *testing.T, be backend) {
	t.Setenv("STRIPE_SECRET_KEY", "sk_test_i5_"+randomHex(20))
	signing := []byte("signing-" + randomHex(24))
	e := newEnv(t, be, envOptions{
		stripeSecret: os.Getenv("STRIPE_SECRET_KEY"),
		signing:      signing,
		simDataDir:   true,
		issuer:       vault.IssuerConfig{KeyTTL: time.Hour},
	})
	ctx := t.Context()
	const n = 60
	ids := e.customers(n)
	var reqs []vault.IssueRequest
	for i, id := range ids {
		r := vault.IssueRequest{Customer: id, Currency: "usd", Amount: 1000, Ceiling: 3000}
		if i%10 == 0 {
			r.Amount = 10_000 // held
		}
		reqs = append(reqs, r)
	}
	issued, err := e.issuer.IssuePage(ctx, period, reqs)
	if err != nil {
		t.Fatal(err)
	}

	// Everything the workflow and Charge's callers could see.
	var visible lockedBuffer
	record := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		visible.Write(append(b, '\n'))
	}
	record(issued)
	// Two answers lost before the run proper (a dropped connection, a 500
	// after committing), so the error paths leave their traces to scan; the
	// run below replays both.
	for i, f := range []stripesim.Faults{{DropAfter: 1}, {Error500After: 1}} {
		is := issued[i+1]
		e.sim.SetFaults(f)
		_, err := e.charge(ctx, is.KeyRef, is.Customer, "usd", is.Amount, "charge-"+is.Customer)
		visible.Write([]byte(fmt.Sprint(err) + "\n"))
	}
	e.sim.SetFaults(stripesim.Faults{})

	var mu sync.Mutex
	var credentials []string
	parallel(n, 10, func(i int) {
		is := issued[i]
		if is.Held {
			return
		}
		mu.Lock()
		credentials = append(credentials, vault.Credential(signing, is.KeyRef))
		mu.Unlock()
		pm := "pm_card_visa"
		if i%7 == 0 {
			pm = "pm_card_visa_chargeDeclined"
		}
		pi, err := e.chargeWith(ctx, is.KeyRef, is.Customer, "usd", is.Amount, "charge-"+is.Customer, pm)
		record(pi)
		if err != nil {
			visible.Write([]byte(err.Error() + "\n"))
		}
		// A forged attempt and an over-cap attempt: refusals and their errors.
		_, err = e.charge(ctx, is.KeyRef+"x", is.Customer, "usd", 1, "forged-"+is.Customer)
		visible.Write([]byte(fmt.Sprint(err) + "\n"))
		_, err = e.charge(ctx, is.KeyRef, is.Customer, "usd", 99_999, "over-"+is.Customer)
		visible.Write([]byte(fmt.Sprint(err) + "\n"))
	})
	// Expiry and renewal mid-run.
	e.clock.Advance(2 * time.Hour)
	renewed, err := e.issuer.IssuePage(ctx, period, reqs)
	if err != nil {
		t.Fatal(err)
	}
	record(renewed)
	for _, is := range renewed {
		if is.Held {
			continue
		}
		credentials = append(credentials, vault.Credential(signing, is.KeyRef))
		ks, err := e.issuer.Key(ctx, is.KeyRef)
		if err != nil {
			t.Fatal(err)
		}
		record(ks)
	}
	if len(credentials) < 100 {
		t.Fatalf("only %d credentials issued; the scan would prove little", len(credentials))
	}

	// Every stored record, whatever its collection.
	var stored bytes.Buffer
	for _, coll := range []string{"vault_keys", "vault_runs/" + period + "/customers", "vault_runs/" + period + "/budget_shards"} {
		docs, err := e.store.Query(ctx, store.Query{Collection: coll})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			fmt.Fprintf(&stored, "%s %v\n", d.Path, d.Data)
		}
	}
	// Every file in the data directory (SQLite database, WAL, the simulator's
	// journal).
	var files bytes.Buffer
	err = filepath.WalkDir(e.dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		files.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	secrets := map[string]string{
		"STRIPE_SECRET_KEY":     os.Getenv("STRIPE_SECRET_KEY"),
		"signing secret":        string(signing),
		"signing secret in hex": hex.EncodeToString(signing),
	}
	for i, c := range credentials {
		secrets[fmt.Sprintf("credential %d", i)] = c
		_, mac, _ := strings.Cut(c, ".")
		secrets[fmt.Sprintf("credential %d's MAC", i)] = mac
	}
	places := map[string]string{
		"workflow-visible results and errors": visible.String(),
		"stored records":                      stored.String(),
		"data directory files":                files.String(),
		"log lines":                           e.logs.String(),
		"responses":                           e.responses.seen.String(),
	}
	for place, text := range places {
		if len(text) < 1000 {
			t.Errorf("%s: only %d bytes to scan", place, len(text))
		}
		for name, secret := range secrets {
			if strings.Contains(text, secret) {
				t.Errorf("%s contain the %s", place, name)
			}
		}
	}
	for _, path := range []string{`"stripe_status":500`, `"code":"vault_upstream_unavailable"`, `"code":"vault_unknown_key"`, `"code":"card_declined"`} {
		if !strings.Contains(e.logs.String()+e.responses.seen.String(), path) {
			t.Errorf("the run never took the path %s; the scan would prove less", path)
		}
	}
	// The scan can see: the credentials are where they are meant to be, in
	// the clients' hands, and would be found if they leaked.
	if !strings.Contains(strings.Join(credentials, " "), secrets["credential 0"]) {
		t.Fatal("scanner blind")
	}
	t.Logf("scanned %d secrets in %d bytes of results, records, files, logs and responses", len(secrets),
		len(visible.String())+stored.Len()+files.Len()+len(e.logs.String())+len(e.responses.seen.String()))
}
