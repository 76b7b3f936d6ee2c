// Package api is billrun's HTTP surface: one small constructor per Cloud
// Function (Preflight, DueCustomers, Charge, MarkCompleted), each returning an
// http.Handler that decodes a bounded JSON body, validates it, calls the billing
// service and answers per DESIGN §4:
//
//	200      done; the body says the outcome
//	422      permanent for this customer, already recorded
//	429/503  transient, with Retry-After; retrying is always safe
//	409      the run is not in a state for this (lease lost, incomplete)
//	400/405/413  the request itself is wrong; nothing changed
package api

import (
	"log/slog"
	"net/http"
	"time"

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/store"
)

// DefaultMaxBodyBytes bounds request bodies when Base.MaxBodyBytes is 0. The
// largest legitimate request is a few hundred bytes.
const DefaultMaxBodyBytes = 64 << 10

// Base is what every handler shares.
type Base struct {
	// Log receives errors the caller cannot see in full; nil discards.
	Log *slog.Logger
	// MaxBodyBytes refuses larger bodies with 413; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

func (b Base) withDefaults() Base {
	if b.Log == nil {
		b.Log = slog.New(slog.DiscardHandler)
	}
	if b.MaxBodyBytes <= 0 {
		b.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return b
}

// Deps are the explicit dependencies of all handlers, so tests and the local
// stack need no environment.
type Deps struct {
	Store  store.Backend
	Stripe billing.Clients
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// Lease, StalePending, AttemptWindow and MaxBodyBytes: 0 means the
	// documented defaults (billing.Options, DefaultMaxBodyBytes).
	Lease         time.Duration
	StalePending  time.Duration
	AttemptWindow time.Duration
	MaxBodyBytes  int64
}

// Handlers are the four functions.
type Handlers struct {
	Preflight     http.Handler
	DueCustomers  http.Handler
	Charge        http.Handler
	MarkCompleted http.Handler
}

// Function names, as registered with functions-framework-go and served at
// "/<name>" by it locally.
const (
	NamePreflight     = "Preflight"
	NameDueCustomers  = "DueCustomers"
	NameCharge        = "Charge"
	NameMarkCompleted = "MarkCompleted"
)

// Names lists the function names, in the order a run calls them.
func Names() []string {
	return []string{NamePreflight, NameDueCustomers, NameCharge, NameMarkCompleted}
}

// New builds every handler on one billing service.
func New(d Deps) *Handlers {
	svc := billing.New(d.Store, d.Stripe, billing.Options{
		Lease: d.Lease, StalePending: d.StalePending, AttemptWindow: d.AttemptWindow, Now: d.Now, Logger: d.Logger,
	})
	b := Base{Log: d.Logger, MaxBodyBytes: d.MaxBodyBytes}
	return &Handlers{
		Preflight:     Preflight(svc, b),
		DueCustomers:  DueCustomers(svc, b),
		Charge:        Charge(svc, b),
		MarkCompleted: MarkCompleted(svc, b),
	}
}

// ByName lists the handlers under their function names.
func (h *Handlers) ByName() map[string]http.Handler {
	return map[string]http.Handler{
		NamePreflight:     h.Preflight,
		NameDueCustomers:  h.DueCustomers,
		NameCharge:        h.Charge,
		NameMarkCompleted: h.MarkCompleted,
	}
}

// Mux serves each handler at "/<name>", as functions-framework-go does locally.
func (h *Handlers) Mux() *http.ServeMux {
	mux := http.NewServeMux()
	for name, handler := range h.ByName() {
		mux.Handle("/"+name, handler)
	}
	return mux
}
