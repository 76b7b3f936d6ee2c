package stripesim

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
)

// reopen simulates a restart: a new Server on the same data directory. Close
// only releases the file and its lock: every acknowledged change was already
// synced, so this is what a crash leaves behind too.
func (s *sim) reopen(dir string) *sim {
	s.t.Helper()
	s.ts.Close()
	s.srv.Close()
	srv, err := New(Config{Clock: s.clock, DataDir: dir, Seed: 1})
	if err != nil {
		s.t.Fatalf("reopen: %v", err)
	}
	ts := httptest.NewServer(srv)
	s.t.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	n := &sim{t: s.t, srv: srv, ts: ts, clock: s.clock}
	n.client = n.newClient(0, nil)
	return n
}

// TestF8_ReplayAfterRestart: state survives a restart, so a retry with the
// same key after the simulator (or billrun) crashed replays the payment.
func TestF8_ReplayAfterRestart(t *testing.T) {
	dir := t.TempDir()
	s := newSim(t, func(c *Config) { c.DataDir = dir })
	cust, pm := s.customer("pm_card_visa")
	first, err := s.charge(cust, pm, "2026-10/"+cust, 5000)
	if err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(time.Hour)
	s = s.reopen(dir)
	again, err := s.charge(cust, pm, "2026-10/"+cust, 5000)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || again.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("after restart: got %s, want replay of %s", again.ID, first.ID)
	}
	if _, err := s.client.V1Customers.Retrieve(context.Background(), cust, nil); err != nil {
		t.Fatalf("customer lost in restart: %v", err)
	}
	led, err := ReadLedger(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(led) != 1 || led[0].PaymentIntentID != first.ID || led[0].IdempotencyKey != "2026-10/"+cust {
		t.Fatalf("ReadLedger: %+v", led)
	}
	// A new payment after the restart lists after the old ones.
	second, err := s.charge(cust, pm, "2026-11/"+cust, 5000)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for pi, err := range s.client.V1PaymentIntents.List(context.Background(), &stripe.PaymentIntentListParams{Customer: stripe.String(cust)}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, pi.ID)
	}
	if strings.Join(ids, ",") != second.ID+","+first.ID {
		t.Fatalf("list after restart: %v", ids)
	}
}

func TestRestartDropsExpiredKeys(t *testing.T) {
	dir := t.TempDir()
	s := newSim(t, func(c *Config) { c.DataDir = dir })
	cust, pm := s.customer("pm_card_visa")
	if _, err := s.charge(cust, pm, "k", 5000); err != nil {
		t.Fatal(err)
	}
	s.clock.Advance(25 * time.Hour)
	s = s.reopen(dir)
	if len(s.srv.st.idem) != 0 {
		t.Fatalf("expired key kept: %d", len(s.srv.st.idem))
	}
	if len(s.ledger()) != 1 {
		t.Fatal("the ledger must outlive idempotency keys")
	}
}

func TestTornJournalLineIsIgnored(t *testing.T) {
	dir := t.TempDir()
	s := newSim(t, func(c *Config) { c.DataDir = dir })
	cust, pm := s.customer("pm_card_visa")
	if _, err := s.charge(cust, pm, "k", 5000); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, journalFile)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"ledger":[{"payment_intent":"pi_torn"`) // a crash mid-write
	f.Close()
	led, err := ReadLedger(dir)
	if err != nil || len(led) != 1 {
		t.Fatalf("torn tail: %v %d", err, len(led))
	}
	s = s.reopen(dir)
	if len(s.ledger()) != 1 {
		t.Fatal("torn tail changed the ledger")
	}

	// Damage before the last line is an error, not silently dropped data.
	os.WriteFile(path, []byte("garbage\n{}\n"), 0o600)
	if _, err := ReadLedger(dir); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("want a located error, got %v", err)
	}
}

func TestReadLedgerOfEmptyDir(t *testing.T) {
	led, err := ReadLedger(t.TempDir())
	if err != nil || len(led) != 0 {
		t.Fatalf("got %v %v", led, err)
	}
}

func TestDataDirIsLocked(t *testing.T) {
	dir := t.TempDir()
	first, err := New(Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{DataDir: dir}); !errors.Is(err, ErrDataDirInUse) {
		t.Fatalf("second simulator on one directory: got %v", err)
	}
	first.Close()
	second, err := New(Config{DataDir: dir})
	if err != nil {
		t.Fatalf("after close: %v", err)
	}
	second.Close()
}

// TestCloseDuringSlowCommit: a simulator stopped mid-commit (like a crash)
// commits nothing, answers nothing, and leaves the key free.
func TestCloseDuringSlowCommit(t *testing.T) {
	s := newSim(t)
	cust, pm := s.customer("pm_card_visa")
	s.setFaults("slow-commit=1:5s")
	errc := make(chan error, 1)
	go func() {
		_, err := s.charge(cust, pm, "k", 1000)
		errc <- err
	}()
	s.waitInFlight("k")
	s.srv.Close()
	if err := <-errc; err == nil {
		t.Fatal("want the request to fail, not an empty answer")
	}
	if len(s.ledger()) != 0 || s.srv.st.idem["k"] != nil || len(s.srv.inflight) != 0 {
		t.Fatalf("closed mid-commit left state: ledger %d, key stored %v, in flight %d", len(s.ledger()), s.srv.st.idem["k"] != nil, len(s.srv.inflight))
	}
}

func TestPruneIdempotency(t *testing.T) {
	now := time.Date(2026, 10, 2, 0, 0, 0, 0, time.UTC)
	st := newState()
	st.apply(&batch{Idem: []idemRecord{
		{Key: "old", CreatedAt: now.Add(-idempotencyTTL)},
		{Key: "young", CreatedAt: now.Add(-idempotencyTTL + time.Second)},
	}})
	st.pruneIdempotency(now)
	if _, ok := st.idem["old"]; ok || st.idem["young"] == nil {
		t.Fatalf("prune kept %v", st.idem)
	}
}
