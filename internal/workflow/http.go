package workflow

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"billrun.dev/billrun/internal/workflow/expr"
)

// The statuses and error tags each default HTTP retry predicate retries [D]
// (http.default_retry_predicate, http.default_retry_predicate_non_idempotent).
var (
	defaultRetryCodes              = []int64{429, 502, 503, 504}
	defaultRetryTags               = []string{expr.TagConnectionError, expr.TagConnectionFailedError, expr.TagTimeoutError}
	defaultRetryCodesNonIdempotent = []int64{429, 503}
	defaultRetryTagsNonIdempotent  = []string{expr.TagConnectionFailedError}
	defaultRetryMaxRetries         = int64(5)
	httpMethodsWithoutBody         = []string{"GET", "DELETE"}
	httpRequestParams              = []string{"method", "url", "headers", "body", "query", "auth", "timeout"}
)

// userAgent is sent when the workflow sets none, as Google's engine does [E].
const userAgent = "GoogleCloudWorkflows; (+https://cloud.google.com/workflows/docs)"

// addHTTP registers http.get/post/put/patch/delete/request, the default
// retry predicates and the default_retry policies.
func (e *Engine) addHTTP(r *expr.Registry) {
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		var ps []expr.Param
		for _, name := range httpRequestParams[1:] {
			if name == "body" && slices.Contains(httpMethodsWithoutBody, m) {
				continue
			}
			ps = append(ps, expr.Param{Name: name, Optional: name != "url"})
		}
		method := m
		must(r.AddFunc(&expr.Func{Name: "http." + strings.ToLower(m), Params: ps, Blocking: true,
			Call: func(ctx context.Context, args []any) (any, error) {
				req := map[string]any{"method": method}
				for i, p := range ps {
					req[p.Name] = args[i]
				}
				return e.httpRequest(ctx, req)
			}}))
	}
	var ps []expr.Param
	for _, name := range httpRequestParams {
		ps = append(ps, expr.Param{Name: name, Optional: name != "url" && name != "method"})
	}
	must(r.AddFunc(&expr.Func{Name: "http.request", Params: ps, Blocking: true,
		Call: func(ctx context.Context, args []any) (any, error) {
			req := map[string]any{}
			for i, p := range ps {
				req[p.Name] = args[i]
			}
			return e.httpRequest(ctx, req)
		}}))
	predicate := func(name string, codes []int64, tags []string) {
		must(r.AddFunc(&expr.Func{Name: name, Params: []expr.Param{{Name: "e"}},
			Call: func(_ context.Context, args []any) (any, error) { return retryable(args[0], codes, tags), nil }}))
	}
	predicate("http.default_retry_predicate", defaultRetryCodes, defaultRetryTags)
	predicate("http.default_retry_predicate_non_idempotent", defaultRetryCodesNonIdempotent, defaultRetryTagsNonIdempotent)
	policy := func(pred string) map[string]any {
		return map[string]any{
			"predicate":   expr.FuncRef{Name: pred},
			"max_retries": defaultRetryMaxRetries,
			"backoff": map[string]any{
				"initial_delay": expr.DefaultBackoffInitialDelay,
				"max_delay":     expr.DefaultBackoffMaxDelay,
				"multiplier":    expr.DefaultBackoffMultiplier,
			},
		}
	}
	must(r.AddConst("http.default_retry", policy("http.default_retry_predicate")))
	must(r.AddConst("http.default_retry_non_idempotent", policy("http.default_retry_predicate_non_idempotent")))
}

// retryable is a default retry predicate: an error map whose code is one of
// codes or whose tags include one of tags. Other values (a raised string, a map
// without code) are not retried.
func retryable(e any, codes []int64, tags []string) bool {
	m, ok := e.(map[string]any)
	if !ok {
		return false
	}
	if code, ok := m["code"].(int64); ok && slices.Contains(codes, code) {
		return true
	}
	if ts, ok := m["tags"].([]any); ok {
		for _, t := range ts {
			if s, ok := t.(string); ok && slices.Contains(tags, s) {
				return true
			}
		}
	}
	return false
}

func must(err error) {
	if err != nil {
		panic(err) // a duplicate registration is a bug in this package
	}
}

// httpRequest performs one http.* call: req holds method, url, headers, body,
// query, auth and timeout as the workflow gave them.
func (e *Engine) httpRequest(ctx context.Context, req map[string]any) (any, error) {
	method, ok := req["method"].(string)
	if !ok {
		return nil, expr.TypeError("http.request: method must be a string")
	}
	rawURL, ok := req["url"].(string)
	if !ok {
		return nil, expr.TypeError("http: url must be a string, got %s", expr.TypeName(req["url"]))
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, expr.ValueError("http: invalid url %q", rawURL)
	}
	if err := addQuery(u, req["query"]); err != nil {
		return nil, err
	}
	timeout := DefaultHTTPTimeout
	if t := req["timeout"]; t != nil {
		secs, ok := toFloat(t)
		if !ok || secs <= 0 {
			return nil, expr.TypeError("http: timeout must be a positive number of seconds")
		}
		if d := time.Duration(secs * float64(time.Second)); d > MaxHTTPTimeout {
			return nil, expr.ValueError("http: timeout %s exceeds the maximum of %d seconds", expr.Display(t), int(MaxHTTPTimeout.Seconds()))
		} else {
			timeout = d
		}
	}
	headers := http.Header{}
	if h := req["headers"]; h != nil {
		hm, ok := h.(map[string]any)
		if !ok {
			return nil, expr.TypeError("http: headers must be a map")
		}
		for k, v := range hm {
			headers.Set(k, expr.Display(v))
		}
	}
	body, err := encodeBody(headers, req["body"])
	if err != nil {
		return nil, err
	}
	if a := req["auth"]; a != nil {
		am, ok := a.(map[string]any)
		typ, _ := am["type"].(string)
		if !ok || typ != "OIDC" && typ != "OAuth2" {
			return nil, expr.ValueError("http: auth.type must be OIDC or OAuth2")
		}
		headers.Set("Authorization", "Bearer "+FakeOIDCToken)
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(rctx, method, u.String(), body)
	if err != nil {
		return nil, expr.ValueError("http: %v", err)
	}
	if headers.Get("User-Agent") == "" {
		headers.Set("User-Agent", userAgent)
	}
	hreq.Header = headers
	resp, err := e.opts.HTTPClient.Do(hreq)
	if err != nil {
		return nil, httpFailure(ctx, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxHTTPResponseBytes+1))
	if err != nil {
		return nil, httpFailure(ctx, err)
	}
	if len(data) > MaxHTTPResponseBytes {
		return nil, expr.NewError(expr.TagResultSizeLimitExceededError, "HTTP response exceeds the limit of %d bytes", MaxHTTPResponseBytes)
	}
	rh := make(map[string]any, len(resp.Header))
	for k, vs := range resp.Header {
		rh[k] = strings.Join(vs, ", ")
	}
	out := map[string]any{"code": int64(resp.StatusCode), "headers": rh, "body": decodeBody(resp.Header.Get("Content-Type"), data)}
	if resp.StatusCode >= 400 {
		he := expr.NewError(expr.TagHttpError, "HTTP server responded with error code %d", resp.StatusCode)
		he.Extra = out
		return nil, he
	}
	return out, nil
}

// addQuery URL-encodes a query map into u (a list value repeats the key).
func addQuery(u *url.URL, q any) error {
	if q == nil {
		return nil
	}
	qm, ok := q.(map[string]any)
	if !ok {
		return expr.TypeError("http: query must be a map")
	}
	vals := u.Query()
	for k, v := range qm {
		if list, ok := v.([]any); ok {
			for _, item := range list {
				vals.Add(k, expr.Display(item))
			}
			continue
		}
		vals.Add(k, expr.Display(v))
	}
	u.RawQuery = vals.Encode()
	return nil
}

// encodeBody encodes a request body: bytes as is, a string as is when a
// non-JSON Content-Type is set, a map form-encoded for
// application/x-www-form-urlencoded, anything else as JSON (setting
// Content-Type: application/json; charset=utf-8 when none is set).
func encodeBody(h http.Header, body any) (io.Reader, error) {
	if body == nil {
		return nil, nil
	}
	ct := h.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	switch b := body.(type) {
	case []byte:
		return bytes.NewReader(b), nil
	case string:
		if ct != "" && !isJSONType(mt) {
			return strings.NewReader(b), nil
		}
	case map[string]any:
		if mt == "application/x-www-form-urlencoded" {
			form := url.Values{}
			for k, v := range b {
				form.Set(k, expr.Display(v))
			}
			return strings.NewReader(form.Encode()), nil
		}
	}
	data, err := expr.EncodeJSON(body)
	if err != nil {
		return nil, expr.TypeError("http: body cannot be encoded as JSON: %v", err)
	}
	if ct == "" {
		h.Set("Content-Type", "application/json; charset=utf-8")
	}
	return bytes.NewReader(data), nil
}

func isJSONType(mt string) bool {
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// decodeBody turns a response body into a value: JSON parsed, UTF-8 text as a
// string, anything else as bytes.
func decodeBody(ct string, data []byte) any {
	mt, _, _ := mime.ParseMediaType(ct)
	if isJSONType(mt) && len(data) > 0 {
		if v, err := expr.DecodeJSON(data); err == nil {
			return v
		}
	}
	if utf8.Valid(data) {
		return string(data)
	}
	return data
}

// httpFailure maps a transport error to Google's tags: TimeoutError,
// ConnectionFailedError (never connected) or ConnectionError (broken after
// connecting). None of them has a code key.
func httpFailure(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err() // the execution was cancelled, not the request
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return expr.NewError(expr.TagTimeoutError, "HTTP request timed out: %v", err)
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return expr.NewError(expr.TagConnectionFailedError, "connection failed: %v", err)
	}
	return expr.NewError(expr.TagConnectionError, "connection error: %v", err)
}
