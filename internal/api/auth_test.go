package api

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"golang.org/x/oauth2"
)

// TestServerlessAuth: Charge's requests to the proxy carry the function's ID
// token as X-Serverless-Authorization and keep Authorization (the key's
// credential) as stripe-go set it.
func TestServerlessAuth(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	defer srv.Close()
	hc := &http.Client{Transport: serverlessAuth{base: http.DefaultTransport, tokens: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "id-token"})}}
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/payment_intents", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer vk_credential")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got.Get("X-Serverless-Authorization") != "Bearer id-token" || got.Get("Authorization") != "Bearer vk_credential" {
		t.Errorf("headers %v", got)
	}
	if req.Header.Get("X-Serverless-Authorization") != "" {
		t.Errorf("the caller's request was modified")
	}
}
