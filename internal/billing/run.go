package billing

import (
	"context"
	"fmt"
	"slices"
	"time"

	"billrun.dev/billrun/internal/store"
)

// RunState is a run's state.
type RunState string

// Run states.
const (
	RunInProgress RunState = "in_progress"
	RunCompleted  RunState = "completed"
	// RunFailed marks a run an operator gave up on; a later execution may claim
	// it again.
	RunFailed RunState = "failed"
)

// Run is runs/{Period}.
type Run struct {
	Period         string
	State          RunState
	Owner          string
	LeaseExpiresAt time.Time
	// Executions lists every execution that touched the run, in order.
	Executions []string
	// EnumCursor is the last customer id counted by enumeration.
	EnumCursor string
	EnumDone   bool
	// DueCount is the number of customers enumerated so far (all of them once
	// EnumDone).
	DueCount int64
	// Currencies seen by enumeration, sorted; MarkCompleted totals per currency.
	Currencies  []string
	Summary     *Summary
	CreatedAt   time.Time
	UpdatedAt   time.Time
	CompletedAt time.Time
}

// Run document fields.
const (
	fRunState    = "state"
	fOwner       = "owner"
	fLease       = "lease_expires_at"
	fExecutions  = "executions"
	fEnumCursor  = "enum_cursor"
	fEnumDone    = "enum_done"
	fDueCount    = "due_count"
	fCurrencies  = "currencies"
	fSummary     = "summary"
	fCompletedAt = "completed_at"
)

func (r Run) data() store.Data {
	d := store.Data{
		fRunState:   string(r.State),
		fOwner:      r.Owner,
		fExecutions: anyStrings(r.Executions),
		fEnumCursor: r.EnumCursor,
		fEnumDone:   r.EnumDone,
		fDueCount:   r.DueCount,
		fCurrencies: anyStrings(r.Currencies),
	}
	setTime(d, fLease, r.LeaseExpiresAt)
	setTime(d, fCreatedAt, r.CreatedAt)
	setTime(d, fUpdatedAt, r.UpdatedAt)
	setTime(d, fCompletedAt, r.CompletedAt)
	if r.Summary != nil {
		d[fSummary] = r.Summary.data()
	}
	return d
}

func runFrom(doc store.Doc) (Run, error) {
	f := &fields{path: doc.Path, data: doc.Data}
	r := Run{
		Period:         doc.ID(),
		State:          RunState(f.str(fRunState)),
		Owner:          f.str(fOwner),
		LeaseExpiresAt: f.time(fLease),
		Executions:     f.strings(fExecutions),
		EnumCursor:     f.str(fEnumCursor),
		EnumDone:       f.bool(fEnumDone),
		DueCount:       f.int(fDueCount),
		Currencies:     f.strings(fCurrencies),
		CreatedAt:      f.time(fCreatedAt),
		UpdatedAt:      f.time(fUpdatedAt),
		CompletedAt:    f.time(fCompletedAt),
	}
	if s := f.object(fSummary); s != nil {
		sum := summaryFrom(&fields{path: doc.Path, data: s})
		r.Summary = &sum
	}
	switch r.State {
	case RunInProgress, RunCompleted, RunFailed:
	default:
		if f.err == nil {
			f.err = fmt.Errorf("%w: %s: unknown run state %q", ErrCorrupt, doc.Path, r.State)
		}
	}
	return r, f.err
}

// GetRun reads one run; store.ErrNotFound if absent.
func GetRun(ctx context.Context, r store.Reader, period string) (Run, error) {
	doc, err := r.Get(ctx, runPath(period))
	if err != nil {
		return Run{}, fmt.Errorf("get run %s: %w", period, err)
	}
	return runFrom(doc)
}

// touch records that execution touched the run.
func (r *Run) touch(execution string) {
	if !slices.Contains(r.Executions, execution) {
		r.Executions = append(r.Executions, execution)
	}
}

// holds reports whether execution may act for the run: it is the owner of a run
// in progress. An owner whose lease expired still holds the run until another
// execution takes it over.
func (r Run) holds(execution string) bool {
	return r.State == RunInProgress && r.Owner == execution
}

// PreflightStatus is Preflight's answer.
type PreflightStatus string

// Preflight answers.
const (
	// Claimed: the period had no run; this execution owns a new one.
	Claimed PreflightStatus = "claimed"
	// Resumed: this execution owns the run again (its own retry) or took over
	// from one whose lease expired; settled customers will not be charged again.
	Resumed PreflightStatus = "resumed"
	// AlreadyBilled: the period is completed; nothing to do.
	AlreadyBilled PreflightStatus = "already_billed"
	// AlreadyRunning: another execution holds a live lease.
	AlreadyRunning PreflightStatus = "already_running"
)

// PreflightResult is what Preflight decided.
type PreflightResult struct {
	Status PreflightStatus
	// Owner and LeaseExpiresAt describe the run after the decision.
	Owner          string
	LeaseExpiresAt time.Time
	// PreviousOwner is set when this execution took over an expired lease.
	PreviousOwner string
	// Summary is set for AlreadyBilled.
	Summary *Summary
}

// Preflight claims runs/{period} for execution, in one transaction (I4).
func (s *Service) Preflight(ctx context.Context, period, execution string) (PreflightResult, error) {
	now := s.clock()
	if err := ValidatePeriod(period, now); err != nil {
		return PreflightResult{}, err
	}
	if err := ValidateExecutionID(execution); err != nil {
		return PreflightResult{}, err
	}
	var res PreflightResult
	err := s.store.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
		res = PreflightResult{}
		doc, err := tx.Get(ctx, runPath(period))
		if isNotFound(err) {
			run := Run{
				State: RunInProgress, Owner: execution, LeaseExpiresAt: now.Add(s.lease),
				Executions: []string{execution}, CreatedAt: now, UpdatedAt: now,
			}
			res = PreflightResult{Status: Claimed, Owner: execution, LeaseExpiresAt: run.LeaseExpiresAt}
			return tx.Create(runPath(period), run.data())
		}
		if err != nil {
			return err
		}
		run, err := runFrom(doc)
		if err != nil {
			return err
		}
		run.touch(execution)
		run.UpdatedAt = now
		switch {
		case run.State == RunCompleted:
			res = PreflightResult{Status: AlreadyBilled, Owner: run.Owner, Summary: run.Summary}
		case run.State == RunInProgress && run.Owner != execution && now.Before(run.LeaseExpiresAt):
			res = PreflightResult{Status: AlreadyRunning, Owner: run.Owner, LeaseExpiresAt: run.LeaseExpiresAt}
		default:
			// Our own retry, an expired lease, or a failed run: take it.
			if run.Owner != execution {
				res.PreviousOwner = run.Owner
			}
			run.State, run.Owner, run.LeaseExpiresAt = RunInProgress, execution, now.Add(s.lease)
			res.Status, res.Owner, res.LeaseExpiresAt = Resumed, execution, run.LeaseExpiresAt
		}
		return tx.Set(runPath(period), run.data())
	})
	if err != nil {
		return PreflightResult{}, fmt.Errorf("preflight %s: %w", period, err)
	}
	s.log.InfoContext(ctx, "preflight", "period", period, "execution", execution, "status", string(res.Status),
		"owner", res.Owner, "previous_owner", res.PreviousOwner)
	return res, nil
}

// Summary is a completed run's account: every due customer in exactly one
// terminal state, so the counts add up to Due.
type Summary struct {
	Period string `json:"period"`
	// Due is the number of charge records: every customer enumerated, plus any
	// charged directly before enumeration reached it.
	Due int64 `json:"due"`
	// Counts has one entry per terminal state (zeros included).
	Counts map[string]int64 `json:"counts"`
	// Totals is the amount charged (succeeded) per currency, in minor units.
	Totals map[string]int64 `json:"totals"`
	// HeldCount is the number of customers held for review (Counts'
	// held_for_review); Held names the first 100 of them by id, with why.
	HeldCount int64          `json:"held_count"`
	Held      []HeldCustomer `json:"held"`
	// Budget is the run's budget as the vault enforced it (absent without a
	// vault).
	Budget      *Budget   `json:"budget,omitempty"`
	CompletedBy string    `json:"completed_by"`
	CompletedAt time.Time `json:"completed_at"`
}

func (s Summary) data() store.Data {
	counts, totals := store.Data{}, store.Data{}
	for k, v := range s.Counts {
		counts[k] = v
	}
	for k, v := range s.Totals {
		totals[k] = v
	}
	held := make([]any, len(s.Held))
	for i, h := range s.Held {
		held[i] = h.data()
	}
	d := store.Data{"period": s.Period, "due": s.Due, "counts": counts, "totals": totals, "completed_by": s.CompletedBy,
		"held_count": s.HeldCount, "held": held}
	if s.Budget != nil {
		d["budget"] = s.Budget.data()
	}
	setTime(d, "completed_at", s.CompletedAt)
	return d
}

func summaryFrom(f *fields) Summary {
	s := Summary{
		Period: f.str("period"), Due: f.int("due"), CompletedBy: f.str("completed_by"), HeldCount: f.int("held_count"),
		CompletedAt: f.time("completed_at"), Counts: map[string]int64{}, Totals: map[string]int64{}, Held: []HeldCustomer{},
	}
	for _, v := range f.list("held") {
		m, ok := v.(map[string]any)
		if !ok {
			f.fail("held", v, "map element")
			continue
		}
		hf := &fields{path: f.path, data: m}
		s.Held = append(s.Held, HeldCustomer{CustomerID: hf.str("customer_id"), Code: hf.str("code"), Reason: hf.str("reason")})
		if hf.err != nil && f.err == nil {
			f.err = hf.err
		}
	}
	if b := f.object("budget"); b != nil {
		bf := &fields{path: f.path, data: b}
		s.Budget = &Budget{Total: bf.int("total"), Used: bf.int("used"), Expected: bf.int("expected")}
		if bf.err != nil && f.err == nil {
			f.err = bf.err
		}
	}
	for _, pair := range []struct {
		key string
		dst map[string]int64
	}{{"counts", s.Counts}, {"totals", s.Totals}} {
		m := f.object(pair.key)
		inner := &fields{path: f.path, data: m}
		for k := range m {
			pair.dst[k] = inner.int(k)
		}
		if inner.err != nil && f.err == nil {
			f.err = inner.err
		}
	}
	return s
}

// keepLeaseTimeout bounds keepLease, so that a contended run document delays
// no charge by much.
const keepLeaseTimeout = 2 * time.Second

// keepLease renews the run's lease for execution, its owner, when less than
// half of it is left: a page is issued with a fresh lease, but its charges
// (up to MaxPageSize customers, retried with backoff under a rate-limit
// storm) can outlast it, and another execution's preflight would then resume
// the period while this one is still charging (I4, F15). Every charge reads
// the run; only one in about half a lease writes it, in a short transaction
// that checks again, so concurrent charges do not contend for one hot
// document. It never fails the charge (which is idempotent): a lease that is
// not renewed, or was lost to another execution, is logged.
func (s *Service) keepLease(ctx context.Context, period, execution string) {
	if execution == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, keepLeaseTimeout)
	defer cancel()
	due := func(run Run, now time.Time) bool {
		return run.holds(execution) && run.LeaseExpiresAt.Sub(now) < s.lease/2
	}
	run, err := GetRun(ctx, s.store, period)
	if err != nil && !isNotFound(err) {
		s.log.WarnContext(ctx, "lease not renewed", "period", period, "execution", execution, "error", err.Error())
		return
	}
	if err != nil || !due(run, s.clock()) {
		if err == nil && run.State == RunInProgress && run.Owner != execution {
			s.log.WarnContext(ctx, "charging for an execution that does not hold the lease", "period", period,
				"execution", execution, "owner", run.Owner)
		}
		return
	}
	renewed := false
	err = s.store.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
		renewed = false
		doc, err := tx.Get(ctx, runPath(period))
		if err != nil {
			return err
		}
		run, err := runFrom(doc)
		if err != nil {
			return err
		}
		now := s.clock()
		if !due(run, now) {
			return nil
		}
		renewed = true
		return tx.Update(runPath(period), store.Data{fLease: now.Add(s.lease), fUpdatedAt: now})
	})
	switch {
	case err != nil:
		s.log.WarnContext(ctx, "lease not renewed", "period", period, "execution", execution, "error", err.Error())
	case renewed:
		s.log.InfoContext(ctx, "lease renewed by a charge", "period", period, "execution", execution)
	}
}

// MarkCompleted completes the run owned by execution, refusing (IncompleteError)
// while enumeration is unfinished or any due customer lacks a terminal outcome
// (I2). Completing a completed run returns its summary again.
func (s *Service) MarkCompleted(ctx context.Context, period, execution string) (Summary, error) {
	now := s.clock()
	if err := ValidatePeriod(period, now); err != nil {
		return Summary{}, err
	}
	if err := ValidateExecutionID(execution); err != nil {
		return Summary{}, err
	}
	run, err := GetRun(ctx, s.store, period)
	if isNotFound(err) {
		return Summary{}, fmt.Errorf("mark completed %s: %w: no run for this period (preflight first)", period, ErrLeaseLost)
	}
	if err != nil {
		return Summary{}, fmt.Errorf("mark completed: %w", err)
	}
	if run.State == RunCompleted && run.Summary != nil {
		return *run.Summary, nil
	}
	if !run.holds(execution) {
		return Summary{}, fmt.Errorf("mark completed %s: %w: run is held by %q", period, ErrLeaseLost, run.Owner)
	}
	sum, err := s.summarise(ctx, period, run)
	if err != nil {
		return Summary{}, fmt.Errorf("mark completed %s: %w", period, err)
	}
	sum.CompletedBy, sum.CompletedAt = execution, now
	err = s.store.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
		doc, err := tx.Get(ctx, runPath(period))
		if err != nil {
			return err
		}
		cur, err := runFrom(doc)
		if err != nil {
			return err
		}
		if cur.State == RunCompleted && cur.Summary != nil {
			sum = *cur.Summary
			return nil
		}
		if !cur.holds(execution) {
			return fmt.Errorf("%w: run is held by %q", ErrLeaseLost, cur.Owner)
		}
		cur.touch(execution)
		cur.State, cur.Summary, cur.CompletedAt, cur.UpdatedAt = RunCompleted, &sum, now, now
		return tx.Set(runPath(period), cur.data())
	})
	if err != nil {
		return Summary{}, fmt.Errorf("mark completed %s: %w", period, err)
	}
	s.log.InfoContext(ctx, "run completed", "period", period, "execution", execution, "due", sum.Due,
		"succeeded", sum.Counts[string(StateSucceeded)])
	return sum, nil
}

// summarise aggregates the charge records (no counter document exists).
func (s *Service) summarise(ctx context.Context, period string, run Run) (Summary, error) {
	coll := chargesCollection(period)
	byState := func(st State, extra ...store.Filter) store.Query {
		return store.Query{Collection: coll, Filters: append([]store.Filter{{Field: fState, Op: store.OpEq, Value: string(st)}}, extra...)}
	}
	pending, err := s.store.Aggregate(ctx, byState(StatePending))
	if err != nil {
		return Summary{}, fmt.Errorf("count pending: %w", err)
	}
	if !run.EnumDone {
		return Summary{}, &IncompleteError{Pending: pending.Count, Reason: "enumeration of due customers is not finished"}
	}
	if pending.Count > 0 {
		return Summary{}, &IncompleteError{Pending: pending.Count, Reason: "due customers without a terminal outcome"}
	}
	all, err := s.store.Aggregate(ctx, store.Query{Collection: coll})
	if err != nil {
		return Summary{}, fmt.Errorf("count charges: %w", err)
	}
	sum := Summary{Period: period, Due: all.Count, Counts: map[string]int64{}, Totals: map[string]int64{}}
	var counted int64
	for _, st := range TerminalStates {
		agg, err := s.store.Aggregate(ctx, byState(st))
		if err != nil {
			return Summary{}, fmt.Errorf("count %s: %w", st, err)
		}
		sum.Counts[string(st)] = agg.Count
		counted += agg.Count
	}
	if counted != sum.Due {
		return Summary{}, fmt.Errorf("%w: %d charge records but %d in known states", ErrCorrupt, sum.Due, counted)
	}
	if sum.Due < run.DueCount {
		return Summary{}, fmt.Errorf("%w: %d customers enumerated but only %d charge records", ErrCorrupt, run.DueCount, sum.Due)
	}
	sum.HeldCount = sum.Counts[string(StateHeldForReview)]
	if sum.Held, err = s.heldCustomers(ctx, period); err != nil {
		return Summary{}, err
	}
	if sum.Budget, err = s.runBudget(ctx, period); err != nil {
		return Summary{}, err
	}
	var coveredCount int64
	for _, cur := range run.Currencies {
		agg, err := s.store.Aggregate(ctx, byState(StateSucceeded, store.Filter{Field: fCurrency, Op: store.OpEq, Value: cur}), fAmount)
		if err != nil {
			return Summary{}, fmt.Errorf("total %s: %w", cur, err)
		}
		if agg.Count > 0 {
			sum.Totals[cur] = agg.Sums[fAmount]
		}
		coveredCount += agg.Count
	}
	if coveredCount != sum.Counts[string(StateSucceeded)] {
		// A record charged before enumeration saw its currency: total by reading
		// the succeeded records (rare, so the read cost is acceptable).
		if err := s.totalByReading(ctx, byState(StateSucceeded), sum.Totals); err != nil {
			return Summary{}, err
		}
	}
	return sum, nil
}

func (s *Service) totalByReading(ctx context.Context, q store.Query, totals map[string]int64) error {
	docs, err := s.store.Query(ctx, q)
	if err != nil {
		return fmt.Errorf("read succeeded charges: %w", err)
	}
	clear(totals)
	for _, d := range docs {
		rec, err := recordFrom(d)
		if err != nil {
			return err
		}
		totals[rec.Currency] += rec.Amount
	}
	return nil
}
