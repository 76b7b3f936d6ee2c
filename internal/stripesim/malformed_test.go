package stripesim

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestMalformedRequestsChangeNothing sends what stripe-go would not, and
// checks Stripe's error shapes and that no state (not even the idempotency
// key) is touched.
func TestMalformedRequestsChangeNothing(t *testing.T) {
	s := newSim(t)
	cust, pm := s.customer("pm_card_visa")
	good := func() url.Values {
		return url.Values{"amount": {"1000"}, "currency": {"usd"}, "customer": {cust}, "payment_method": {pm},
			"confirm": {"true"}, "off_session": {"true"}, "metadata[period]": {"2026-10"}}
	}
	with := func(mut func(url.Values)) url.Values {
		v := good()
		mut(v)
		return v
	}
	cases := []struct {
		name, method, path, auth string
		form                     url.Values
		header                   map[string]string
		wantStatus               int
		wantCode, wantParam      string
		wantMsg                  string
	}{
		{"missing auth", "POST", "/v1/payment_intents", "", good(), nil, 401, "", "", "did not provide an API key"},
		{"live key", "POST", "/v1/payment_intents", "sk_live_0123456789abcdef", good(), nil, 401, "", "", "Invalid API Key provided: sk_live_************cdef"},
		{"unknown param", "POST", "/v1/payment_intents", testKey, with(func(v url.Values) { v.Set("colour", "red") }), nil, 400, "parameter_unknown", "colour", "Received unknown parameter: colour"},
		{"unknown nested param", "POST", "/v1/customers", testKey, url.Values{"invoice_settings[colour]": {"red"}}, nil, 400, "parameter_unknown", "invoice_settings[colour]", ""},
		{"amount not an integer", "POST", "/v1/payment_intents", testKey, with(func(v url.Values) { v.Set("amount", "10.50") }), nil, 400, "parameter_invalid_integer", "amount", "Invalid integer: 10.50"},
		{"confirm not a boolean", "POST", "/v1/payment_intents", testKey, with(func(v url.Values) { v.Set("confirm", "yes") }), nil, 400, "parameter_invalid_string", "confirm", "Invalid boolean: yes"},
		{"amount missing", "POST", "/v1/payment_intents", testKey, with(func(v url.Values) { v.Del("amount") }), nil, 400, "parameter_missing", "amount", "Missing required param: amount."},
		{"metadata not a hash", "POST", "/v1/payment_intents", testKey, with(func(v url.Values) { v.Del("metadata[period]"); v.Set("metadata", "x") }), nil, 400, "parameter_invalid_string", "metadata", ""},
		{"metadata key too long", "POST", "/v1/payment_intents", testKey, with(func(v url.Values) { v.Set("metadata["+strings.Repeat("k", 41)+"]", "x") }), nil, 400, "parameter_invalid_string", "metadata[" + strings.Repeat("k", 41) + "]", ""},
		{"off_session bad enum", "POST", "/v1/payment_intents", testKey, with(func(v url.Values) { v.Set("off_session", "sometimes") }), nil, 400, "parameter_invalid_string", "off_session", ""},
		{"limit out of range", "GET", "/v1/payment_intents", testKey, url.Values{"limit": {"101"}}, nil, 400, "parameter_invalid_integer", "limit", ""},
		{"JSON body", "POST", "/v1/payment_intents", testKey, good(), map[string]string{"Content-Type": "application/json"}, 400, "", "", "form-encoded"},
		{"unrecognized URL", "POST", "/v1/charges/x/refund_all", testKey, good(), nil, 404, "", "", "Unrecognized request URL (POST: /v1/charges/x/refund_all)"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{"Idempotency-Key": "bad-" + tc.name}
			for k, v := range tc.header {
				h[k] = v
			}
			status, body, _ := s.raw(tc.method, tc.path, tc.auth, tc.form, h)
			var got struct {
				Error struct {
					Type, Code, Param, Message string
				}
			}
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("body is not Stripe's error JSON: %s", body)
			}
			e := got.Error
			if status != tc.wantStatus || e.Type != errTypeInvalidRequest || e.Code != tc.wantCode || e.Param != tc.wantParam || !strings.Contains(e.Message, tc.wantMsg) {
				t.Fatalf("case %d: got %d %+v", i, status, e)
			}
		})
	}
	if len(s.ledger()) != 0 || len(s.srv.st.pis) != 0 || len(s.srv.st.customers) != 1 || len(s.srv.st.idem) != 2 {
		t.Fatalf("malformed requests changed state: ledger %d, PIs %d, customers %d, keys %d",
			len(s.ledger()), len(s.srv.st.pis), len(s.srv.st.customers), len(s.srv.st.idem))
	}
	// Nothing was stored under a refused request's key, so it can be reused.
	status, _, hdr := s.raw("POST", "/v1/payment_intents", testKey, good(), map[string]string{"Idempotency-Key": "bad-unknown param"})
	if status != 200 || hdr.Get("Idempotent-Replayed") != "" || len(s.ledger()) != 1 {
		t.Fatalf("reusing a refused key: %d replayed=%q", status, hdr.Get("Idempotent-Replayed"))
	}
}

func TestBasicAuthAndSimEndpoints(t *testing.T) {
	s := newSim(t)
	cust, pm := s.customer("pm_card_visa")
	if _, err := s.charge(cust, pm, "k", 1000); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", s.ts.URL+"/_sim/ledger", nil)
	req.SetBasicAuth(testKey, "") // curl -u sk_test_…:
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var led struct{ Data []Payment }
	if err := json.NewDecoder(resp.Body).Decode(&led); err != nil || len(led.Data) != 1 || led.Data[0].IdempotencyKey != "k" {
		t.Fatalf("ledger endpoint: %v %+v", err, led)
	}
	if status, _, _ := s.raw("GET", "/_sim/requests", "", nil, nil); status != 401 {
		t.Fatalf("sim endpoints need auth: got %d", status)
	}
}
