// Package config reads billrun's function configuration from the environment:
// one struct, defaults in one place, and a Validate that reports every problem
// at once. It never logs or prints the Stripe key or the vault signing secret.
//
// Every function reads the common settings (store, lease, limits, logs). Beyond
// them each needs its own (Require):
//
//	Preflight, MarkCompleted  nothing more
//	IssueVaultKeys            BILLRUN_VAULT_SIGNING_SECRET (caps: BILLRUN_VAULT_DEFAULT_CAPS,
//	                          BILLRUN_VAULT_HISTORY_MULTIPLE, BILLRUN_VAULT_BUDGET_MARGIN_PERCENT,
//	                          BILLRUN_VAULT_KEY_TTL)
//	Charge                    BILLRUN_VAULT_SIGNING_SECRET, BILLRUN_VAULT_PROXY_URL
//	                          (BILLRUN_VAULT_PROXY_ID_TOKEN=true in the cloud); no Stripe secret
//	VaultProxy                BILLRUN_VAULT_SIGNING_SECRET, and STRIPE_SECRET_KEY or
//	                          BILLRUN_STRIPE_SECRET_NAME (Secret Manager); BILLRUN_STRIPE_API_BASE
//
// BILLRUN_STORE_FAULTS injects store faults (package faultstore) for tests and
// `billrun --faults`; it is refused unless the store is the embedded one.
package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"billrun.dev/billrun/internal/store/faultstore"
)

// Store backends.
const (
	StoreEmbedded  = "embedded"
	StoreFirestore = "firestore"
)

// Defaults, used when a variable is unset or empty.
const (
	DefaultStore           = StoreEmbedded
	DefaultDataDir         = ".billrun"
	DefaultDatabase        = "(default)"
	DefaultStripeTimeout   = 30 * time.Second
	DefaultLease           = 10 * time.Minute
	DefaultStalePending    = 23 * time.Hour
	DefaultMaxBodyBytes    = 64 << 10
	DefaultLogFormat       = "json"
	stripeKeyWindow        = 24 * time.Hour
	maxBodyBytesUpperLimit = 10 << 20
	// DefaultVaultKeyTTL is a vault key's lifetime (vault.DefaultKeyTTL).
	DefaultVaultKeyTTL = 48 * time.Hour
	// DefaultVaultHistoryMultiple: without a ceiling, a cap is this many times
	// the customer's largest recent payment (vault.DefaultHistoryMultiple).
	DefaultVaultHistoryMultiple = 3
	// DefaultVaultBudgetMarginPercent: the run budget is the sum of expected
	// amounts times this percentage (vault.DefaultBudgetMarginPercent).
	DefaultVaultBudgetMarginPercent = 110
	// MinSigningSecretBytes is the vault signing secret's minimum length.
	MinSigningSecretBytes = 32
)

// EmbeddedFile is the embedded store's file inside DataDir.
const EmbeddedFile = "billrun.db"

// Config is everything the functions read from the environment.
type Config struct {
	// Store is BILLRUN_STORE: "embedded" (default) or "firestore".
	Store string
	// DataDir is BILLRUN_DATA_DIR, the embedded store's directory (default
	// ".billrun"); its file is DataDir/billrun.db.
	DataDir string
	// Project is BILLRUN_GCP_PROJECT, else GOOGLE_CLOUD_PROJECT: Firestore's
	// project. Required for the firestore store.
	Project string
	// Database is BILLRUN_FIRESTORE_DATABASE, the Firestore database id
	// (default "(default)").
	Database string
	// StoreFaults is BILLRUN_STORE_FAULTS: store faults to inject, in package
	// faultstore's syntax, e.g. "seed=7,commit_fail=charges:0.2" (the seed,
	// default 1, comes from the spec). "" (default) injects none. Only with
	// the embedded store: fault injection can never be switched on against
	// Firestore, where the production data lives.
	StoreFaults string
	// StripeKey is STRIPE_SECRET_KEY (sk_… or rk_…), surrounding whitespace
	// removed (secrets mounted from files often end in a newline). Only
	// VaultProxy reads it (required there unless StripeSecretName is set); no
	// other function holds a Stripe secret. Never logged: String redacts it.
	StripeKey string
	// StripeBaseURL is BILLRUN_STRIPE_API_BASE: where VaultProxy forwards; ""
	// (default) is Stripe itself; locally, the simulator's URL.
	StripeBaseURL string
	// StripeTimeout is BILLRUN_STRIPE_TIMEOUT, one Stripe request's limit (Go
	// duration; default 30s), through the proxy from Charge and from the proxy
	// to Stripe. Keep it below the function's own timeout.
	StripeTimeout time.Duration
	// Lease is BILLRUN_LEASE, how long a run claim lasts without progress
	// (default 10m).
	Lease time.Duration
	// StalePending is BILLRUN_STALE_PENDING: a pending charge whose first
	// Stripe attempt is older is reconciled by listing before any new request
	// (default 23h; must be below Stripe's 24h key window).
	StalePending time.Duration
	// MaxBodyBytes is BILLRUN_MAX_BODY_BYTES, the request body limit (default
	// 65536; larger bodies get 413).
	MaxBodyBytes int64
	// LogFormat is BILLRUN_LOG_FORMAT: "json" (default; Cloud Logging's
	// severity key) or "text".
	LogFormat string
	// LogLevel is BILLRUN_LOG_LEVEL: debug, info (default), warn or error.
	LogLevel slog.Level

	// VaultSigningSecret is BILLRUN_VAULT_SIGNING_SECRET: turns vault key
	// references into credentials (at least 32 bytes; surrounding whitespace
	// removed). Required by IssueVaultKeys, Charge and VaultProxy, which must
	// share it; never logged.
	VaultSigningSecret string
	// VaultProxyURL is BILLRUN_VAULT_PROXY_URL: the root URL of the VaultProxy
	// function (no path), where Charge sends every payment request. Required
	// by Charge.
	VaultProxyURL string
	// VaultProxyIDToken is BILLRUN_VAULT_PROXY_ID_TOKEN (true/false, default
	// false): Charge sends its Google ID token for the proxy's URL as
	// X-Serverless-Authorization (Cloud Run IAM), since Authorization carries
	// the key's credential. Set it in the cloud.
	VaultProxyIDToken bool
	// VaultKeyTTL is BILLRUN_VAULT_KEY_TTL, a key's lifetime before renewal
	// (Go duration; default 48h).
	VaultKeyTTL time.Duration
	// VaultHistoryMultiple is BILLRUN_VAULT_HISTORY_MULTIPLE (1 to 100, default
	// 3): a customer without a ceiling is capped at this many times its
	// largest successful payment of the last three periods.
	VaultHistoryMultiple int64
	// VaultDefaultCaps is BILLRUN_VAULT_DEFAULT_CAPS, e.g. "usd=50000,eur=40000":
	// the cap (minor units) of customers with neither ceiling nor history, per
	// currency; a currency without one holds such customers for review.
	// Default none.
	VaultDefaultCaps map[string]int64
	// VaultBudgetMarginPercent is BILLRUN_VAULT_BUDGET_MARGIN_PERCENT (100 to
	// 1000, default 110): the run budget is the sum of the amounts of the keys
	// issued times this percentage.
	VaultBudgetMarginPercent int64
	// StripeSecretName is BILLRUN_STRIPE_SECRET_NAME, a Secret Manager
	// version ("projects/P/secrets/S/versions/latest") from which VaultProxy
	// reads the Stripe secret; "" means STRIPE_SECRET_KEY.
	StripeSecretName string
}

// Requirement is something a function needs beyond the common configuration.
type Requirement int

// Requirements.
const (
	// NeedsSigningSecret: IssueVaultKeys, Charge, VaultProxy.
	NeedsSigningSecret Requirement = 1 << iota
	// NeedsProxyURL: Charge.
	NeedsProxyURL
	// NeedsStripeSecret: VaultProxy (STRIPE_SECRET_KEY or
	// BILLRUN_STRIPE_SECRET_NAME). No other function holds a Stripe secret.
	NeedsStripeSecret
)

// Load reads the configuration through getenv (os.Getenv in production) and
// validates it, reporting every problem at once.
func Load(getenv func(string) string) (Config, error) {
	var problems []error
	get := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	duration := func(name string, def time.Duration) time.Duration {
		v := get(name, "")
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s=%q: not a duration (e.g. 90s, 10m)", name, v))
			return def
		}
		return d
	}
	c := Config{
		Store:         get("BILLRUN_STORE", DefaultStore),
		DataDir:       get("BILLRUN_DATA_DIR", DefaultDataDir),
		Project:       get("BILLRUN_GCP_PROJECT", get("GOOGLE_CLOUD_PROJECT", "")),
		Database:      get("BILLRUN_FIRESTORE_DATABASE", DefaultDatabase),
		StoreFaults:   get("BILLRUN_STORE_FAULTS", ""),
		StripeKey:     get("STRIPE_SECRET_KEY", ""),
		StripeBaseURL: get("BILLRUN_STRIPE_API_BASE", ""),
		StripeTimeout: duration("BILLRUN_STRIPE_TIMEOUT", DefaultStripeTimeout),
		Lease:         duration("BILLRUN_LEASE", DefaultLease),
		StalePending:  duration("BILLRUN_STALE_PENDING", DefaultStalePending),
		MaxBodyBytes:  DefaultMaxBodyBytes,
		LogFormat:     get("BILLRUN_LOG_FORMAT", DefaultLogFormat),

		VaultSigningSecret:       get("BILLRUN_VAULT_SIGNING_SECRET", ""),
		VaultProxyURL:            get("BILLRUN_VAULT_PROXY_URL", ""),
		VaultKeyTTL:              duration("BILLRUN_VAULT_KEY_TTL", DefaultVaultKeyTTL),
		VaultHistoryMultiple:     DefaultVaultHistoryMultiple,
		VaultBudgetMarginPercent: DefaultVaultBudgetMarginPercent,
		StripeSecretName:         get("BILLRUN_STRIPE_SECRET_NAME", ""),
	}
	integer := func(name string, dst *int64) {
		if v := get(name, ""); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				problems = append(problems, fmt.Errorf("%s=%q: not an integer", name, v))
				return
			}
			*dst = n
		}
	}
	integer("BILLRUN_MAX_BODY_BYTES", &c.MaxBodyBytes)
	integer("BILLRUN_VAULT_HISTORY_MULTIPLE", &c.VaultHistoryMultiple)
	integer("BILLRUN_VAULT_BUDGET_MARGIN_PERCENT", &c.VaultBudgetMarginPercent)
	if v := get("BILLRUN_VAULT_PROXY_ID_TOKEN", ""); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			problems = append(problems, fmt.Errorf("BILLRUN_VAULT_PROXY_ID_TOKEN=%q: want true or false", v))
		}
		c.VaultProxyIDToken = b
	}
	if v := get("BILLRUN_VAULT_DEFAULT_CAPS", ""); v != "" {
		caps, err := parseCaps(v)
		if err != nil {
			problems = append(problems, fmt.Errorf("BILLRUN_VAULT_DEFAULT_CAPS=%q: %w", v, err))
		}
		c.VaultDefaultCaps = caps
	}
	if v := get("BILLRUN_LOG_LEVEL", ""); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			problems = append(problems, fmt.Errorf("BILLRUN_LOG_LEVEL=%q: want debug, info, warn or error", v))
		}
	}
	if err := c.Validate(); err != nil {
		problems = append(problems, err)
	}
	if len(problems) > 0 {
		return c, fmt.Errorf("config: %w", errors.Join(problems...))
	}
	return c, nil
}

// Validate reports every problem with c at once.
func (c Config) Validate() error {
	var problems []error
	bad := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	switch c.Store {
	case StoreEmbedded:
		if c.DataDir == "" {
			bad("BILLRUN_DATA_DIR: required for the embedded store")
		}
	case StoreFirestore:
		if c.Project == "" {
			bad("BILLRUN_GCP_PROJECT (or GOOGLE_CLOUD_PROJECT): required for the firestore store")
		}
	default:
		bad("BILLRUN_STORE=%q: want %q or %q", c.Store, StoreEmbedded, StoreFirestore)
	}
	if c.StoreFaults != "" {
		if _, err := faultstore.Parse(c.StoreFaults); err != nil {
			bad("BILLRUN_STORE_FAULTS=%q: %w", c.StoreFaults, err)
		}
		if c.Store != StoreEmbedded {
			bad("BILLRUN_STORE_FAULTS: fault injection needs the %s store, not %q", StoreEmbedded, c.Store)
		}
	}
	switch {
	case c.StripeKey == "":
	case !strings.HasPrefix(c.StripeKey, "sk_") && !strings.HasPrefix(c.StripeKey, "rk_"):
		// Say what is wrong without echoing any of the value.
		bad("STRIPE_SECRET_KEY: not a secret or restricted key (want sk_… or rk_…)")
	case strings.ContainsAny(c.StripeKey, " \t\r\n"):
		bad("STRIPE_SECRET_KEY: contains whitespace")
	}
	if c.StripeSecretName != "" && !secretNameRE.MatchString(c.StripeSecretName) {
		bad("BILLRUN_STRIPE_SECRET_NAME=%q: want projects/P/secrets/S/versions/V", c.StripeSecretName)
	}
	if c.VaultSigningSecret != "" && len(c.VaultSigningSecret) < MinSigningSecretBytes {
		bad("BILLRUN_VAULT_SIGNING_SECRET: at least %d bytes", MinSigningSecretBytes)
	}
	if c.VaultProxyURL != "" {
		u, err := url.Parse(c.VaultProxyURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			bad("BILLRUN_VAULT_PROXY_URL=%q: want the http(s) root URL of VaultProxy, with no path", c.VaultProxyURL)
		}
	}
	if c.VaultKeyTTL < time.Minute {
		bad("BILLRUN_VAULT_KEY_TTL=%s: must be at least 1m", c.VaultKeyTTL)
	}
	if c.VaultHistoryMultiple < 1 || c.VaultHistoryMultiple > 100 {
		bad("BILLRUN_VAULT_HISTORY_MULTIPLE=%d: want 1 to 100", c.VaultHistoryMultiple)
	}
	if c.VaultBudgetMarginPercent < 100 || c.VaultBudgetMarginPercent > 1000 {
		bad("BILLRUN_VAULT_BUDGET_MARGIN_PERCENT=%d: want 100 to 1000", c.VaultBudgetMarginPercent)
	}
	if c.StripeBaseURL != "" {
		u, err := url.Parse(c.StripeBaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("BILLRUN_STRIPE_API_BASE=%q: want an http(s) URL", c.StripeBaseURL)
		}
	}
	if c.StripeTimeout <= 0 {
		bad("BILLRUN_STRIPE_TIMEOUT=%s: must be positive", c.StripeTimeout)
	}
	if c.Lease < time.Second {
		bad("BILLRUN_LEASE=%s: must be at least 1s", c.Lease)
	}
	if c.StalePending <= 0 || c.StalePending >= stripeKeyWindow {
		bad("BILLRUN_STALE_PENDING=%s: must be positive and below Stripe's %s idempotency window", c.StalePending, stripeKeyWindow)
	}
	if c.MaxBodyBytes < 1024 || c.MaxBodyBytes > maxBodyBytesUpperLimit {
		bad("BILLRUN_MAX_BODY_BYTES=%d: want 1024 to %d", c.MaxBodyBytes, maxBodyBytesUpperLimit)
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		bad("BILLRUN_LOG_FORMAT=%q: want json or text", c.LogFormat)
	}
	return errors.Join(problems...)
}

// Require reports what a function needs and c lacks, all at once.
func (c Config) Require(r Requirement) error {
	var problems []error
	if r&NeedsSigningSecret != 0 && c.VaultSigningSecret == "" {
		problems = append(problems, errors.New("BILLRUN_VAULT_SIGNING_SECRET: required"))
	}
	if r&NeedsProxyURL != 0 && c.VaultProxyURL == "" {
		problems = append(problems, errors.New("BILLRUN_VAULT_PROXY_URL: required (the root URL of VaultProxy)"))
	}
	if r&NeedsStripeSecret != 0 && c.StripeKey == "" && c.StripeSecretName == "" {
		problems = append(problems, errors.New("STRIPE_SECRET_KEY (or BILLRUN_STRIPE_SECRET_NAME): required"))
	}
	if len(problems) > 0 {
		return fmt.Errorf("config: %w", errors.Join(problems...))
	}
	return nil
}

var (
	secretNameRE = regexp.MustCompile(`^projects/[^/]+/secrets/[^/]+/versions/[^/]+$`)
	capRE        = regexp.MustCompile(`^([a-z]{3})=([0-9]{1,13})$`)
)

// parseCaps reads "usd=50000,eur=40000".
func parseCaps(v string) (map[string]int64, error) {
	caps := map[string]int64{}
	for _, part := range strings.Split(v, ",") {
		m := capRE.FindStringSubmatch(strings.TrimSpace(part))
		if m == nil {
			return nil, fmt.Errorf("%q: want currency=amount, e.g. usd=50000", part)
		}
		n, _ := strconv.ParseInt(m[2], 10, 64)
		if n <= 0 {
			return nil, fmt.Errorf("%q: the cap must be positive", part)
		}
		caps[m[1]] = n
	}
	return caps, nil
}

// EmbeddedPath is the embedded store's file.
func (c Config) EmbeddedPath() string { return filepath.Join(c.DataDir, EmbeddedFile) }

// String renders the configuration for logs, with the Stripe key and the
// signing secret redacted.
func (c Config) String() string {
	set := func(v string) string {
		if v == "" {
			return "unset"
		}
		return "set (redacted)"
	}
	return fmt.Sprintf("store=%s store_faults=%q data_dir=%s project=%s database=%s stripe_key=%s stripe_secret_name=%q stripe_base=%q stripe_timeout=%s lease=%s stale_pending=%s max_body=%d log=%s/%s vault_signing_secret=%s vault_proxy=%q vault_proxy_id_token=%t vault_key_ttl=%s vault_history_multiple=%d vault_default_caps=%v vault_budget_margin=%d%%",
		c.Store, c.StoreFaults, c.DataDir, c.Project, c.Database, set(c.StripeKey), c.StripeSecretName, c.StripeBaseURL, c.StripeTimeout, c.Lease, c.StalePending, c.MaxBodyBytes, c.LogFormat, c.LogLevel,
		set(c.VaultSigningSecret), c.VaultProxyURL, c.VaultProxyIDToken, c.VaultKeyTTL, c.VaultHistoryMultiple, c.VaultDefaultCaps, c.VaultBudgetMarginPercent)
}

// LogValue keeps the key out of structured logs too.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Logger returns the configured logger writing to w: JSON with Cloud Logging's
// "severity" and "message" keys, or text for people.
func (c Config) Logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.LogLevel}
	if c.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	opts.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) > 0 {
			return a
		}
		switch a.Key {
		case slog.LevelKey:
			return slog.String("severity", severity(a.Value.Any().(slog.Level)))
		case slog.MessageKey:
			return slog.Attr{Key: "message", Value: a.Value}
		}
		return a
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// severity maps slog levels onto Cloud Logging's severities.
func severity(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "ERROR"
	case l >= slog.LevelWarn:
		return "WARNING"
	case l >= slog.LevelInfo:
		return "INFO"
	default:
		return "DEBUG"
	}
}
