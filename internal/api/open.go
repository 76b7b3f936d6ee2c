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

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/config"
	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/store/embedded"
	"billrun.dev/billrun/internal/store/firestoredb"
)

// Open builds the handlers from a validated configuration: the store it names,
// a stripe-go client for the configured base URL and key. close releases the
// store.
func Open(ctx context.Context, cfg config.Config, log *slog.Logger) (h *Handlers, close func() error, err error) {
	b, err := openStore(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	stripeClient := billing.NewStripeClient(cfg.StripeKey, cfg.StripeBaseURL, &http.Client{Timeout: cfg.StripeTimeout})
	h = New(Deps{
		Store: b, Stripe: billing.Direct{Client: stripeClient}, Logger: log,
		Lease: cfg.Lease, StalePending: cfg.StalePending, MaxBodyBytes: cfg.MaxBodyBytes,
		// The Stripe request gets three quarters of the window, recording the
		// answer the rest.
		AttemptWindow: cfg.StripeTimeout * 4 / 3,
	})
	return h, b.Close, nil
}

func openStore(ctx context.Context, cfg config.Config) (store.Backend, error) {
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
// instead of crashing the instance in a loop.
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
		h.ByName()[name].ServeHTTP(w, r)
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
