package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"

	"cloud.google.com/go/firestore"
	"golang.org/x/oauth2"
	"google.golang.org/api/idtoken"

	"billrun.dev/billrun/internal/config"
	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/store/embedded"
	"billrun.dev/billrun/internal/store/faultstore"
	"billrun.dev/billrun/internal/store/firestoredb"
	"billrun.dev/billrun/internal/vault"
	"billrun.dev/billrun/internal/vault/secretmanager"
)

// requirement is what a function needs beyond the common configuration:
// Charge holds no Stripe secret, VaultProxy alone does.
func requirement(name string) config.Requirement {
	switch name {
	case NameIssueVaultKeys:
		return config.NeedsSigningSecret
	case NameCharge:
		return config.NeedsSigningSecret | config.NeedsProxyURL
	case NameVaultProxy:
		return config.NeedsSigningSecret | config.NeedsStripeSecret
	}
	return 0
}

// Open builds every handler from a validated configuration: the store it
// names, the vault issuer, Charge's client for the proxy, and the proxy. A
// function whose own requirements (config.Require) are unmet answers 500 with
// the problem, so each deployed function needs only its own settings. close
// releases the store.
func Open(ctx context.Context, cfg config.Config, log *slog.Logger) (h *Handlers, close func() error, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b, err := openStore(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	d := Deps{
		Store: b, Logger: log, Lease: cfg.Lease, StalePending: cfg.StalePending, MaxBodyBytes: cfg.MaxBodyBytes,
		// The Stripe request gets three quarters of the window, recording the
		// answer the rest.
		AttemptWindow: cfg.StripeTimeout * 4 / 3,
	}
	if cfg.VaultSigningSecret != "" {
		d.SigningSecret = []byte(cfg.VaultSigningSecret)
		d.Issuer, err = vault.NewIssuer(vault.IssuerConfig{
			Store: b, SigningSecret: d.SigningSecret, KeyTTL: cfg.VaultKeyTTL, HistoryMultiple: cfg.VaultHistoryMultiple,
			DefaultCaps: cfg.VaultDefaultCaps, BudgetMarginPercent: cfg.VaultBudgetMarginPercent,
		})
		if err != nil {
			return nil, nil, err
		}
	}
	if cfg.VaultProxyURL != "" {
		d.ProxyURL = cfg.VaultProxyURL
		if d.ProxyClient, err = proxyClient(ctx, cfg); err != nil {
			return nil, nil, err
		}
	}
	if h, err = New(d); err != nil {
		return nil, nil, err
	}
	if cfg.Require(requirement(NameVaultProxy)) == nil {
		if h.VaultProxy, err = newProxy(ctx, cfg, b, log); err != nil {
			return nil, nil, err
		}
	}
	for name, handler := range map[string]*http.Handler{
		NameIssueVaultKeys: &h.IssueVaultKeys, NameCharge: &h.Charge, NameVaultProxy: &h.VaultProxy,
	} {
		if err := cfg.Require(requirement(name)); err != nil {
			*handler = misconfigured(name, err, log)
		}
	}
	return h, b.Close, nil
}

// misconfigured answers 500 for a function whose settings are missing, saying
// which (names of variables, never values).
func misconfigured(name string, err error, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.ErrorContext(r.Context(), name+": not configured", "error", err.Error())
		respond(w, http.StatusInternalServerError, errorBody{Error: name + " is not configured", Detail: err.Error()})
	})
}

// proxyClient is Charge's HTTP client for the proxy. In the cloud it adds the
// function's Google ID token for the proxy's URL as X-Serverless-Authorization,
// which Cloud Run checks (IAM: only Charge's identity may invoke the proxy)
// and strips, since Authorization carries the key's credential.
func proxyClient(ctx context.Context, cfg config.Config) (*http.Client, error) {
	hc := &http.Client{Timeout: cfg.StripeTimeout}
	if !cfg.VaultProxyIDToken {
		return hc, nil
	}
	ts, err := idtoken.NewTokenSource(ctx, cfg.VaultProxyURL)
	if err != nil {
		return nil, fmt.Errorf("vault proxy ID token: %w", err)
	}
	hc.Transport = serverlessAuth{base: http.DefaultTransport, tokens: ts}
	return hc, nil
}

// serverlessAuth adds an ID token as X-Serverless-Authorization.
type serverlessAuth struct {
	base   http.RoundTripper
	tokens oauth2.TokenSource
}

func (t serverlessAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	tok, err := t.tokens.Token()
	if err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, fmt.Errorf("vault proxy ID token: %w", err)
	}
	r = r.Clone(r.Context())
	r.Header.Set("X-Serverless-Authorization", "Bearer "+tok.AccessToken)
	return t.base.RoundTrip(r)
}

// newProxy builds VaultProxy: the Stripe secret from Secret Manager when
// BILLRUN_STRIPE_SECRET_NAME is set, else STRIPE_SECRET_KEY.
func newProxy(ctx context.Context, cfg config.Config, b store.Backend, log *slog.Logger) (http.Handler, error) {
	var secret vault.SecretSource = vault.StaticSecret(cfg.StripeKey)
	if cfg.StripeSecretName != "" {
		sm, err := secretmanager.New(ctx, cfg.StripeSecretName, 0, nil)
		if err != nil {
			return nil, err
		}
		secret = sm
	}
	return vault.NewProxy(vault.ProxyConfig{
		Store: b, StripeURL: cfg.StripeBaseURL, StripeSecret: secret, SigningSecret: []byte(cfg.VaultSigningSecret),
		Logger: log, UpstreamTimeout: cfg.StripeTimeout, MaxBodyBytes: cfg.MaxBodyBytes,
	})
}

// OpenVaultProxy builds VaultProxy alone from a configuration, for a process
// that serves it on its own listener at the root (the local stack). close
// releases its store.
func OpenVaultProxy(ctx context.Context, cfg config.Config, log *slog.Logger) (h http.Handler, close func() error, err error) {
	if err := cfg.Require(requirement(NameVaultProxy)); err != nil {
		return nil, nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b, err := openStore(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	if h, err = newProxy(ctx, cfg, b, log); err != nil {
		b.Close()
		return nil, nil, err
	}
	return h, b.Close, nil
}

// openStore opens the configured backend, wrapped by faultstore when
// BILLRUN_STORE_FAULTS asks for faults.
func openStore(ctx context.Context, cfg config.Config) (store.Backend, error) {
	if cfg.StoreFaults == "" {
		return openBackend(ctx, cfg)
	}
	// Validate refuses this too; checked again here because a Config built
	// in code may skip Validate, and production data must never see faults.
	if cfg.Store != config.StoreEmbedded {
		return nil, fmt.Errorf("open store: BILLRUN_STORE_FAULTS: fault injection needs the %s store, not %q", config.StoreEmbedded, cfg.Store)
	}
	plan, err := faultstore.Parse(cfg.StoreFaults)
	if err != nil {
		return nil, fmt.Errorf("open store: BILLRUN_STORE_FAULTS: %w", err)
	}
	b, err := openBackend(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return faultstore.New(b, plan), nil
}

func openBackend(ctx context.Context, cfg config.Config) (store.Backend, error) {
	switch cfg.Store {
	case config.StoreEmbedded:
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		db, err := embedded.Open(ctx, cfg.EmbeddedPath())
		if err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		return db, nil
	case config.StoreFirestore:
		// FIRESTORE_EMULATOR_HOST, when set, points the client at an emulator.
		client, err := firestore.NewClientWithDatabase(ctx, cfg.Project, cfg.Database)
		if err != nil {
			return nil, fmt.Errorf("open store: firestore: %w", err)
		}
		return firestoredb.NewFromClient(client), nil
	default:
		return nil, fmt.Errorf("open store: unsupported store %q", cfg.Store)
	}
}

// Lazy builds the handlers from the environment on the first request, as Cloud
// Functions instances should (init must not dial anything or fail): a broken
// configuration is answered 500 and logged on each request until fixed,
// instead of crashing the instance in a loop. It serves VaultProxy too, by
// name, for a server that mounts it at the root.
type Lazy struct {
	getenv func(string) string
	logs   io.Writer
	mu     sync.Mutex
	h      *Handlers
}

// NewLazy returns a Lazy reading the environment through getenv and logging
// to logs (os.Stderr in a function: Cloud Logging reads it).
func NewLazy(getenv func(string) string, logs io.Writer) *Lazy {
	return &Lazy{getenv: getenv, logs: logs}
}

// Handler returns the named function's handler.
func (l *Lazy) Handler(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h, err := l.handlers()
		if err != nil {
			respond(w, http.StatusInternalServerError, errorBody{Error: "billrun is not configured", Detail: err.Error()})
			return
		}
		handler, ok := h.ByName()[name]
		if !ok {
			respond(w, http.StatusInternalServerError, errorBody{Error: "billrun has no function " + name})
			return
		}
		handler.ServeHTTP(w, r)
	}
}

func (l *Lazy) handlers() (*Handlers, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.h != nil {
		return l.h, nil
	}
	cfg, err := config.Load(l.getenv)
	log := cfg.Logger(l.logs)
	if err != nil {
		log.Error("billrun configuration", "error", err.Error())
		return nil, err
	}
	// The store outlives the request that happened to build it; the
	// instance's end releases it.
	h, _, err := Open(context.Background(), cfg, log)
	if err != nil {
		log.Error("billrun start", "error", err.Error())
		return nil, err
	}
	log.Info("billrun functions ready", "config", cfg)
	l.h = h
	return h, nil
}
