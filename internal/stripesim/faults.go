package stripesim

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Faults says which failures the simulator injects. The zero value injects none.
// Probabilities are in [0, 1] and drawn per request attempt from the seed, the
// request's identity (its idempotency key, or method and URL when it has none)
// and the attempt number for that identity, so a scenario replays identically
// whatever the order in which concurrent requests arrive. The rate and
// concurrency limiters depend on timing, so they are the exception.
type Faults struct {
	// Latency is added before every API request is handled.
	Latency Latency
	// RateLimit is the requests per second allowed before 429s with
	// Stripe-Rate-Limited-Reason: global-rate (a token bucket on the simulator's
	// clock, burst equal to the rate); 0 means unlimited.
	RateLimit float64
	// ConcurrencyLimit is the most API requests handled at once before 429s
	// with Stripe-Rate-Limited-Reason: global-concurrency; 0 means unlimited.
	ConcurrencyLimit int
	// Gateway503 answers a non-JSON 503 in front of the API: nothing runs and
	// nothing is stored, and stripe-go retries it.
	Gateway503 float64
	// LockTimeout answers 429 lock_timeout before the idempotency layer (not
	// stored; the one 429 stripe-go retries).
	LockTimeout float64
	// Error500Before answers a JSON 500 api_error before anything is committed.
	// Like Stripe, the 500 is stored under the idempotency key and replayed.
	Error500Before float64
	// Error500After commits the request (the payment happens), then answers a
	// JSON 500 instead of the result; the 500 is what the key replays.
	Error500After float64
	// DropAfter commits the request and stores its real result under the key,
	// then closes the connection without answering.
	DropAfter float64
	// SlowCommit delays the commit by SlowCommitDelay (real time), holding the
	// idempotency key in flight meanwhile; the commit happens even if the caller
	// gave up.
	SlowCommit      float64
	SlowCommitDelay time.Duration
	// WebhookDuplicate delivers an event's webhook twice.
	WebhookDuplicate float64
	// WebhookReorder delivers a sweep's due events in a shuffled order instead
	// of oldest first (Stripe does not guarantee order).
	WebhookReorder float64
	// FirstAttempts limits the probabilistic faults to the first N attempts of
	// each request identity, so a retry can get through; 0 means every attempt.
	FirstAttempts int
}

// Latency is a delay distribution.
type Latency struct {
	// Dist is "" (none), "fixed" (Min), "uniform" (Min..Max) or "exp" (Min plus
	// an exponential with mean Mean, capped at 20×Mean).
	Dist string
	Min  time.Duration
	Max  time.Duration
	Mean time.Duration
}

// defaultSlowCommitDelay is used when slow-commit gives no delay.
const defaultSlowCommitDelay = 2 * time.Second

// ParseFaults reads a fault spec: comma-separated name=value items, e.g.
//
//	latency=20ms | latency=uniform:5ms:80ms | latency=exp:5ms:40ms
//	rate=25  concurrency=10  gateway-503=0.05  lock-timeout=0.05  500-before=0.1  500-after=0.1
//	drop-after=0.05  slow-commit=0.1:3s  webhook-dup=0.2  webhook-reorder=0.5  first=1
//
// It reports every bad item at once. An empty spec means no faults.
func ParseFaults(spec string) (Faults, error) {
	var f Faults
	var errs []error
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, val, ok := strings.Cut(item, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("%q: want name=value", item))
			continue
		}
		var err error
		prob := func(dst *float64) {
			*dst, err = parseProb(val)
		}
		switch name {
		case "latency":
			f.Latency, err = parseLatency(val)
		case "rate":
			f.RateLimit, err = strconv.ParseFloat(val, 64)
			if err == nil && (f.RateLimit < 0 || math.IsInf(f.RateLimit, 0) || math.IsNaN(f.RateLimit)) {
				err = errors.New("must be a non-negative number of requests per second")
			}
		case "concurrency":
			f.ConcurrencyLimit, err = strconv.Atoi(val)
			if err == nil && f.ConcurrencyLimit < 0 {
				err = errors.New("must be >= 0")
			}
		case "gateway-503":
			prob(&f.Gateway503)
		case "lock-timeout":
			prob(&f.LockTimeout)
		case "500-before":
			prob(&f.Error500Before)
		case "500-after":
			prob(&f.Error500After)
		case "drop-after":
			prob(&f.DropAfter)
		case "webhook-dup":
			prob(&f.WebhookDuplicate)
		case "webhook-reorder":
			prob(&f.WebhookReorder)
		case "slow-commit":
			p, d, hasDelay := strings.Cut(val, ":")
			f.SlowCommit, err = parseProb(p)
			f.SlowCommitDelay = defaultSlowCommitDelay
			if err == nil && hasDelay {
				f.SlowCommitDelay, err = parseDuration(d)
			}
		case "first":
			f.FirstAttempts, err = strconv.Atoi(val)
			if err == nil && f.FirstAttempts < 0 {
				err = errors.New("must be >= 0")
			}
		default:
			err = errors.New("unknown fault")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", item, err))
		}
	}
	if len(errs) > 0 {
		return Faults{}, fmt.Errorf("stripesim: parse faults: %w", errors.Join(errs...))
	}
	return f, nil
}

// Validate reports every out-of-range field at once, for Faults built in code.
func (f Faults) Validate() error {
	var errs []error
	for _, p := range []struct {
		name string
		v    float64
	}{
		{"Gateway503", f.Gateway503}, {"LockTimeout", f.LockTimeout}, {"Error500Before", f.Error500Before},
		{"Error500After", f.Error500After}, {"DropAfter", f.DropAfter}, {"SlowCommit", f.SlowCommit},
		{"WebhookDuplicate", f.WebhookDuplicate}, {"WebhookReorder", f.WebhookReorder},
	} {
		if !(p.v >= 0 && p.v <= 1) {
			errs = append(errs, fmt.Errorf("%s=%v: probability must be in [0, 1]", p.name, p.v))
		}
	}
	if !(f.RateLimit >= 0) || math.IsInf(f.RateLimit, 0) {
		errs = append(errs, fmt.Errorf("RateLimit=%v: must be a non-negative number", f.RateLimit))
	}
	if f.ConcurrencyLimit < 0 || f.FirstAttempts < 0 || f.SlowCommitDelay < 0 {
		errs = append(errs, errors.New("ConcurrencyLimit, FirstAttempts and SlowCommitDelay must not be negative"))
	}
	l := f.Latency
	switch {
	case l.Dist != "" && l.Dist != "fixed" && l.Dist != "uniform" && l.Dist != "exp":
		errs = append(errs, fmt.Errorf("Latency.Dist=%q: want fixed, uniform or exp", l.Dist))
	case l.Min < 0 || l.Max < 0 || l.Mean < 0 || l.Dist == "uniform" && l.Max < l.Min:
		errs = append(errs, errors.New("Latency: durations must not be negative, and Max must not be below Min"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("stripesim: faults: %w", errors.Join(errs...))
	}
	return nil
}

func parseProb(s string) (float64, error) {
	p, err := strconv.ParseFloat(s, 64)
	if err != nil || p < 0 || p > 1 || math.IsNaN(p) {
		return 0, errors.New("probability must be a number in [0, 1]")
	}
	return p, nil
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d < 0 {
		return 0, errors.New("duration must not be negative")
	}
	return d, nil
}

func parseLatency(s string) (Latency, error) {
	parts := strings.Split(s, ":")
	durs := make([]time.Duration, 0, len(parts))
	for _, p := range parts[1:] {
		d, err := parseDuration(p)
		if err != nil {
			return Latency{}, err
		}
		durs = append(durs, d)
	}
	switch {
	case len(parts) == 1:
		d, err := parseDuration(parts[0])
		return Latency{Dist: "fixed", Min: d}, err
	case parts[0] == "uniform" && len(durs) == 2 && durs[0] <= durs[1]:
		return Latency{Dist: "uniform", Min: durs[0], Max: durs[1]}, nil
	case parts[0] == "exp" && len(durs) == 1:
		return Latency{Dist: "exp", Mean: durs[0]}, nil
	case parts[0] == "exp" && len(durs) == 2:
		return Latency{Dist: "exp", Min: durs[0], Mean: durs[1]}, nil
	}
	return Latency{}, errors.New("want DURATION, uniform:MIN:MAX or exp:[MIN:]MEAN")
}

// String renders f in ParseFaults' syntax.
func (f Faults) String() string {
	var items []string
	switch f.Latency.Dist {
	case "fixed":
		items = append(items, "latency="+f.Latency.Min.String())
	case "uniform":
		items = append(items, fmt.Sprintf("latency=uniform:%s:%s", f.Latency.Min, f.Latency.Max))
	case "exp":
		items = append(items, fmt.Sprintf("latency=exp:%s:%s", f.Latency.Min, f.Latency.Mean))
	}
	add := func(name string, p float64) {
		if p > 0 {
			items = append(items, name+"="+strconv.FormatFloat(p, 'g', -1, 64))
		}
	}
	if f.RateLimit > 0 {
		items = append(items, "rate="+strconv.FormatFloat(f.RateLimit, 'g', -1, 64))
	}
	if f.ConcurrencyLimit > 0 {
		items = append(items, "concurrency="+strconv.Itoa(f.ConcurrencyLimit))
	}
	add("gateway-503", f.Gateway503)
	add("lock-timeout", f.LockTimeout)
	add("500-before", f.Error500Before)
	add("500-after", f.Error500After)
	add("drop-after", f.DropAfter)
	if f.SlowCommit > 0 {
		items = append(items, fmt.Sprintf("slow-commit=%s:%s", strconv.FormatFloat(f.SlowCommit, 'g', -1, 64), f.SlowCommitDelay))
	}
	add("webhook-dup", f.WebhookDuplicate)
	add("webhook-reorder", f.WebhookReorder)
	if f.FirstAttempts > 0 {
		items = append(items, "first="+strconv.Itoa(f.FirstAttempts))
	}
	return strings.Join(items, ",")
}

// Fault names as they appear in the request log.
const (
	faultGateway503  = "gateway-503"
	faultLockTimeout = "lock-timeout"
	faultRateLimit   = "rate-limit"
	fault500Before   = "500-before"
	fault500After    = "500-after"
	faultDropAfter   = "drop-after"
	faultSlowCommit  = "slow-commit"
)

// decision is what happens to one request attempt.
type decision struct {
	latency     time.Duration
	gateway503  bool
	lockTimeout bool
	err500      bool // before commit
	slowCommit  bool
	err500After bool
	dropAfter   bool
}

// decide draws one attempt's faults. Every draw happens whatever the outcome,
// so the stream of draws, and so the scenario, depends only on its inputs.
func (f Faults) decide(seed int64, identity string, attempt int) decision {
	rng := seededRand(seed, "request", identity, attempt)
	var d decision
	switch f.Latency.Dist {
	case "fixed":
		d.latency = f.Latency.Min
		rng.Float64()
	case "uniform":
		d.latency = f.Latency.Min + time.Duration(rng.Float64()*float64(f.Latency.Max-f.Latency.Min))
	case "exp":
		x := min(rng.ExpFloat64(), 20)
		d.latency = f.Latency.Min + time.Duration(x*float64(f.Latency.Mean))
	default:
		rng.Float64()
	}
	draws := [...]float64{rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64()}
	if f.FirstAttempts > 0 && attempt > f.FirstAttempts {
		return d
	}
	d.gateway503 = draws[0] < f.Gateway503
	d.lockTimeout = !d.gateway503 && draws[1] < f.LockTimeout
	early := d.gateway503 || d.lockTimeout
	d.err500 = !early && draws[2] < f.Error500Before
	if early || d.err500 {
		return d
	}
	d.slowCommit = draws[3] < f.SlowCommit
	d.err500After = draws[4] < f.Error500After
	d.dropAfter = !d.err500After && draws[5] < f.DropAfter
	return d
}

// seededRand returns a generator determined by the seed and parts alone.
func seededRand(seed int64, parts ...any) *rand.Rand {
	h := fnv.New64a()
	for _, p := range parts {
		fmt.Fprintf(h, "%v\x00", p)
	}
	return rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
}

// rateLimiter is a token bucket on the simulator's clock.
type rateLimiter struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// allow takes a token at now if rate allows it; rate <= 0 always allows.
func (l *rateLimiter) allow(now time.Time, rate float64) bool {
	if rate <= 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	burst := math.Max(rate, 1)
	if l.last.IsZero() {
		l.tokens = burst
	} else if el := now.Sub(l.last).Seconds(); el > 0 {
		l.tokens = math.Min(burst, l.tokens+el*rate)
	}
	l.last = now
	if l.tokens >= 1 {
		l.tokens--
		return true
	}
	return false
}
