// Package config reads billrun's function configuration from the environment:
// one struct, defaults in one place, and a Validate that reports every problem
// at once. It never logs or prints the Stripe key.
package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"
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
	// StripeKey is STRIPE_SECRET_KEY (sk_… or rk_…), surrounding whitespace
	// removed (secrets mounted from files often end in a newline). Required.
	// Never logged: String redacts it.
	StripeKey string
	// StripeBaseURL is BILLRUN_STRIPE_API_BASE: "" (default) is Stripe itself;
	// locally, the simulator's URL.
	StripeBaseURL string
	// StripeTimeout is BILLRUN_STRIPE_TIMEOUT, one Stripe request's limit (Go
	// duration; default 30s). Keep it below the function's own timeout.
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
}

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
		StripeKey:     get("STRIPE_SECRET_KEY", ""),
		StripeBaseURL: get("BILLRUN_STRIPE_API_BASE", ""),
		StripeTimeout: duration("BILLRUN_STRIPE_TIMEOUT", DefaultStripeTimeout),
		Lease:         duration("BILLRUN_LEASE", DefaultLease),
		StalePending:  duration("BILLRUN_STALE_PENDING", DefaultStalePending),
		MaxBodyBytes:  DefaultMaxBodyBytes,
		LogFormat:     get("BILLRUN_LOG_FORMAT", DefaultLogFormat),
	}
	if v := get("BILLRUN_MAX_BODY_BYTES", ""); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			problems = append(problems, fmt.Errorf("BILLRUN_MAX_BODY_BYTES=%q: not an integer", v))
		} else {
			c.MaxBodyBytes = n
		}
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
	switch {
	case c.StripeKey == "":
		bad("STRIPE_SECRET_KEY: required")
	case !strings.HasPrefix(c.StripeKey, "sk_") && !strings.HasPrefix(c.StripeKey, "rk_"):
		// Say what is wrong without echoing any of the value.
		bad("STRIPE_SECRET_KEY: not a secret or restricted key (want sk_… or rk_…)")
	case strings.ContainsAny(c.StripeKey, " \t\r\n"):
		bad("STRIPE_SECRET_KEY: contains whitespace")
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

// EmbeddedPath is the embedded store's file.
func (c Config) EmbeddedPath() string { return filepath.Join(c.DataDir, EmbeddedFile) }

// String renders the configuration for logs, with the Stripe key redacted.
func (c Config) String() string {
	key := "unset"
	if c.StripeKey != "" {
		key = "set (redacted)"
	}
	return fmt.Sprintf("store=%s data_dir=%s project=%s database=%s stripe_key=%s stripe_base=%q stripe_timeout=%s lease=%s stale_pending=%s max_body=%d log=%s/%s",
		c.Store, c.DataDir, c.Project, c.Database, key, c.StripeBaseURL, c.StripeTimeout, c.Lease, c.StalePending, c.MaxBodyBytes, c.LogFormat, c.LogLevel)
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
