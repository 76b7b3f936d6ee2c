package billing

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"billrun.dev/billrun/internal/store"
)

// Amount sources.
const (
	// SourcePlan charges PlanAmount every period.
	SourcePlan = "plan"
	// SourceUsage charges the sum of the period's usage lines.
	SourceUsage = "usage"
)

// Customer is customers/{ID}.
type Customer struct {
	ID               string
	StripeCustomerID string
	PaymentMethod    string
	// Currency is a lowercase ISO 4217 code.
	Currency string
	// AmountSource is SourcePlan or SourceUsage.
	AmountSource string
	// PlanAmount is in minor units.
	PlanAmount int64
	// Usage maps a period to its usage lines.
	Usage map[string][]UsageLine
	// Ceiling is the most this customer may be charged in one period (minor
	// units), from a source independent of the amounts; the vault caps keys with
	// it. 0 means no ceiling recorded.
	Ceiling int64
	Active  bool
}

// UsageLine is one metered line: Quantity × UnitAmount minor units.
type UsageLine struct {
	Description string
	Quantity    int64
	UnitAmount  int64
}

// Customer document fields.
const (
	fStripeCustomer = "stripe_customer_id"
	fPaymentMethod  = "payment_method"
	fCurrency       = "currency"
	fAmountSource   = "amount_source"
	fPlanAmount     = "plan_amount"
	fUsage          = "usage"
	fCeiling        = "ceiling"
	fActive         = "active"
)

// Data encodes the customer document.
func (c Customer) Data() store.Data {
	usage := map[string]any{}
	for period, lines := range c.Usage {
		list := make([]any, len(lines))
		for i, l := range lines {
			list[i] = map[string]any{"description": l.Description, "quantity": l.Quantity, "unit_amount": l.UnitAmount}
		}
		usage[period] = list
	}
	return store.Data{
		fStripeCustomer: c.StripeCustomerID,
		fPaymentMethod:  c.PaymentMethod,
		fCurrency:       c.Currency,
		fAmountSource:   c.AmountSource,
		fPlanAmount:     c.PlanAmount,
		fUsage:          usage,
		fCeiling:        c.Ceiling,
		fActive:         c.Active,
	}
}

// customerFrom decodes a customer document.
func customerFrom(doc store.Doc) (Customer, error) {
	f := &fields{path: doc.Path, data: doc.Data}
	c := Customer{
		ID:               doc.ID(),
		StripeCustomerID: f.str(fStripeCustomer),
		PaymentMethod:    f.str(fPaymentMethod),
		Currency:         f.str(fCurrency),
		AmountSource:     f.str(fAmountSource),
		PlanAmount:       f.int(fPlanAmount),
		Ceiling:          f.int(fCeiling),
		Active:           f.bool(fActive),
	}
	if usage := f.object(fUsage); len(usage) > 0 {
		c.Usage = map[string][]UsageLine{}
		for period, v := range usage {
			list, ok := v.([]any)
			if !ok {
				f.fail(fUsage+"."+period, v, "array")
				continue
			}
			for _, e := range list {
				m, ok := e.(map[string]any)
				if !ok {
					f.fail(fUsage+"."+period, e, "map element")
					continue
				}
				lf := &fields{path: doc.Path, data: m}
				c.Usage[period] = append(c.Usage[period], UsageLine{
					Description: lf.str("description"),
					Quantity:    lf.int("quantity"),
					UnitAmount:  lf.int("unit_amount"),
				})
				if lf.err != nil && f.err == nil {
					f.err = lf.err
				}
			}
		}
	}
	return c, f.err
}

// Decision is what to do about one customer in one period, before any Stripe call.
type Decision struct {
	// State is StatePending (charge Amount), StateSkipped or StateFailed.
	State    State
	Amount   int64
	Currency string
	// ErrorCode and Reason explain a skipped or failed decision.
	ErrorCode string
	Reason    string
}

// Decide computes what the customer owes for period and whether it can be
// charged. Problems with the customer's data are decisions (StateFailed), not
// errors: they are recorded and reported, never retried.
func (c Customer) Decide(period string) Decision {
	fail := func(code, format string, args ...any) Decision {
		return Decision{State: StateFailed, ErrorCode: code, Reason: fmt.Sprintf(format, args...)}
	}
	if !c.Active {
		return Decision{State: StateSkipped, ErrorCode: "inactive", Reason: "customer is inactive"}
	}
	currency := strings.ToLower(c.Currency)
	if !currencyRE.MatchString(currency) {
		return fail("invalid_currency", "currency %q is not a three-letter ISO code", c.Currency)
	}
	var amount int64
	switch c.AmountSource {
	case SourcePlan:
		amount = c.PlanAmount
	case SourceUsage:
		for _, l := range c.Usage[period] {
			if l.Quantity < 0 || l.UnitAmount < 0 {
				return fail("invalid_usage", "usage line %q has a negative quantity or unit amount", l.Description)
			}
			if l.Quantity != 0 && l.UnitAmount > (math.MaxInt64-amount)/l.Quantity {
				return fail("amount_overflow", "usage for %s overflows", period)
			}
			amount += l.Quantity * l.UnitAmount
		}
	default:
		return fail("invalid_amount_source", "amount_source %q is neither %q nor %q", c.AmountSource, SourcePlan, SourceUsage)
	}
	switch {
	case amount < 0:
		return fail("invalid_amount", "amount %d is negative", amount)
	case amount == 0:
		return Decision{State: StateSkipped, Currency: currency, ErrorCode: "zero_amount", Reason: "nothing to charge"}
	case c.StripeCustomerID == "":
		return fail("no_stripe_customer", "customer has no Stripe customer id")
	case c.PaymentMethod == "":
		return fail("no_payment_method", "customer has no default payment method")
	}
	return Decision{State: StatePending, Amount: amount, Currency: currency}
}

// PutCustomers writes customers (replacing existing ones), at most
// store.MaxWrites per transaction. It is how seeds and tests load customers.
func PutCustomers(ctx context.Context, b store.Backend, customers []Customer) error {
	for _, c := range customers {
		if err := ValidateCustomerID(c.ID); err != nil {
			return fmt.Errorf("put customers: %w", err)
		}
	}
	for start := 0; start < len(customers); start += store.MaxWrites {
		batch := customers[start:min(start+store.MaxWrites, len(customers))]
		err := b.RunTransaction(ctx, func(ctx context.Context, tx store.Tx) error {
			for _, c := range batch {
				if err := tx.Set(customerPath(c.ID), c.Data()); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("put customers: %w", err)
		}
	}
	return nil
}

// GetCustomer reads one customer; store.ErrNotFound if absent.
func GetCustomer(ctx context.Context, r store.Reader, id string) (Customer, error) {
	doc, err := r.Get(ctx, customerPath(id))
	if err != nil {
		return Customer{}, fmt.Errorf("get customer %s: %w", id, err)
	}
	return customerFrom(doc)
}

// decideDoc decodes a customer document and decides for it, turning
// undecodable data into a failed decision (the data is at fault, not the
// caller). The customer carries at least its id.
func decideDoc(doc store.Doc, period string) (Customer, Decision) {
	c, err := customerFrom(doc)
	if err != nil {
		return Customer{ID: doc.ID()}, Decision{State: StateFailed, ErrorCode: "invalid_customer_data", Reason: err.Error()}
	}
	return c, c.Decide(period)
}

// isNotFound reports a missing document.
func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
