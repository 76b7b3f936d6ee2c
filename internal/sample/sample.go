// Package sample makes and loads billing customers for local runs: a seeded,
// realistic mix for demos (most pay, some decline, some need authentication,
// some are billed above their ceiling), and CSV files for real lists. Either way
// each customer gets a Stripe customer (in the simulator locally) before it is
// stored, as an operator's onboarding would do.
package sample

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/stripe/stripe-go/v82"
	"golang.org/x/sync/errgroup"

	"billrun.dev/billrun/internal/billing"
	"billrun.dev/billrun/internal/store"
)

// Kind is what a sample customer is expected to do when billed.
type Kind string

// The kinds of sample customer and the test payment methods that make them so.
const (
	KindPays         Kind = "pays"
	KindDeclines     Kind = "declines"
	KindNeedsAuth    Kind = "needs_authentication"
	KindAboveCeiling Kind = "above_ceiling"
	// creationWorkers create Stripe customers concurrently.
	creationWorkers = 8
)

// mix is the share of each kind, in percent, of a seeded sample.
var mix = []struct {
	kind    Kind
	percent int
}{
	{KindPays, 88}, {KindDeclines, 5}, {KindNeedsAuth, 4}, {KindAboveCeiling, 3},
}

var payingCards = []string{"pm_card_visa", "pm_card_mastercard", "pm_card_amex", "pm_card_visa_debit"}
var decliningCards = []string{"pm_card_visa_chargeDeclined", "pm_card_visa_chargeDeclinedInsufficientFunds", "pm_card_chargeDeclinedExpiredCard"}

// Generate returns n customers (ids cus_00001…) drawn from seed; the same seed
// gives the same customers. Their StripeCustomerID is empty until Store.
func Generate(n int, seed int64) []billing.Customer {
	r := rand.New(rand.NewPCG(uint64(seed), 0x62696c6c72756e))
	out := make([]billing.Customer, n)
	for i := range out {
		plan := int64(500 + 100*r.IntN(95)) // $5.00 to $99.00
		c := billing.Customer{
			ID:            fmt.Sprintf("cus_%05d", i+1),
			PaymentMethod: payingCards[r.IntN(len(payingCards))],
			Currency:      "usd",
			AmountSource:  billing.SourcePlan,
			PlanAmount:    plan,
			Ceiling:       plan * 2,
			Active:        true,
		}
		switch pick(r) {
		case KindDeclines:
			c.PaymentMethod = decliningCards[r.IntN(len(decliningCards))]
		case KindNeedsAuth:
			c.PaymentMethod = "pm_card_authenticationRequired"
		case KindAboveCeiling:
			// A data bug: the amount is ten times the plan, the ceiling is not.
			c.PlanAmount = plan * 10
		}
		out[i] = c
	}
	return out
}

func pick(r *rand.Rand) Kind {
	n := r.IntN(100)
	for _, m := range mix {
		if n < m.percent {
			return m.kind
		}
		n -= m.percent
	}
	return KindPays
}

// Header is the CSV header ReadCSV expects (stripe_customer_id may be empty,
// ceiling 0 means none).
var Header = []string{"id", "stripe_customer_id", "payment_method", "currency", "plan_amount", "ceiling", "active"}

// ReadCSV reads plan customers from CSV with Header's columns, reporting every
// bad row at once.
func ReadCSV(r io.Reader) ([]billing.Customer, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = len(Header)
	rows, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("read csv: %w", err)
	}
	if len(rows) == 0 || strings.Join(rows[0], ",") != strings.Join(Header, ",") {
		return nil, fmt.Errorf("read csv: the first line must be %s", strings.Join(Header, ","))
	}
	var out []billing.Customer
	var problems []error
	for i, row := range rows[1:] {
		line := i + 2
		amount, err1 := strconv.ParseInt(row[4], 10, 64)
		ceiling, err2 := strconv.ParseInt(row[5], 10, 64)
		active, err3 := strconv.ParseBool(row[6])
		if err := errors.Join(err1, err2, err3, billing.ValidateCustomerID(row[0])); err != nil {
			problems = append(problems, fmt.Errorf("line %d: %w", line, err))
			continue
		}
		out = append(out, billing.Customer{
			ID: row[0], StripeCustomerID: row[1], PaymentMethod: row[2], Currency: strings.ToLower(row[3]),
			AmountSource: billing.SourcePlan, PlanAmount: amount, Ceiling: ceiling, Active: active,
		})
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("read csv: %w", errors.Join(problems...))
	}
	return out, nil
}

// Store creates a Stripe customer for each customer without one, then stores
// them all (replacing customers with the same id).
func Store(ctx context.Context, db store.Backend, sc *stripe.Client, customers []billing.Customer) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(creationWorkers)
	for i := range customers {
		if customers[i].StripeCustomerID != "" {
			continue
		}
		g.Go(func() error {
			c := &customers[i]
			params := &stripe.CustomerCreateParams{Description: stripe.String("billrun sample " + c.ID)}
			params.AddMetadata("billrun_customer", c.ID)
			sCust, err := sc.V1Customers.Create(gctx, params)
			if err != nil {
				return fmt.Errorf("create Stripe customer for %s: %w", c.ID, err)
			}
			c.StripeCustomerID = sCust.ID
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return billing.PutCustomers(ctx, db, customers)
}

// Count returns how many customers are stored.
func Count(ctx context.Context, r store.Backend) (int64, error) {
	a, err := r.Aggregate(ctx, store.Query{Collection: "customers"})
	if err != nil {
		return 0, fmt.Errorf("count customers: %w", err)
	}
	return a.Count, nil
}

// List returns the stored customers in id order.
func List(ctx context.Context, r store.Reader) ([]billing.Customer, error) {
	docs, err := r.Query(ctx, store.Query{Collection: "customers"})
	if err != nil {
		return nil, fmt.Errorf("list customers: %w", err)
	}
	out := make([]billing.Customer, 0, len(docs))
	for _, d := range docs {
		c, err := billing.GetCustomer(ctx, r, d.ID())
		if err != nil {
			return nil, fmt.Errorf("list customers: %w", err)
		}
		out = append(out, c)
	}
	return out, nil
}
