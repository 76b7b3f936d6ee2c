package billing

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"billrun.dev/billrun/internal/store"
	"billrun.dev/billrun/internal/vault"
)

// HistoryPeriods is how many earlier periods' successful payments inform a
// customer's cap when it has no ceiling.
const HistoryPeriods = 3

// KeyedCustomer is a due customer with the key its charge must go through. It
// holds a key reference, never a credential (I5).
type KeyedCustomer struct {
	CustomerID string `json:"customer_id"`
	KeyRef     string `json:"key_ref"`
	Amount     int64  `json:"amount"`
	Currency   string `json:"currency"`
}

// KeyPage is one page of IssueVaultKeys.
type KeyPage struct {
	// Customers are the page's customers to charge, each with its key.
	Customers []KeyedCustomer
	// Held counts the page's customers that issuance held for review (above
	// their cap, no cap source, key revoked): recorded, never charged.
	Held int
	// NextCursor continues the enumeration ("" when Done).
	NextCursor string
	Done       bool
	// DueCount is the number of customers enumerated for the run so far.
	DueCount int64
}

// IssueVaultKeys enumerates one page of due customers (PlanDuePage) and issues
// each pending one its capped vault key, in one transaction: the charge
// records, the keys and the run's progress commit together or not at all, so
// there is never a pending record whose key was not issued, nor a hold that
// was not recorded. The page is retried whole (a retried page returns the same
// references: the vault indexes keys per period and customer), and a page
// writes at most 3 documents per customer plus its budget shards and the run,
// within Firestore's 500 writes at MaxPageSize.
//
// A key's cap comes from sources independent of the amount (I3): the
// customer's ceiling, else a multiple of its successful payments in the last
// HistoryPeriods periods, else the configured default for the currency. A
// customer whose amount is above its cap, or without any cap source, is
// recorded held_for_review with the reason and is not on the page (F2).
func (s *Service) IssueVaultKeys(ctx context.Context, req DueRequest) (KeyPage, error) {
	if s.vault == nil {
		return KeyPage{}, fmt.Errorf("issue vault keys: %w: no vault configured", ErrStripeConfig)
	}
	var page KeyPage
	var plan *DuePagePlan
	err := s.store.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
		var err error
		if plan, err = s.PlanDuePage(ctx, tx, req); err != nil {
			return err
		}
		history, err := recentPayments(ctx, tx, req.Period, req.Cursor, plan)
		if err != nil {
			return err
		}
		now := s.clock()
		page = KeyPage{}
		reqs := make([]vault.IssueRequest, 0, len(plan.Page.Customers))
		for _, c := range slices.Clone(plan.Page.Customers) {
			rec := plan.Records[c.CustomerID]
			ceiling := plan.Customers[c.CustomerID].Ceiling
			// One customer's out-of-range data is held here, before any
			// request was sent for it, as the vault would refuse the whole
			// page for it and stop the run (F2). After a request, its key
			// exists and keeps its cap, so the ceiling is not needed.
			if code, why := outOfVaultRange(rec.Amount, ceiling); code != "" {
				if rec.Attempts == 0 {
					plan.hold(c.CustomerID, code, why, now)
					page.Held++
					continue
				}
				ceiling = 0
			}
			reqs = append(reqs, vault.IssueRequest{
				Customer: rec.CustomerID, StripeCustomer: rec.StripeCustomerID, Currency: rec.Currency,
				Amount: rec.Amount, Ceiling: ceiling, RecentPayments: history[c.CustomerID],
			})
		}
		issued, err := s.vault.issuer.IssueTx(ctx, tx, req.Period, reqs)
		if err != nil {
			return err
		}
		page.NextCursor, page.Done, page.DueCount = plan.Page.NextCursor, plan.Page.Done, plan.Page.DueCount
		for _, is := range issued {
			if is.Held {
				plan.hold(is.Customer, is.Reason, is.Detail, now)
				page.Held++
				continue
			}
			plan.setKeyRef(is.Customer, is.KeyRef)
			page.Customers = append(page.Customers, KeyedCustomer{
				CustomerID: is.Customer, KeyRef: is.KeyRef, Amount: is.Amount, Currency: is.Currency,
			})
		}
		return plan.Apply(tx)
	})
	if errors.Is(err, vault.ErrInvalid) {
		err = fmt.Errorf("%w: %w", ErrInvalidInput, err)
	}
	if err != nil {
		return KeyPage{}, fmt.Errorf("issue vault keys %s: %w", req.Period, err)
	}
	s.log.InfoContext(ctx, "vault keys issued", "period", req.Period, "execution", req.Execution,
		"cursor", req.Cursor, "keys", len(page.Customers), "held", page.Held, "created", len(plan.Created),
		"due_count", page.DueCount, "done", page.Done)
	return page, nil
}

// Hold codes for data the vault cannot take.
const (
	// HoldAmountOutOfRange: the amount is above vault.MaxAmount.
	HoldAmountOutOfRange = "amount_out_of_range"
	// HoldInvalidCeiling: the ceiling is negative or above vault.MaxAmount.
	HoldInvalidCeiling = "invalid_ceiling"
)

// outOfVaultRange says why a customer's amount or ceiling is outside what the
// vault accepts (a data bug), or "" if both are within it.
func outOfVaultRange(amount, ceiling int64) (code, reason string) {
	switch {
	case amount > vault.MaxAmount:
		return HoldAmountOutOfRange, fmt.Sprintf("amount %d is above the vault's maximum %d", amount, vault.MaxAmount)
	case ceiling < 0 || ceiling > vault.MaxAmount:
		return HoldInvalidCeiling, fmt.Sprintf("ceiling %d is outside 0 to %d", ceiling, vault.MaxAmount)
	}
	return "", ""
}

// recentPayments reads the successful payments, in the charge's currency, of
// the page's pending customers in the HistoryPeriods periods before period:
// one range query per period over the page's customer ids.
func recentPayments(ctx context.Context, tx store.Tx, period, cursor string, plan *DuePagePlan) (map[string][]int64, error) {
	out := map[string][]int64{}
	if len(plan.Page.Customers) == 0 {
		return out, nil
	}
	last := plan.Page.Customers[len(plan.Page.Customers)-1].CustomerID
	filters := []store.Filter{{Field: fCustomerID, Op: store.OpLte, Value: last}}
	if cursor != "" {
		filters = append(filters, store.Filter{Field: fCustomerID, Op: store.OpGt, Value: cursor})
	}
	p, err := time.Parse("2006-01", period)
	if err != nil {
		return nil, fmt.Errorf("%w: period %q", ErrInvalidInput, period)
	}
	for i := 1; i <= HistoryPeriods; i++ {
		earlier := p.AddDate(0, -i, 0).Format("2006-01")
		docs, err := tx.Query(ctx, store.Query{Collection: chargesCollection(earlier), Filters: filters, OrderBy: fCustomerID})
		if err != nil {
			return nil, fmt.Errorf("payment history %s: %w", earlier, err)
		}
		for _, d := range docs {
			rec, err := recordFrom(d)
			if err != nil {
				return nil, err
			}
			now, ok := plan.Records[rec.CustomerID]
			if ok && rec.State == StateSucceeded && rec.Currency == now.Currency && rec.Amount > 0 {
				out[rec.CustomerID] = append(out[rec.CustomerID], rec.Amount)
			}
		}
	}
	return out, nil
}

// heldList is the most held customers a summary lists by name.
const heldList = 100

// HeldCustomer is a customer held for review, in a run summary.
type HeldCustomer struct {
	CustomerID string `json:"customer_id"`
	Code       string `json:"code"`
	Reason     string `json:"reason"`
}

func (h HeldCustomer) data() store.Data {
	return store.Data{"customer_id": h.CustomerID, "code": h.Code, "reason": h.Reason}
}

// heldCustomers lists the first heldList customers held for review, by id.
func (s *Service) heldCustomers(ctx context.Context, period string) ([]HeldCustomer, error) {
	docs, err := s.store.Query(ctx, store.Query{
		Collection: chargesCollection(period),
		Filters:    []store.Filter{{Field: fState, Op: store.OpEq, Value: string(StateHeldForReview)}},
		Limit:      heldList,
	})
	if err != nil {
		return nil, fmt.Errorf("list held customers: %w", err)
	}
	out := make([]HeldCustomer, 0, len(docs))
	for _, d := range docs {
		rec, err := recordFrom(d)
		if err != nil {
			return nil, err
		}
		out = append(out, HeldCustomer{CustomerID: rec.CustomerID, Code: rec.ErrorCode, Reason: rec.Reason})
	}
	return out, nil
}

// runBudget reads the run's budget from the vault; nil without a vault.
func (s *Service) runBudget(ctx context.Context, period string) (*Budget, error) {
	if s.vault == nil {
		return nil, nil
	}
	b, err := s.vault.issuer.RunBudget(ctx, period)
	if err != nil {
		return nil, fmt.Errorf("run budget: %w", err)
	}
	return &Budget{Total: b.Total, Used: b.Used, Expected: b.Expected}, nil
}
