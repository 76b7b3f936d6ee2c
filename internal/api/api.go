// Package api is billrun's HTTP surface: one small constructor per Cloud
// Function (Preflight, IssueVaultKeys, Charge, MarkCompleted, and VaultProxy),
// each returning an http.Handler. The workflow's functions decode a bounded
// JSON body, validate it, call the billing service and answer per DESIGN §4:
//
//	200      done; the body says the outcome
//	422      permanent for this customer, already recorded
//	429/503  transient, with Retry-After; retrying is always safe
//	409      the run is not in a state for this (lease lost, incomplete)
//	400/405/413  the request itself is wrong; nothing changed
//
// VaultProxy speaks Stripe's API to Charge (internal/vault) and is served at
// the root of its own URL. It alone holds the Stripe secret (I3, I5).
package api

import (
	"log/slog"
	"net/http"
	"time"

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/vault"
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

// Deps are the explicit dependencies of the workflow's handlers, so tests and
// the local stack need no environment.
type Deps struct {
	Store store.Backend
	// Issuer issues and renews vault keys; nil leaves IssueVaultKeys and
	// Charge answering 500.
	Issuer *vault.Issuer
	// SigningSecret is the issuer's and the proxy's (at least 32 bytes).
	SigningSecret []byte
	// ProxyURL is the root URL of VaultProxy, where Charge sends every payment
	// request with the key's credential.
	ProxyURL string
	// ProxyClient carries Charge's requests to the proxy (timeout, and in the
	// cloud the ID token transport); nil means a 30 s timeout.
	ProxyClient *http.Client
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

// Handlers are the functions.
type Handlers struct {
	Preflight      http.Handler
	IssueVaultKeys http.Handler
	Charge         http.Handler
	MarkCompleted  http.Handler
	// VaultProxy is set by Open; New leaves it nil (build it with
	// vault.NewProxy).
	VaultProxy http.Handler
}

// Function names, as registered with functions-framework-go.
const (
	NamePreflight      = "Preflight"
	NameIssueVaultKeys = "IssueVaultKeys"
	NameCharge         = "Charge"
	NameMarkCompleted  = "MarkCompleted"
	// NameVaultProxy is served at the root of its own URL (FUNCTION_TARGET=
	// VaultProxy in the cloud; its own listener locally), since stripe-go
	// calls it at /v1/….
	NameVaultProxy = "VaultProxy"
)

// Names lists the functions the workflow calls, in the order a run calls
// them; locally functions-framework-go serves each at "/<name>".
func Names() []string {
	return []string{NamePreflight, NameIssueVaultKeys, NameCharge, NameMarkCompleted}
}

// New builds the workflow's handlers on one billing service.
func New(d Deps) (*Handlers, error) {
	var v *billing.Vault
	if d.Issuer != nil {
		var err error
		if v, err = billing.NewVault(d.Issuer, d.SigningSecret, d.ProxyURL, d.ProxyClient); err != nil {
			return nil, err
		}
	}
	svc := billing.New(d.Store, v, billing.Options{
		Lease: d.Lease, StalePending: d.StalePending, AttemptWindow: d.AttemptWindow, Now: d.Now, Logger: d.Logger,
	})
	b := Base{Log: d.Logger, MaxBodyBytes: d.MaxBodyBytes}
	return &Handlers{
		Preflight:      Preflight(svc, b),
		IssueVaultKeys: IssueVaultKeys(svc, b),
		Charge:         Charge(svc, b),
		MarkCompleted:  MarkCompleted(svc, b),
	}, nil
}

// ByName lists the handlers under their function names (VaultProxy when set).
func (h *Handlers) ByName() map[string]http.Handler {
	m := map[string]http.Handler{
		NamePreflight:      h.Preflight,
		NameIssueVaultKeys: h.IssueVaultKeys,
		NameCharge:         h.Charge,
		NameMarkCompleted:  h.MarkCompleted,
	}
	if h.VaultProxy != nil {
		m[NameVaultProxy] = h.VaultProxy
	}
	return m
}

// Mux serves the workflow's functions at "/<name>", as functions-framework-go
// does locally. VaultProxy is not on it: serve it at the root of its own
// listener.
func (h *Handlers) Mux() *http.ServeMux {
	mux := http.NewServeMux()
	byName := h.ByName()
	for _, name := range Names() {
		mux.Handle("/"+name, byName[name])
	}
	return mux
}
