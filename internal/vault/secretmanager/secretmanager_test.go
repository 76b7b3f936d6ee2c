package secretmanager_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/api/option"

	"billrun.dev/billrun/internal/vault/secretmanager"
)

const name = "projects/p/secrets/stripe-secret-key/versions/latest"

// fakeAPI answers Secret Manager's REST access call with value, or status.
func fakeAPI(t *testing.T, value *atomic.Value, status int, calls *atomic.Int64) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path != "/v1/"+name+":access" {
			t.Errorf("path %s", r.URL.Path)
		}
		if status != http.StatusOK {
			w.WriteHeader(status)
			fmt.Fprint(w, `{"error":{"code":403,"message":"Permission denied","status":"PERMISSION_DENIED"}}`)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"name": name, "payload": map[string]any{
			"data": base64.StdEncoding.EncodeToString([]byte(value.Load().(string))),
		}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestSource(t *testing.T) {
	var value atomic.Value
	value.Store("sk_test_first\n")
	var calls atomic.Int64
	url := fakeAPI(t, &value, http.StatusOK, &calls)
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	src, err := secretmanager.New(t.Context(), name, time.Minute, func() time.Time { return now },
		option.WithEndpoint(url), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name    string
		advance time.Duration
		rotate  string
		want    string
		calls   int64
	}{
		{"first read, trailing newline trimmed", 0, "", "sk_test_first", 1},
		{"within the TTL: cached", 30 * time.Second, "sk_test_second", "sk_test_first", 1},
		{"after the TTL: the rotated value", 31 * time.Second, "", "sk_test_second", 2},
	}
	for _, s := range steps {
		now = now.Add(s.advance)
		if s.rotate != "" {
			value.Store(s.rotate)
		}
		got, err := src.StripeSecret(t.Context())
		if err != nil || got != s.want || calls.Load() != s.calls {
			t.Errorf("%s: got %q, %v after %d calls; want %q after %d", s.name, got, err, calls.Load(), s.want, s.calls)
		}
	}
	if strings.Contains(fmt.Sprintf("%v %+v %s", src, src, src), "sk_test") {
		t.Error("a printed Source shows the secret")
	}
}

func TestSource_Errors(t *testing.T) {
	var value atomic.Value
	var calls atomic.Int64
	url := fakeAPI(t, &value, http.StatusForbidden, &calls)
	src, err := secretmanager.New(t.Context(), name, 0, nil, option.WithEndpoint(url), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.StripeSecret(t.Context()); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("denied access: %v", err)
	}
	if _, err := secretmanager.New(t.Context(), "stripe-secret-key", 0, nil); err == nil {
		t.Error("a bare secret id was accepted")
	}
}
