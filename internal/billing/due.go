package billing

import (
	"context"
	"fmt"
	"slices"
	"time"

	"billrun.dev/billrun/internal/store"
)

// DueRequest asks for one page of due customers.
type DueRequest struct {
	Period    string
	Execution string
	// Cursor is the last customer id of the previous page; "" starts over.
	Cursor string
	// PageSize is 1..MaxPageSize; 0 means DefaultPageSize.
	PageSize int
}

// DueCustomer is a customer the caller must charge: its record is pending.
type DueCustomer struct {
	CustomerID string `json:"customer_id"`
	Amount     int64  `json:"amount"`
	Currency   string `json:"currency"`
}

// DuePage is one page of due customers.
type DuePage struct {
	Customers []DueCustomer
	// NextCursor continues the enumeration ("" when Done).
	NextCursor string
	// Done is true on the last page.
	Done bool
	// DueCount is the number of customers enumerated for the run so far.
	DueCount int64
}

// DuePagePlan is one page worked out inside a transaction, before any write, so
// that key issuance can add its own per-customer writes to the same
// transaction: PlanDuePage, then its writes, then Apply.
type DuePagePlan struct {
	// Page is the answer.
	Page DuePage
	// Records holds the charge record of every customer on the page, new ones
	// included, by customer id.
	Records map[string]ChargeRecord
	// Created lists the records this page creates.
	Created []ChargeRecord
	// Customers holds the page's customers as stored, by id (an undecodable
	// one carries its id only).
	Customers map[string]Customer
	// held lists existing records that hold puts on hold, written by Apply.
	held   []ChargeRecord
	run    Run
	period string
}

// validateDueRequest checks a page request and applies the default page size.
func validateDueRequest(req *DueRequest, now time.Time) error {
	if err := ValidatePeriod(req.Period, now); err != nil {
		return err
	}
	if err := ValidateExecutionID(req.Execution); err != nil {
		return err
	}
	if req.Cursor != "" {
		if err := ValidateCustomerID(req.Cursor); err != nil {
			return fmt.Errorf("%w: cursor is not a customer id", ErrInvalidInput)
		}
	}
	switch {
	case req.PageSize == 0:
		req.PageSize = DefaultPageSize
	case req.PageSize < 0 || req.PageSize > MaxPageSize:
		return fmt.Errorf("%w: page_size %d: want 1 to %d", ErrInvalidInput, req.PageSize, MaxPageSize)
	}
	return nil
}

// PlanDuePage does the reads of a page inside tx and works out its writes.
func (s *Service) PlanDuePage(ctx context.Context, tx store.Tx, req DueRequest) (*DuePagePlan, error) {
	now := s.clock()
	if err := validateDueRequest(&req, now); err != nil {
		return nil, err
	}
	doc, err := tx.Get(ctx, runPath(req.Period))
	if isNotFound(err) {
		return nil, fmt.Errorf("%w: no run for %s (preflight first)", ErrLeaseLost, req.Period)
	}
	if err != nil {
		return nil, err
	}
	run, err := runFrom(doc)
	if err != nil {
		return nil, err
	}
	if run.State == RunCompleted {
		return nil, fmt.Errorf("%w: %s is already billed", ErrRunCompleted, req.Period)
	}
	if !run.holds(req.Execution) {
		return nil, fmt.Errorf("%w: run %s is held by %q", ErrLeaseLost, req.Period, run.Owner)
	}
	// One customer more than the page tells whether another page follows.
	q := store.Query{Collection: customersCollection, Limit: req.PageSize + 1}
	if req.Cursor != "" {
		q.StartAfter = req.Cursor
	}
	customers, err := tx.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	done := len(customers) <= req.PageSize
	if !done {
		customers = customers[:req.PageSize]
	}
	plan := &DuePagePlan{Records: map[string]ChargeRecord{}, Customers: map[string]Customer{}, period: req.Period}
	if len(customers) > 0 {
		// Existing records of the page's customers: one ordered query, not a get each.
		rq := store.Query{Collection: chargesCollection(req.Period), Limit: len(customers)}
		if req.Cursor != "" {
			rq.StartAfter = req.Cursor
		}
		last := customers[len(customers)-1].ID()
		recs, err := tx.Query(ctx, rq)
		if err != nil {
			return nil, err
		}
		for _, d := range recs {
			if d.ID() > last {
				break
			}
			rec, err := recordFrom(d)
			if err != nil {
				return nil, err
			}
			plan.Records[d.ID()] = rec
		}
		if len(recs) == rq.Limit {
			// Records of customers deleted since may have filled the limit: get
			// the rest one by one (rare).
			for _, c := range customers {
				if _, ok := plan.Records[c.ID()]; ok {
					continue
				}
				d, err := tx.Get(ctx, chargePath(req.Period, c.ID()))
				if isNotFound(err) {
					continue
				}
				if err != nil {
					return nil, err
				}
				rec, err := recordFrom(d)
				if err != nil {
					return nil, err
				}
				plan.Records[c.ID()] = rec
			}
		}
	}
	// A page extends the enumeration only if it starts within what was already
	// enumerated: a cursor that skips ahead must not let customers in between
	// go uncounted while the run is marked fully enumerated.
	extends := !run.EnumDone && req.Cursor <= run.EnumCursor
	for _, cdoc := range customers {
		id := cdoc.ID()
		c, d := decideDoc(cdoc, req.Period)
		plan.Customers[id] = c
		rec, ok := plan.Records[id]
		if !ok {
			rec = newRecord(req.Period, c, d, now)
			plan.Records[id] = rec
			plan.Created = append(plan.Created, rec)
		}
		if rec.State == StatePending {
			plan.Page.Customers = append(plan.Page.Customers, DueCustomer{CustomerID: id, Amount: rec.Amount, Currency: rec.Currency})
		}
		// Count each customer once, however often a page is re-read.
		if extends && id > run.EnumCursor {
			run.EnumCursor = id
			run.DueCount++
			if rec.Currency != "" && !slices.Contains(run.Currencies, rec.Currency) {
				run.Currencies = append(run.Currencies, rec.Currency)
				slices.Sort(run.Currencies)
			}
		}
	}
	if done && extends {
		run.EnumDone = true
	}
	if !done {
		plan.Page.NextCursor = customers[len(customers)-1].ID()
	}
	run.LeaseExpiresAt, run.UpdatedAt = now.Add(s.lease), now
	plan.Page.Done, plan.Page.DueCount, plan.run = done, run.DueCount, run
	return plan, nil
}

// hold records a pending customer of the page as held_for_review with code and
// reason (heldReason: with a warning after earlier attempts), and takes it off
// the page: its charge is never sent.
func (p *DuePagePlan) hold(customerID, code, reason string, now time.Time) {
	held := func(rec ChargeRecord) ChargeRecord {
		rec.State, rec.ErrorCode, rec.Reason, rec.SettledAt, rec.UpdatedAt = StateHeldForReview, code, heldReason(reason, rec.Attempts), now, now
		p.Records[customerID] = rec
		return rec
	}
	if i := slices.IndexFunc(p.Created, func(r ChargeRecord) bool { return r.CustomerID == customerID }); i >= 0 {
		p.Created[i] = held(p.Created[i])
	} else {
		p.held = append(p.held, held(p.Records[customerID]))
	}
	p.Page.Customers = slices.DeleteFunc(p.Page.Customers, func(c DueCustomer) bool { return c.CustomerID == customerID })
}

// setKeyRef records the key reference on a record this page creates (an
// existing record gets the reference of its next attempt from Charge).
func (p *DuePagePlan) setKeyRef(customerID, ref string) {
	if i := slices.IndexFunc(p.Created, func(r ChargeRecord) bool { return r.CustomerID == customerID }); i >= 0 {
		p.Created[i].KeyRef = ref
		p.Records[customerID] = p.Created[i]
	}
}

// Apply writes the page's new records, the records put on hold, and the
// renewed run.
func (p *DuePagePlan) Apply(tx store.Tx) error {
	for _, rec := range p.Created {
		if err := tx.Create(chargePath(p.period, rec.CustomerID), rec.data()); err != nil {
			return err
		}
	}
	for _, rec := range p.held {
		if err := tx.Set(chargePath(p.period, rec.CustomerID), rec.data()); err != nil {
			return err
		}
	}
	return tx.Set(runPath(p.period), p.run.data())
}
