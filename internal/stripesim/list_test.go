package stripesim

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
)

func TestListPaymentIntentsByCustomerPages(t *testing.T) {
	s := newSim(t)
	a, pmA := s.customer("pm_card_visa")
	b, pmB := s.customer("pm_card_visa")
	var want []string
	for i := range 25 {
		pi, err := s.charge(a, pmA, fmt.Sprintf("a-%d", i), 1000+int64(i))
		if err != nil {
			t.Fatal(err)
		}
		want = append([]string{pi.ID}, want...) // newest first
		s.clock.Advance(time.Second)
		if i%5 == 0 {
			if _, err := s.charge(b, pmB, fmt.Sprintf("b-%d", i), 1000); err != nil {
				t.Fatal(err)
			}
		}
	}
	p := &stripe.PaymentIntentListParams{Customer: stripe.String(a)}
	p.Limit = stripe.Int64(10)
	var got []string
	for pi, err := range s.client.V1PaymentIntents.List(context.Background(), p) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, pi.ID)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("list: got %d ids, want %d newest first\n%v\n%v", len(got), len(want), got, want)
	}
	pages := 0
	for _, r := range s.srv.Requests() {
		if r.Path == "/v1/payment_intents" && r.Method == "GET" {
			pages++
		}
	}
	if pages != 3 {
		t.Fatalf("want 3 pages of 10, got %d requests", pages)
	}

	// ending_before walks toward newer objects; stripe-go yields them oldest first.
	p = &stripe.PaymentIntentListParams{Customer: stripe.String(a)}
	p.Limit = stripe.Int64(4)
	p.EndingBefore = stripe.String(want[10])
	got = got[:0]
	for pi, err := range s.client.V1PaymentIntents.List(context.Background(), p) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, pi.ID)
	}
	if len(got) != 10 || got[0] != want[9] || got[9] != want[0] {
		t.Fatalf("ending_before: got %v", got)
	}

	p = &stripe.PaymentIntentListParams{}
	p.StartingAfter = stripe.String("pi_missing")
	for _, err := range s.client.V1PaymentIntents.List(context.Background(), p) {
		if se := stripeErr(t, err); se.HTTPStatusCode != 400 || se.Param != "starting_after" {
			t.Fatalf("missing cursor: got %d %s", se.HTTPStatusCode, se.Param)
		}
		break
	}
}

func TestSearchQueryParse(t *testing.T) {
	pi := &paymentIntent{Amount: 1500, Created: 100, Currency: "usd", Status: "succeeded", Customer: stripe.String("cus_1"),
		Metadata: map[string]string{"period": "2026-10", "customer": "c1"}}
	cases := []struct {
		query   string
		match   bool
		wantErr string
	}{
		{`metadata['period']:'2026-10'`, true, ""},
		{`metadata["period"]:"2026-10" AND metadata['customer']:'c1'`, true, ""},
		{`metadata['period']:'2026-09'`, false, ""},
		{`metadata['period']:'2026-09' OR status:'succeeded'`, true, ""},
		{`-status:'succeeded'`, false, ""},
		{`amount>1000 AND amount<=1500 AND created>=100`, true, ""},
		{`amount>1500`, false, ""},
		{`customer:'cus_1' currency:'USD'`, true, ""},
		{`metadata['missing']:null`, true, ""},
		{`metadata['period']:null`, false, ""},
		{`status:'a' AND status:'b' OR status:'c'`, false, "cannot be combined"},
		{`email:'x'`, false, "not supported"},
		{`status>'x'`, false, "only the : operator"},
		{`metadata['period':'x'`, false, "['key']"},
		{`status:succeeded`, false, "must be quoted"},
		{`status:'open`, false, "unterminated"},
		{``, false, "empty"},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			q, err := parseSearchQuery(tc.query)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want error with %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := q.matches(pi); got != tc.match {
				t.Fatalf("match: got %v want %v", got, tc.match)
			}
		})
	}
}

func FuzzSearchQuery(f *testing.F) {
	for _, q := range []string{`metadata['a']:'b'`, `amount>=5 AND -status:'x'`, `a OR b`, `metadata["\"]:'`} {
		f.Add(q)
	}
	pi := &paymentIntent{Metadata: map[string]string{}}
	f.Fuzz(func(t *testing.T, q string) {
		if sq, err := parseSearchQuery(q); err == nil {
			sq.matches(pi) // must not panic
		}
	})
}

func TestSearchLagsWrites(t *testing.T) {
	s := newSim(t, func(c *Config) { c.SearchDelay = 30 * time.Second })
	cust, pm := s.customer("pm_card_visa")
	var ids []string
	for i := range 3 {
		p := chargeParams(cust, pm, fmt.Sprintf("k%d", i), 1000)
		p.Metadata["run"] = "r1"
		pi, err := s.client.V1PaymentIntents.Create(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, pi.ID)
	}
	search := func() []string {
		sp := &stripe.PaymentIntentSearchParams{SearchParams: stripe.SearchParams{Query: "metadata['run']:'r1'", Limit: stripe.Int64(2)}}
		var got []string
		for pi, err := range s.client.V1PaymentIntents.Search(context.Background(), sp) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, pi.ID)
		}
		return got
	}
	if got := search(); len(got) != 0 {
		t.Fatalf("search right after create: want nothing indexed yet, got %v", got)
	}
	s.clock.Advance(30 * time.Second)
	got := search()
	if len(got) != 3 || got[0] != ids[2] || got[2] != ids[0] {
		t.Fatalf("search after the delay (two pages): got %v, want newest first %v", got, ids)
	}
	var err error
	for _, err = range s.client.V1PaymentIntents.Search(context.Background(), &stripe.PaymentIntentSearchParams{SearchParams: stripe.SearchParams{Query: "email:'x'"}}) {
		break
	}
	if se := stripeErr(t, err); se.HTTPStatusCode != 400 || se.Param != "query" {
		t.Fatalf("bad query: got %d %s", se.HTTPStatusCode, se.Param)
	}
}

func TestEventsList(t *testing.T) {
	s := newSim(t)
	ctx := context.Background()
	cust, pm := s.customer("pm_card_visa")
	ok1, _ := s.charge(cust, pm, "k1", 1000)
	s.clock.Advance(time.Minute)
	_, declineErr := s.charge(cust, "pm_card_visa_chargeDeclined", "k2", 1000)
	failedPI := stripeErr(t, declineErr).PaymentIntent.ID
	s.clock.Advance(time.Minute)
	ok2, _ := s.charge(cust, pm, "k3", 1000)

	collect := func(p *stripe.EventListParams) []string {
		t.Helper()
		var out []string
		for ev, err := range s.client.V1Events.List(ctx, p) {
			if err != nil {
				t.Fatal(err)
			}
			var obj struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(ev.Data.Raw, &obj); err != nil {
				t.Fatal(err)
			}
			out = append(out, string(ev.Type)+":"+obj.ID)
		}
		return out
	}
	got := collect(&stripe.EventListParams{Types: stripe.StringSlice([]string{eventPISucceeded, eventPIFailed})})
	want := []string{eventPISucceeded + ":" + ok2.ID, eventPIFailed + ":" + failedPI, eventPISucceeded + ":" + ok1.ID}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("types[]: got %v want %v", got, want)
	}
	if got := collect(&stripe.EventListParams{Type: stripe.String("payment_intent.*")}); len(got) != 6 {
		t.Fatalf("type wildcard: want 6 (created+outcome ×3), got %v", got)
	}
	for ev, err := range s.client.V1Events.List(ctx, &stripe.EventListParams{Type: stripe.String("payment_intent.created")}) {
		if err != nil || ev.Data.Object["status"] != "requires_confirmation" || ev.Data.Object["latest_charge"] != nil {
			t.Fatalf("created event shows the PaymentIntent before confirmation: %v %v", ev.Data.Object["status"], err)
		}
	}
	// No webhook endpoint: no event is in either delivery set.
	if got := collect(&stripe.EventListParams{DeliverySuccess: stripe.Bool(false)}); len(got) != 0 {
		t.Fatalf("delivery_success=false without endpoints: %v", got)
	}
	// The 30-day window.
	s.clock.Advance(30*24*time.Hour - 90*time.Second)
	if got := collect(&stripe.EventListParams{Type: stripe.String(eventPISucceeded)}); len(got) != 1 || got[0] != eventPISucceeded+":"+ok2.ID {
		t.Fatalf("after 30 days: want only the newest, got %v", got)
	}
	// Retrieve follows the same window.
	var newest, oldest string
	for ev, err := range s.client.V1Events.List(ctx, &stripe.EventListParams{Type: stripe.String(eventPISucceeded)}) {
		if err != nil {
			t.Fatal(err)
		}
		newest = ev.ID
	}
	for _, rec := range s.srv.st.events {
		if rec.Event.Type == "payment_intent.created" && rec.Event.Created == ok1.Created {
			oldest = rec.Event.ID
		}
	}
	if ev, err := s.client.V1Events.Retrieve(ctx, newest, nil); err != nil || ev.ID != newest {
		t.Fatalf("retrieve in window: %v", err)
	}
	if _, err := s.client.V1Events.Retrieve(ctx, oldest, nil); stripeErr(t, err).HTTPStatusCode != 404 {
		t.Fatal("retrieve past 30 days: want 404")
	}
	p := &stripe.EventListParams{Type: stripe.String("x"), Types: stripe.StringSlice([]string{"y"})}
	for _, err := range s.client.V1Events.List(ctx, p) {
		if se := stripeErr(t, err); se.HTTPStatusCode != 400 {
			t.Fatalf("type and types: got %d", se.HTTPStatusCode)
		}
		break
	}
}
