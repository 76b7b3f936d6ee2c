// Package progress reads a billing run's progress from the store (the run
// record and its charge records, the same documents on the embedded store and
// Firestore) and draws it: a live bar on a terminal, nothing animated
// elsewhere. Every view of a run (demo, run, status, the cloud) uses it, so they
// agree.
package progress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/store"
)

// Snapshot is a run's state at one moment.
type Snapshot struct {
	Period string `json:"period"`
	// State is the run's state, or "" when the period has no run yet.
	State billing.RunState `json:"state"`
	Owner string           `json:"owner,omitempty"`
	// Due is how many customers the run bills: the run's count once
	// enumeration is done, else the stored customers (an estimate).
	Due        int64 `json:"due"`
	Enumerated bool  `json:"enumerated"`
	// Records is the number of charge records, Settled those in a terminal
	// state; Counts has one entry per state seen.
	Records int64                   `json:"records"`
	Settled int64                   `json:"settled"`
	Counts  map[billing.State]int64 `json:"counts"`
	// Retried counts records that needed more than one Stripe attempt.
	Retried int64            `json:"retried"`
	Summary *billing.Summary `json:"summary,omitempty"`
	Time    time.Time        `json:"time"`
}

// Read takes a snapshot of period's run. customers is the number of stored
// customers, the estimate of Due before enumeration ends.
func Read(ctx context.Context, r store.Reader, period string, customers int64) (Snapshot, error) {
	s := Snapshot{Period: period, Due: customers, Counts: map[billing.State]int64{}, Time: time.Now()}
	run, err := billing.GetRun(ctx, r, period)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return s, nil
	case err != nil:
		return s, err
	}
	s.State, s.Owner, s.Summary, s.Enumerated = run.State, run.Owner, run.Summary, run.EnumDone
	if run.EnumDone {
		s.Due = run.DueCount
	}
	records, err := billing.ListCharges(ctx, r, period)
	if err != nil {
		return s, err
	}
	for _, rec := range records {
		s.Records++
		s.Counts[rec.State]++
		if rec.State.Terminal() {
			s.Settled++
		}
		if rec.Attempts > 1 {
			s.Retried++
		}
	}
	if s.Summary != nil {
		s.Due = s.Summary.Due
	}
	s.Due = max(s.Due, s.Records)
	return s, nil
}

// Line renders a snapshot in one line; since is when the run started (for the
// rate and the ETA), zero to leave them out.
func (s Snapshot) Line(since time.Time) string {
	const width = 24
	filled := 0
	if s.Due > 0 {
		filled = int(int64(width) * s.Settled / s.Due)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[%s%s] %d/%d  charged %d  declined %d  needs auth %d  held %d  retried %d",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), s.Settled, s.Due,
		s.Counts[billing.StateSucceeded], s.Counts[billing.StateDeclined], s.Counts[billing.StateRequiresAction],
		s.Counts[billing.StateHeldForReview], s.Retried)
	if !since.IsZero() {
		elapsed := s.Time.Sub(since).Seconds()
		if elapsed > 0 && s.Settled > 0 {
			rate := float64(s.Settled) / elapsed
			eta := time.Duration(float64(s.Due-s.Settled) / rate * float64(time.Second)).Round(time.Second)
			fmt.Fprintf(&b, "  %.0f/s  ETA %s", rate, eta)
		}
	}
	return b.String()
}

// IsTerminal reports whether w is a terminal (progress animation is drawn
// only there).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Follow redraws read's snapshot on w every interval while done reports
// false, when w is a terminal; elsewhere it draws nothing. It returns the
// last snapshot, read after done reported true.
func Follow(ctx context.Context, w io.Writer, interval time.Duration, read func(context.Context) (Snapshot, error), done func(context.Context) (bool, error)) (Snapshot, error) {
	tty := IsTerminal(w)
	start := time.Now()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		finished, err := done(ctx)
		if err != nil {
			return Snapshot{}, err
		}
		s, err := read(ctx)
		if err != nil {
			return s, err
		}
		if tty {
			fmt.Fprintf(w, "\r\033[K%s", s.Line(start))
		}
		if finished {
			if tty {
				fmt.Fprintln(w)
			}
			return s, nil
		}
		select {
		case <-ctx.Done():
			if tty {
				fmt.Fprintln(w)
			}
			return s, ctx.Err()
		case <-t.C:
		}
	}
}
