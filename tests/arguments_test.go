package tests

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/stripesim"
)

// pubSubEvent is the argument Eventarc gives a workflow for a Pub/Sub message
// (a google.cloud.pubsub.topic.v1.messagePublished CloudEvent) whose data
// field is data: base64, as Pub/Sub delivers it (see encoded).
func pubSubEvent(data string) string {
	event := map[string]any{
		"specversion":     "1.0",
		"type":            "google.cloud.pubsub.topic.v1.messagePublished",
		"source":          "//pubsub.googleapis.com/projects/billrun-local/topics/billing-periods",
		"id":              "4821374098765432",
		"time":            "2026-11-01T00:00:05.123Z",
		"datacontenttype": "application/json",
		"data": map[string]any{
			"subscription": "projects/billrun-local/subscriptions/eventarc-billing",
			"message": map[string]any{
				"data":        data,
				"messageId":   "4821374098765432",
				"publishTime": "2026-11-01T00:00:05.123Z",
				"attributes":  map[string]string{"origin": "billing-scheduler"},
			},
		},
	}
	b, err := json.Marshal(event)
	if err != nil {
		panic(err) // a literal map of strings always marshals
	}
	return string(b)
}

// encoded is message data as Pub/Sub carries it.
func encoded(data string) string { return base64.StdEncoding.EncodeToString([]byte(data)) }

// executionResult is a billing execution's result: the run summary, or the
// period and why nothing was done (already_billed, already_running).
type executionResult struct {
	billing.Summary
	Status string `json:"status"`
}

func resultOf(t *testing.T, x execution) executionResult {
	t.Helper()
	var r executionResult
	if err := json.Unmarshal([]byte(x.Result), &r); err != nil {
		t.Fatalf("execution %s result %q: %v", x.Name, x.Result, err)
	}
	return r
}

// TestF6_DuplicateEventDelivery: Eventarc delivers one Pub/Sub message twice
// and two executions start at once with the same CloudEvent; the period in
// the payload deduplicates them: one bills it, the other ends successfully
// saying why.
func TestF6_DuplicateEventDelivery(t *testing.T) {
	dir := t.TempDir()
	const customers = 50
	// Latency keeps the first execution busy while the second one arrives.
	srv := startServe(t, dir, nil, "--faults", "latency=10ms")
	seedCustomers(t, dir, customers)
	event := pubSubEvent(encoded(`{"period": "` + period + `"}`))

	names := make([]string, 2)
	errs := make([]error, 2)
	var ready, wg sync.WaitGroup
	ready.Add(1)
	for i := range names {
		wg.Go(func() {
			ready.Wait()
			names[i], errs[i] = srv.startExecution(t.Context(), event)
		})
	}
	ready.Done()
	wg.Wait()
	var summary *billing.Summary
	for i, name := range names {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		x := srv.awaitExecution(t, name)
		if x.State != "SUCCEEDED" {
			t.Fatalf("execution %s: %s %+v, want SUCCEEDED", name, x.State, x.Error)
		}
		r := resultOf(t, x)
		t.Logf("execution %s: period %s, status %q", name, r.Period, r.Status)
		if r.Period != period {
			t.Errorf("execution %s billed period %q, the event says %s", name, r.Period, period)
		}
		switch r.Status {
		case "":
			if summary != nil {
				t.Fatalf("both executions billed the period")
			}
			var out runOutcome
			out.Status, out.Progress.Summary = "completed", &r.Summary
			summary = assertCompleted(t, out, customers)
		case string(billing.AlreadyRunning), string(billing.AlreadyBilled):
		default:
			t.Errorf("execution %s: status %q", name, r.Status)
		}
	}
	if summary == nil {
		t.Fatal("neither execution billed the period")
	}
	if paid, succeeded := len(assertOnce(t, dir)), summary.Counts[string(billing.StateSucceeded)]; paid == 0 || int64(paid) != succeeded {
		t.Errorf("%d payments for %d successes", paid, succeeded)
	}
}

// TestWorkflowArgumentForms drives each argument form the production workflow
// accepts (its header comment lists them) through billrun serve's Executions
// API: the ones naming no period bill the previous calendar month in
// BILLRUN_TIME_ZONE; a malformed one fails the execution with an error naming
// the problem before anything is claimed or sent to Stripe.
func TestWorkflowArgumentForms(t *testing.T) {
	// UTC+14, so near a month's end it is already the next month there. The
	// engine's clock cannot be set through the CLI: the expected month is
	// the current one's predecessor in that zone.
	const zone = "Pacific/Kiritimati"
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	previousMonth := func() string {
		now := time.Now().In(loc)
		return time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, loc).AddDate(0, -1, 0).Format("2006-01")
	}
	cases := []struct {
		name     string
		argument string
		// wantCode and wantMessage (a part of it), when set, are the failed
		// execution's error; else the execution bills the previous month.
		wantCode, wantMessage string
	}{
		{name: "none", argument: ""},
		{name: "empty object", argument: `{}`},
		{name: "event without a period", argument: pubSubEvent(encoded(`{}`))},
		{name: "month 13", argument: `{"period": "2026-13"}`, wantCode: "invalid_period", wantMessage: "the period must be YYYY-MM, got 2026-13"},
		{name: "period a number", argument: `{"period": 202610}`, wantCode: "invalid_period", wantMessage: "the period must be a string YYYY-MM, got 202610"},
		{name: "misspelt key", argument: `{"perod": "2026-10"}`, wantCode: "invalid_argument", wantMessage: `unexpected argument keys ["perod"]`},
		{name: "event data not base64", argument: pubSubEvent("not base64!"), wantCode: "invalid_argument", wantMessage: "the Pub/Sub message data is not base64-encoded JSON"},
		{name: "event data not JSON", argument: pubSubEvent(encoded("period=2026-10")), wantCode: "invalid_argument", wantMessage: "the Pub/Sub message data is not base64-encoded JSON"},
		{name: "event with month 13", argument: pubSubEvent(encoded(`{"period": "2026-13"}`)), wantCode: "invalid_period", wantMessage: "the period must be YYYY-MM, got 2026-13"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			srv := startServe(t, dir, nil, "--env", "BILLRUN_TIME_ZONE="+zone)
			importCustomers(t, dir, "payer,,pm_card_visa,usd,2500,5000,true", "decliner,,pm_card_visa_chargeDeclined,usd,2500,5000,true")
			requestsBefore := simRequests(t, dir)
			before := previousMonth()
			name, err := srv.startExecution(t.Context(), tc.argument)
			if err != nil {
				t.Fatal(err)
			}
			x := srv.awaitExecution(t, name)
			if tc.wantCode == "" {
				if x.State != "SUCCEEDED" {
					t.Fatalf("%s %+v, want SUCCEEDED", x.State, x.Error)
				}
				r := resultOf(t, x)
				if after := previousMonth(); r.Period != before && r.Period != after {
					t.Errorf("billed %q, want the previous month in %s, %s", r.Period, zone, before)
				}
				if r.Status != "" || r.Due != 2 || r.Counts[string(billing.StateSucceeded)] != 1 || r.Counts[string(billing.StateDeclined)] != 1 {
					t.Errorf("result %s, want a completed run: one paid, one declined", x.Result)
				}
				return
			}
			var raised struct{ Code, Message string }
			if x.State != "FAILED" || x.Error == nil || json.Unmarshal([]byte(x.Error.Payload), &raised) != nil ||
				raised.Code != tc.wantCode || !strings.Contains(raised.Message, tc.wantMessage) {
				t.Fatalf("%s %+v, want FAILED with %s: %q", x.State, x.Error, tc.wantCode, tc.wantMessage)
			}
			db := openStore(t, dir)
			for _, coll := range []string{"runs", "vault_keys"} {
				if docs, err := db.Query(t.Context(), store.Query{Collection: coll}); err != nil || len(docs) != 0 {
					t.Errorf("%s holds %d documents (%v), want nothing claimed", coll, len(docs), err)
				}
			}
			if n := simRequests(t, dir); n != requestsBefore {
				t.Errorf("the Stripe simulator got %d requests during the execution, want none", n-requestsBefore)
			}
		})
	}
}

// simRequests is how many requests the Stripe simulator of dataDir's billrun
// serve has answered.
func simRequests(t *testing.T, dataDir string) int {
	t.Helper()
	sim, err := serverURL(dataDir, "stripe_simulator")
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, sim.String()+"/_sim/requests", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("sk_test_requests", "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []stripesim.RequestRecord `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /_sim/requests: %s %v", resp.Status, err)
	}
	return len(list.Data)
}
