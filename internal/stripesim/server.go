package stripesim

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Clock tells the simulator's time. Idempotency expiry, the events window,
// search lag, rate limiting and webhook retries all follow it, so tests can
// jump a day without sleeping.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// ManualClock is a Clock that moves only when told to. Safe for concurrent use.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a clock stopped at t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{now: t} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// APIVersion is the API version the simulator speaks and stamps on events:
// stripe-go v82's.
const APIVersion = "2025-08-27.basil"

// Defaults for Config's zero values.
const (
	// DefaultWebhookTimeout bounds one webhook delivery attempt.
	DefaultWebhookTimeout = 10 * time.Second
	// maxIdempotencyKeyLen is Stripe's limit on Idempotency-Key.
	maxIdempotencyKeyLen = 255
	// maxRequestLog is how many requests Requests remembers.
	maxRequestLog = 100_000
	// pruneEvery is how many commits pass between sweeps of expired keys.
	pruneEvery = 1000
)

// DefaultWebhookRetries are the delays between webhook attempts, on the
// simulator's clock: three retries over a few hours, like a Stripe sandbox.
func DefaultWebhookRetries() []time.Duration {
	return []time.Duration{5 * time.Minute, 30 * time.Minute, 2 * time.Hour}
}

// Config configures a Server. The zero value is an in-memory simulator with no
// faults, no webhooks and the system clock.
type Config struct {
	// Clock is the simulator's time; nil means the system clock.
	Clock Clock
	// DataDir, when set, keeps state in DataDir/stripesim.jsonl across
	// restarts; "" keeps it in memory.
	DataDir string
	// APIKey, when set, is the only key accepted; "" accepts any test-mode
	// secret or restricted key (sk_test_…, rk_test_…).
	APIKey string
	// Faults are injected into requests; the zero value injects none.
	Faults Faults
	// Seed makes fault injection reproducible.
	Seed int64
	// SearchDelay is how long after creation a PaymentIntent becomes visible to
	// search (Stripe's search index lags writes); 0 means at once.
	SearchDelay time.Duration
	// WebhookURL receives payment_intent.succeeded and
	// payment_intent.payment_failed events; "" delivers none.
	WebhookURL string
	// WebhookSecret signs deliveries (whsec_…). Never logged.
	WebhookSecret string
	// WebhookClient sends deliveries; nil means a client with
	// DefaultWebhookTimeout.
	WebhookClient *http.Client
	// WebhookRetries are the delays before each retry of a failed delivery;
	// nil means DefaultWebhookRetries, empty means no retry.
	WebhookRetries []time.Duration
	// Logger receives one line per request; nil discards.
	Logger *slog.Logger
}

// Server is the simulator. It is an http.Handler.
type Server struct {
	cfg    Config
	clock  Clock
	log    *slog.Logger
	router []route
	hook   *http.Client
	retry  []time.Duration
	closed chan struct{}

	limiter rateLimiter
	active  atomic.Int64 // API requests being handled, for ConcurrencyLimit

	mu       sync.Mutex // guards everything below
	st       *state
	j        *journal
	faults   Faults
	inflight map[string]bool
	attempts map[string]int
	requests []RequestRecord
	commits  int
	isClosed bool

	deliverMu sync.Mutex // one webhook sweep at a time; guards sweeps
	sweeps    int
}

// Validate reports every problem with the configuration at once.
func (cfg Config) Validate() error {
	var errs []error
	if err := cfg.Faults.Validate(); err != nil {
		errs = append(errs, err)
	}
	if cfg.SearchDelay < 0 {
		errs = append(errs, errors.New("SearchDelay must not be negative"))
	}
	if cfg.WebhookURL != "" {
		if u, err := url.Parse(cfg.WebhookURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("WebhookURL %q: want an http(s) URL", cfg.WebhookURL))
		}
		if cfg.WebhookSecret == "" {
			errs = append(errs, errors.New("WebhookURL needs a WebhookSecret to sign deliveries"))
		}
	}
	for _, d := range cfg.WebhookRetries {
		if d < 0 {
			errs = append(errs, errors.New("WebhookRetries must not be negative"))
			break
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("stripesim: config: %w", errors.Join(errs...))
	}
	return nil
}

// New returns a simulator, loading DataDir's state when set.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:      cfg,
		clock:    cfg.Clock,
		log:      cfg.Logger,
		hook:     cfg.WebhookClient,
		retry:    cfg.WebhookRetries,
		closed:   make(chan struct{}),
		faults:   cfg.Faults,
		inflight: map[string]bool{},
		attempts: map[string]int{},
	}
	if s.clock == nil {
		s.clock = systemClock{}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.hook == nil {
		s.hook = &http.Client{Timeout: DefaultWebhookTimeout}
	}
	if s.retry == nil {
		s.retry = DefaultWebhookRetries()
	}
	if cfg.DataDir != "" {
		j, st, err := openJournal(cfg.DataDir, s.clock.Now())
		if err != nil {
			return nil, err
		}
		s.j, s.st = j, st
	} else {
		s.st = newState()
	}
	s.router = s.routes()
	return s, nil
}

// Close stops the server's work and closes its state file. A slow commit in
// progress is cut short and does not commit.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isClosed {
		return nil
	}
	s.isClosed = true
	close(s.closed)
	return s.j.close()
}

// SetFaults replaces the injected faults, for scenarios that change mid-run.
// Invalid faults are refused and the old ones kept.
func (s *Server) SetFaults(f Faults) error {
	if err := f.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = f
	return nil
}

// Ledger returns every successful payment, in the order they happened.
func (s *Server) Ledger() []Payment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Payment(nil), s.st.ledger...)
}

// RequestRecord is one request as the simulator saw it: what makes the
// client's retries and its keys observable.
type RequestRecord struct {
	Time      time.Time `json:"time"`
	RequestID string    `json:"request_id"`
	Method    string    `json:"method"`
	Path      string    `json:"path"`
	// IdempotencyKey is the request's key ("" for none or for GETs).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// SDKGeneratedKey is true when the key has the shape stripe-go invents
	// when the caller set none (<unix nanos>_<6 chars>).
	SDKGeneratedKey bool `json:"sdk_generated_key,omitempty"`
	// Attempt counts requests with the same identity (key, or method and URL),
	// from 1.
	Attempt int `json:"attempt"`
	// Status is the HTTP status answered: 0 when the connection was dropped
	// or a slow commit was cut short by Close, 499 when the caller left
	// during injected latency.
	Status   int    `json:"status"`
	Replayed bool   `json:"replayed,omitempty"`
	Fault    string `json:"fault,omitempty"`
}

// Requests returns the request log, oldest first.
func (s *Server) Requests() []RequestRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]RequestRecord(nil), s.requests...)
}

var sdkKeyPattern = regexp.MustCompile(`^[0-9]{16,20}_[A-Za-z0-9_-]{6}$`)

// call is one API request being handled.
type call struct {
	r       *http.Request
	p       params
	args    []string // path parameters
	now     time.Time
	reqID   string
	idemKey string
}

// result is what a handler produces: a body or an error, and the state change
// to commit with it.
type result struct {
	status int
	body   any
	err    *apiError
	change *batch
}

func success(body any, change *batch) result {
	return result{status: http.StatusOK, body: body, change: change}
}

func failure(err *apiError) result { return result{status: err.status, err: err} }

func failureWith(err *apiError, change *batch) result {
	return result{status: err.status, err: err, change: change}
}

// route is one endpoint.
type route struct {
	method  string
	pattern []string // path segments; "*" matches one id
	schema  schema
	handle  func(c *call) result
}

func (rt route) match(method string, segs []string) ([]string, bool) {
	if rt.method != method || len(rt.pattern) != len(segs) {
		return nil, false
	}
	var args []string
	for i, p := range rt.pattern {
		switch {
		case p == "*":
			if segs[i] == "" {
				return nil, false
			}
			args = append(args, segs[i])
		case p != segs[i]:
			return nil, false
		}
	}
	return args, true
}

// maxBodyBytes bounds a request body; Stripe's own limit is of this order.
const maxBodyBytes = 1 << 20

// exchange is one request and its answer.
type exchange struct {
	w   http.ResponseWriter
	c   *call
	rec *RequestRecord
	// log records rec in the server's request log, once.
	log func(RequestRecord)
	// logged is set once rec is in the log.
	logged bool
}

// finish puts the request in the log, once.
func (x *exchange) finish() {
	if !x.logged {
		x.logged = true
		x.log(*x.rec)
	}
}

// hangUp closes the connection without an answer. The request is logged
// first: the client may resend at once, and a reader of the log must never see
// the resend without the request it repeats.
func (x *exchange) hangUp() {
	x.finish()
	dropConnection(x.w)
}

func (x *exchange) respond(status int, body []byte) {
	x.rec.Status = status
	x.w.Header().Set("Content-Type", "application/json")
	x.w.WriteHeader(status)
	x.w.Write(body)
}

func (x *exchange) reject(e *apiError) {
	x.respond(e.status, x.errorBody(e))
}

// errorBody renders e for this request, setting its headers.
func (x *exchange) errorBody(e *apiError) []byte {
	e.RequestLogURL = requestLogURL(x.c.reqID)
	for k, v := range e.extraHeaders {
		x.w.Header()[k] = v
	}
	return mustJSON(e.body())
}

// drop closes the connection without an answer (RequestRecord.Status 0).
func (x *exchange) drop() {
	x.rec.Fault, x.rec.Status = faultDropAfter, 0
	x.hangUp()
}

// ServeHTTP handles one request: latency, auth, rate limiting, front-door
// faults, routing, parameter validation, idempotency, execution and commit, in
// Stripe's order.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/_sim/") {
		s.serveSim(w, r)
		return
	}
	c := &call{r: r, now: s.clock.Now(), reqID: newID("req")}
	if r.Method == http.MethodPost {
		c.idemKey = strings.TrimSpace(r.Header.Get("Idempotency-Key"))
	}
	rawBody, readErr := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if readErr == nil && len(rawBody) > maxBodyBytes {
		readErr = fmt.Errorf("body over %d bytes", maxBodyBytes)
	}

	// Faults are drawn per attempt of an identity: the key, or the request.
	identity := "key " + c.idemKey
	if c.idemKey == "" {
		identity = r.Method + " " + r.URL.RequestURI() + " " + string(rawBody)
	}
	s.mu.Lock()
	s.attempts[identity]++
	attempt := s.attempts[identity]
	faults := s.faults
	s.mu.Unlock()
	dec := faults.decide(s.cfg.Seed, identity, attempt)

	rec := &RequestRecord{
		Time: c.now, RequestID: c.reqID, Method: r.Method, Path: r.URL.Path,
		IdempotencyKey: c.idemKey, SDKGeneratedKey: sdkKeyPattern.MatchString(c.idemKey), Attempt: attempt,
	}
	x := &exchange{w: w, c: c, rec: rec, log: s.record}
	defer x.finish()
	h := w.Header()
	h.Set("Request-Id", c.reqID)
	h.Set("Stripe-Version", APIVersion)
	if c.idemKey != "" {
		h.Set("Idempotency-Key", c.idemKey)
	}
	if dec.latency > 0 && !s.sleep(r.Context(), dec.latency) {
		rec.Status = 499 // the caller left, or Close: answer nothing
		x.hangUp()
		return
	}
	defer s.active.Add(-1)
	if s.frontDoor(x, dec, faults, s.active.Add(1)) {
		return
	}

	rt, args := s.findRoute(r.Method, r.URL.Path)
	if rt == nil {
		x.reject(apiErrorf(http.StatusNotFound, errTypeInvalidRequest, "",
			"Unrecognized request URL (%s: %s). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.", r.Method, r.URL.Path))
		return
	}
	c.args = args
	p, e := parseParams(r, rawBody, readErr, rt.schema)
	if e != nil {
		x.reject(e)
		return
	}
	c.p = p
	if len(c.idemKey) > maxIdempotencyKeyLen {
		x.reject(invalidRequest(fmt.Sprintf("Invalid Idempotency-Key: keys must be at most %d characters long.", maxIdempotencyKeyLen), "", "idempotency_key_too_long"))
		return
	}

	var fingerprint string
	if c.idemKey != "" {
		fingerprint = string(mustJSON(p))
		stored, e := s.beginIdempotent(c, fingerprint)
		if e != nil {
			x.reject(e)
			return
		}
		if stored != nil {
			rec.Replayed = true
			h.Set("Idempotent-Replayed", "true")
			h.Set("Original-Request", stored.RequestID)
			if dec.dropAfter {
				x.drop()
				return
			}
			x.respond(stored.Status, stored.Body)
			return
		}
	}
	s.execute(x, rt, fingerprint, dec, faults.SlowCommitDelay)
}

// frontDoor applies what Stripe does before an endpoint runs: authentication,
// the rate limiter and the front-door faults. Nothing it refuses is stored
// under an idempotency key. It reports whether it answered.
// active counts the requests being handled, this one included.
func (s *Server) frontDoor(x *exchange, dec decision, faults Faults, active int64) bool {
	if e := s.authenticate(x.c.r); e != nil {
		x.reject(e)
		return true
	}
	limited := func(reason string) {
		x.rec.Fault = faultRateLimit
		e := apiErrorf(http.StatusTooManyRequests, errTypeInvalidRequest, "rate_limit",
			"Request rate limit exceeded. You can learn more about rate limits here https://stripe.com/docs/rate-limits.")
		x.reject(withHeader(e, "Stripe-Rate-Limited-Reason", reason))
	}
	switch {
	case faults.ConcurrencyLimit > 0 && active > int64(faults.ConcurrencyLimit):
		limited("global-concurrency")
	case !s.limiter.allow(x.c.now, faults.RateLimit):
		limited("global-rate")
	case dec.gateway503:
		x.rec.Fault, x.rec.Status = faultGateway503, http.StatusServiceUnavailable
		x.w.Header().Set("Content-Type", "text/html")
		x.w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(x.w, "<html><body><h1>503 Service Unavailable</h1></body></html>\n")
	case dec.lockTimeout:
		x.rec.Fault = faultLockTimeout
		x.reject(apiErrorf(http.StatusTooManyRequests, errTypeInvalidRequest, "lock_timeout",
			"This object cannot be accessed right now because another API request or Stripe process is currently accessing it. If you see this error intermittently, retry the request."))
	default:
		return false
	}
	return true
}

// execute runs the endpoint with the commit-time faults, commits its change
// together with the result stored under the key, and answers.
func (s *Server) execute(x *exchange, rt *route, fingerprint string, dec decision, slowDelay time.Duration) {
	var res result
	if dec.err500 {
		x.rec.Fault = fault500Before
		res = failure(internalError())
	} else {
		res = rt.handle(x.c)
		if dec.slowCommit && x.c.r.Method == http.MethodPost {
			x.rec.Fault = faultSlowCommit
			// The commit goes on even if the caller gives up.
			if !s.sleep(context.Background(), slowDelay) {
				// Closed mid-commit: nothing happened, as in a crash.
				s.endIdempotent(x.c.idemKey)
				x.hangUp()
				return
			}
		}
		if dec.err500After {
			x.rec.Fault = fault500After
			res = failureWith(internalError(), res.change)
		}
	}
	body := mustJSON(res.body)
	if res.err != nil {
		body = x.errorBody(res.err)
	}
	if err := s.commit(x.c, fingerprint, res.status, body, res.change); err != nil {
		s.log.Error("stripesim: commit failed", "request_id", x.c.reqID, "err", err)
		x.reject(apiErrorf(http.StatusInternalServerError, errTypeAPI, "", "The simulator could not save its state."))
		return
	}
	if dec.dropAfter {
		x.drop()
		return
	}
	x.respond(res.status, body)
}

// internalError is Stripe's JSON 500.
func internalError() *apiError {
	return apiErrorf(http.StatusInternalServerError, errTypeAPI, "",
		"Sorry, something went wrong. We've already been notified of the problem, but if you need any help, you can reach us at support.stripe.com/contact.")
}

func requestLogURL(reqID string) string {
	return "https://dashboard.stripe.com/test/logs/" + reqID
}

func (s *Server) record(rec RequestRecord) {
	s.log.Info("stripesim request", "method", rec.Method, "path", rec.Path, "status", rec.Status,
		"attempt", rec.Attempt, "replayed", rec.Replayed, "fault", rec.Fault, "request_id", rec.RequestID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) >= maxRequestLog {
		s.requests = s.requests[len(s.requests)-maxRequestLog/2:]
	}
	s.requests = append(s.requests, rec)
}

// sleep waits d of real time; false if ctx ended or the server closed first.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.closed:
		return false
	}
}

// dropConnection closes the connection without an answer, as when a response
// is lost after Stripe committed.
func dropConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler) // HTTP/2 or a recorder: abort the stream instead
}

func (s *Server) authenticate(r *http.Request) *apiError {
	var key string
	if auth := r.Header.Get("Authorization"); strings.HasPrefix(auth, "Bearer ") {
		key = strings.TrimSpace(strings.TrimPrefix(auth, "Bearer "))
	} else if user, _, ok := r.BasicAuth(); ok {
		key = user
	}
	if key == "" {
		return apiErrorf(http.StatusUnauthorized, errTypeInvalidRequest, "",
			"You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY'). See https://stripe.com/docs/api#authentication for details, or we can help at https://support.stripe.com/.")
	}
	valid := key == s.cfg.APIKey
	if s.cfg.APIKey == "" {
		valid = strings.HasPrefix(key, "sk_test_") || strings.HasPrefix(key, "rk_test_")
	}
	if !valid {
		return apiErrorf(http.StatusUnauthorized, errTypeInvalidRequest, "", "Invalid API Key provided: %s", redactKey(key))
	}
	return nil
}

// redactKey shows a key the way Stripe's errors do: a prefix and the last four.
func redactKey(k string) string {
	if len(k) <= 12 {
		return strings.Repeat("*", len(k))
	}
	return k[:8] + strings.Repeat("*", len(k)-12) + k[len(k)-4:]
}

func (s *Server) findRoute(method, path string) (*route, []string) {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i := range s.router {
		if args, ok := s.router[i].match(method, segs); ok {
			return &s.router[i], args
		}
	}
	return nil, nil
}

// parseParams reads a request's parameters: the query for GET, the
// form-encoded body (and any query) for POST.
func parseParams(r *http.Request, body []byte, readErr error, sc schema) (params, *apiError) {
	if readErr != nil {
		return nil, invalidRequest("Could not read the request body.", "", "")
	}
	raw := r.URL.RawQuery
	if r.Method == http.MethodPost && len(body) > 0 {
		ct := r.Header.Get("Content-Type")
		if ct != "" && !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
			return nil, invalidRequest("Invalid request: the body must be form-encoded (application/x-www-form-urlencoded).", "", "")
		}
		if raw != "" {
			raw += "&"
		}
		raw += string(body)
	}
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return nil, invalidRequest("Invalid request: the parameters could not be decoded.", "", "")
	}
	tree, e := parseForm(vals, formKeys(raw))
	if e != nil {
		return nil, e
	}
	return sc.validate(tree)
}

// beginIdempotent looks a key up. It returns the stored result to replay, or
// marks the key in flight and returns nil; or an error for a key in use or
// reused with other parameters. Neither error is stored, as in Stripe.
func (s *Server) beginIdempotent(c *call, fingerprint string) (*idemRecord, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight[c.idemKey] {
		e := apiErrorf(http.StatusConflict, errTypeInvalidRequest, "idempotency_key_in_use",
			"There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through): %s. Please try again later.", c.idemKey)
		return nil, withHeader(e, "Stripe-Should-Retry", "true")
	}
	if rec := s.st.idem[c.idemKey]; rec != nil && c.now.Sub(rec.CreatedAt) < idempotencyTTL {
		if rec.Method != c.r.Method || rec.Path != c.r.URL.Path || rec.Fingerprint != fingerprint {
			return nil, apiErrorf(http.StatusBadRequest, errTypeIdempotency, "",
				"Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '%s' if you meant to execute a different request.", c.idemKey)
		}
		return rec, nil
	}
	s.inflight[c.idemKey] = true
	return nil, nil
}

func (s *Server) endIdempotent(key string) {
	if key == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inflight, key)
}

// commit journals and applies a request's change together with its stored
// idempotent result, in one write, and releases the key.
func (s *Server) commit(c *call, fingerprint string, status int, body []byte, change *batch) error {
	b := &batch{}
	if change != nil {
		*b = *change
	}
	if c.idemKey != "" {
		b.Idem = append(b.Idem, idemRecord{
			Key: c.idemKey, Method: c.r.Method, Path: c.r.URL.Path, Fingerprint: fingerprint,
			Status: status, Body: body, RequestID: c.reqID, CreatedAt: c.now,
		})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inflight, c.idemKey)
	if err := s.persistLocked(b); err != nil {
		return err
	}
	if s.commits++; s.commits%pruneEvery == 0 {
		s.st.pruneIdempotency(c.now)
	}
	return nil
}

// errClosed: the server was closed; nothing more is saved.
var errClosed = errors.New("stripesim: server closed")

// persistLocked journals a change, then applies it. Called with s.mu held.
func (s *Server) persistLocked(b *batch) error {
	if s.isClosed {
		return errClosed
	}
	if err := s.j.append(b); err != nil {
		return err
	}
	s.st.apply(b)
	return nil
}

// serveSim serves the simulator's own endpoints: the ledger and request log,
// for tools that talk to a running simulator.
func (s *Server) serveSim(w http.ResponseWriter, r *http.Request) {
	if e := s.authenticate(r); e != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(e.status)
		w.Write(mustJSON(e.body()))
		return
	}
	var body any
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/_sim/ledger":
		body = map[string]any{"object": "list", "data": nonNil(s.Ledger())}
	case r.Method == http.MethodGet && r.URL.Path == "/_sim/requests":
		body = map[string]any{"object": "list", "data": nonNil(s.Requests())}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(mustJSON(body))
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("stripesim: encode response: %v", err)) // our own types always encode
	}
	return b
}

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newID returns a Stripe-looking id: prefix, underscore, 24 random characters.
func newID(prefix string) string {
	var b [24]byte
	rand.Read(b[:])
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return prefix + "_" + string(b[:])
}
