package stripesim

import (
	"context"
	"strings"
	"testing"

	"github.com/stripe/stripe-go/v82"
)

func TestCustomerAndPaymentMethod(t *testing.T) {
	s := newSim(t)
	ctx := context.Background()
	cp := &stripe.CustomerCreateParams{Email: stripe.String("ada@example.com"), Name: stripe.String("Ada")}
	cp.AddMetadata("billrun_id", "c1")
	c, err := s.client.V1Customers.Create(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := s.client.V1PaymentMethods.Attach(ctx, "pm_card_visa", &stripe.PaymentMethodAttachParams{Customer: stripe.String(c.ID)})
	if err != nil {
		t.Fatal(err)
	}
	if pm.ID == "pm_card_visa" || pm.Customer == nil || pm.Customer.ID != c.ID || pm.Card.Last4 != "4242" {
		t.Fatalf("attach: want a new saved card of %s ending 4242, got id=%s customer=%v card=%+v", c.ID, pm.ID, pm.Customer, pm.Card)
	}
	up := &stripe.CustomerUpdateParams{InvoiceSettings: &stripe.CustomerUpdateInvoiceSettingsParams{DefaultPaymentMethod: stripe.String(pm.ID)}}
	if _, err := s.client.V1Customers.Update(ctx, c.ID, up); err != nil {
		t.Fatal(err)
	}
	got, err := s.client.V1Customers.Retrieve(ctx, c.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Email != "ada@example.com" || got.Metadata["billrun_id"] != "c1" || got.InvoiceSettings.DefaultPaymentMethod.ID != pm.ID {
		t.Fatalf("retrieve: got %+v", got)
	}
	_, err = s.client.V1Customers.Retrieve(ctx, "cus_missing", nil)
	if se := stripeErr(t, err); se.HTTPStatusCode != 404 || se.Code != stripe.ErrorCodeResourceMissing {
		t.Fatalf("missing customer: got %d %s", se.HTTPStatusCode, se.Code)
	}
	// A second customer cannot take a card saved to the first.
	c2, _ := s.client.V1Customers.Create(ctx, nil)
	_, err = s.client.V1PaymentMethods.Attach(ctx, pm.ID, &stripe.PaymentMethodAttachParams{Customer: stripe.String(c2.ID)})
	if se := stripeErr(t, err); se.HTTPStatusCode != 400 {
		t.Fatalf("attach to second customer: want 400, got %d", se.HTTPStatusCode)
	}
}

func TestAttachDeclineFamilyFails(t *testing.T) {
	s := newSim(t)
	c, err := s.client.V1Customers.Create(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.client.V1PaymentMethods.Attach(context.Background(), "pm_card_visa_chargeDeclinedInsufficientFunds", &stripe.PaymentMethodAttachParams{Customer: stripe.String(c.ID)})
	se := stripeErr(t, err)
	if se.HTTPStatusCode != 402 || se.Type != stripe.ErrorTypeCard || se.DeclineCode != "insufficient_funds" {
		t.Fatalf("got %d %s %s", se.HTTPStatusCode, se.Type, se.DeclineCode)
	}
}

// TestF10_F14_TestCardOutcomes charges each documented test payment method
// off-session, the way billrun does.
func TestF10_F14_TestCardOutcomes(t *testing.T) {
	cases := []struct {
		name, pm          string
		attach            bool
		wantStatus        int
		wantCode          stripe.ErrorCode
		wantDecline       string
		wantPIStatus      stripe.PaymentIntentStatus
		wantLedgerEntries int
	}{
		{"visa succeeds", "pm_card_visa", true, 200, "", "", stripe.PaymentIntentStatusSucceeded, 1},
		{"mastercard succeeds", "pm_card_mastercard", false, 200, "", "", stripe.PaymentIntentStatusSucceeded, 1},
		{"generic decline", "pm_card_visa_chargeDeclined", false, 402, "card_declined", "generic_decline", stripe.PaymentIntentStatusRequiresPaymentMethod, 0},
		{"insufficient funds", "pm_card_visa_chargeDeclinedInsufficientFunds", false, 402, "card_declined", "insufficient_funds", stripe.PaymentIntentStatusRequiresPaymentMethod, 0},
		{"lost card", "pm_card_visa_chargeDeclinedLostCard", false, 402, "card_declined", "lost_card", stripe.PaymentIntentStatusRequiresPaymentMethod, 0},
		{"stolen card", "pm_card_visa_chargeDeclinedStolenCard", false, 402, "card_declined", "stolen_card", stripe.PaymentIntentStatusRequiresPaymentMethod, 0},
		{"expired card", "pm_card_chargeDeclinedExpiredCard", false, 402, "expired_card", "expired_card", stripe.PaymentIntentStatusRequiresPaymentMethod, 0},
		{"customer fail attaches then declines", "pm_card_chargeCustomerFail", true, 402, "card_declined", "generic_decline", stripe.PaymentIntentStatusRequiresPaymentMethod, 0},
		{"F14 authentication required off-session", "pm_card_authenticationRequired", true, 402, "authentication_required", "authentication_required", stripe.PaymentIntentStatusRequiresPaymentMethod, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t)
			ctx := context.Background()
			c, err := s.client.V1Customers.Create(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			pm := tc.pm
			if tc.attach {
				saved, err := s.client.V1PaymentMethods.Attach(ctx, tc.pm, &stripe.PaymentMethodAttachParams{Customer: stripe.String(c.ID)})
				if err != nil {
					t.Fatalf("attach: %v", err)
				}
				pm = saved.ID
			}
			pi, err := s.charge(c.ID, pm, "key-"+tc.name, 1999)
			var piID string
			if tc.wantStatus == 200 {
				if err != nil {
					t.Fatalf("charge: %v", err)
				}
				if pi.Status != tc.wantPIStatus || pi.AmountReceived != 1999 || pi.LatestCharge == nil {
					t.Fatalf("charge: got status %s received %d", pi.Status, pi.AmountReceived)
				}
				piID = pi.ID
			} else {
				se := stripeErr(t, err)
				if se.HTTPStatusCode != tc.wantStatus || se.Type != stripe.ErrorTypeCard || se.Code != tc.wantCode || string(se.DeclineCode) != tc.wantDecline {
					t.Fatalf("got %d %s %s %s", se.HTTPStatusCode, se.Type, se.Code, se.DeclineCode)
				}
				if se.PaymentIntent == nil || se.PaymentIntent.Status != tc.wantPIStatus {
					t.Fatalf("error's payment_intent: %+v", se.PaymentIntent)
				}
				if se.PaymentIntent.LastPaymentError == nil || string(se.PaymentIntent.LastPaymentError.DeclineCode) != tc.wantDecline {
					t.Fatalf("last_payment_error: %+v", se.PaymentIntent.LastPaymentError)
				}
				piID = se.PaymentIntent.ID
			}
			got, err := s.client.V1PaymentIntents.Retrieve(ctx, piID, nil)
			if err != nil || got.Status != tc.wantPIStatus {
				t.Fatalf("retrieve: %v %v", got, err)
			}
			led := s.ledger()
			if len(led) != tc.wantLedgerEntries {
				t.Fatalf("ledger: want %d entries, got %+v", tc.wantLedgerEntries, led)
			}
			if len(led) == 1 && (led[0].PaymentIntentID != piID || led[0].Customer != c.ID || led[0].Amount != 1999 ||
				led[0].Currency != "usd" || led[0].Metadata["billrun_period"] != "2026-10" || led[0].IdempotencyKey != "key-"+tc.name) {
				t.Fatalf("ledger entry: %+v", led[0])
			}
		})
	}
}

func TestAuthenticationRequiredOnSessionNeedsAction(t *testing.T) {
	s := newSim(t)
	cust, pm := s.customer("pm_card_authenticationRequired")
	p := chargeParams(cust, pm, "k", 1000)
	p.OffSession = nil
	pi, err := s.client.V1PaymentIntents.Create(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if pi.Status != stripe.PaymentIntentStatusRequiresAction || pi.NextAction == nil || len(s.ledger()) != 0 {
		t.Fatalf("got %s next_action=%v ledger=%d", pi.Status, pi.NextAction, len(s.ledger()))
	}
}

func TestPaymentIntentSemanticErrors(t *testing.T) {
	s := newSim(t)
	cust, pm := s.customer("pm_card_visa")
	other, _ := s.customer("pm_card_visa")
	cases := []struct {
		name      string
		params    *stripe.PaymentIntentCreateParams
		wantCode  stripe.ErrorCode
		wantParam string
	}{
		{"unknown customer", chargeParams("cus_nope", "pm_card_visa", "", 1000), stripe.ErrorCodeResourceMissing, "customer"},
		{"unknown payment method", chargeParams(cust, "pm_nope", "", 1000), stripe.ErrorCodeResourceMissing, "payment_method"},
		{"card of another customer", chargeParams(other, pm, "", 1000), "payment_method_unexpected_state", "payment_method"},
		{"amount too small", chargeParams(cust, pm, "", 49), stripe.ErrorCodeAmountTooSmall, "amount"},
		{"bad currency", func() *stripe.PaymentIntentCreateParams {
			p := chargeParams(cust, pm, "", 1000)
			p.Currency = stripe.String("us")
			return p
		}(), "parameter_invalid_string", "currency"},
		{"off_session without confirm", func() *stripe.PaymentIntentCreateParams {
			p := chargeParams(cust, pm, "", 1000)
			p.Confirm = stripe.Bool(false)
			return p
		}(), "parameter_invalid_string", "off_session"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.client.V1PaymentIntents.Create(context.Background(), tc.params)
			se := stripeErr(t, err)
			if se.HTTPStatusCode != 400 || se.Type != stripe.ErrorTypeInvalidRequest || se.Code != tc.wantCode || se.Param != tc.wantParam {
				t.Fatalf("got %d %s %s param=%s: %s", se.HTTPStatusCode, se.Type, se.Code, se.Param, se.Msg)
			}
		})
	}
	if n := len(s.ledger()); n != 0 {
		t.Fatalf("ledger: want empty, got %d", n)
	}
}

func TestCustomerCreateWithPaymentMethod(t *testing.T) {
	s := newSim(t)
	ctx := context.Background()
	c, err := s.client.V1Customers.Create(ctx, &stripe.CustomerCreateParams{
		PaymentMethod:   stripe.String("pm_card_visa"),
		InvoiceSettings: &stripe.CustomerCreateInvoiceSettingsParams{DefaultPaymentMethod: stripe.String("pm_card_visa")},
	})
	if err != nil {
		t.Fatal(err)
	}
	def := c.InvoiceSettings.DefaultPaymentMethod
	if def == nil || !strings.HasPrefix(def.ID, "pm_") || def.ID == "pm_card_visa" {
		t.Fatalf("default payment method: %+v", def)
	}
	pm, err := s.client.V1PaymentMethods.Retrieve(ctx, def.ID, nil)
	if err != nil || pm.Customer == nil || pm.Customer.ID != c.ID {
		t.Fatalf("saved card: %+v %v", pm, err)
	}
	if _, err := s.charge(c.ID, def.ID, "k", 1000); err != nil {
		t.Fatal(err)
	}

	_, err = s.client.V1Customers.Create(ctx, &stripe.CustomerCreateParams{PaymentMethod: stripe.String("pm_card_visa_chargeDeclined")})
	if se := stripeErr(t, err); se.HTTPStatusCode != 402 {
		t.Fatalf("declined card on create: got %d", se.HTTPStatusCode)
	}
	_, err = s.client.V1Customers.Create(ctx, &stripe.CustomerCreateParams{
		InvoiceSettings: &stripe.CustomerCreateInvoiceSettingsParams{DefaultPaymentMethod: stripe.String(def.ID)},
	})
	if se := stripeErr(t, err); se.HTTPStatusCode != 400 || se.Param != "invoice_settings[default_payment_method]" {
		t.Fatalf("default not attached: got %d %s", se.HTTPStatusCode, se.Param)
	}
	if n := len(s.srv.st.customers); n != 1 {
		t.Fatalf("refused creates made customers: %d", n)
	}
	_, err = s.client.V1PaymentMethods.Retrieve(ctx, "pm_missing", nil)
	if se := stripeErr(t, err); se.HTTPStatusCode != 404 {
		t.Fatalf("missing payment method: got %d", se.HTTPStatusCode)
	}
}

func TestCustomerUpdate(t *testing.T) {
	s := newSim(t)
	ctx := context.Background()
	cp := &stripe.CustomerCreateParams{Name: stripe.String("Ada")}
	cp.AddMetadata("keep", "1")
	cp.AddMetadata("drop", "1")
	c, _ := s.client.V1Customers.Create(ctx, cp)
	up := &stripe.CustomerUpdateParams{Description: stripe.String("vip")}
	up.AddMetadata("drop", "") // Stripe's rule: an empty value deletes the key
	up.AddMetadata("new", "2")
	got, err := s.client.V1Customers.Update(ctx, c.ID, up)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "Ada" || got.Description != "vip" || len(got.Metadata) != 2 || got.Metadata["keep"] != "1" || got.Metadata["new"] != "2" {
		t.Fatalf("update: %+v", got)
	}
	_, err = s.client.V1Customers.Update(ctx, c.ID, &stripe.CustomerUpdateParams{
		InvoiceSettings: &stripe.CustomerUpdateInvoiceSettingsParams{DefaultPaymentMethod: stripe.String("pm_missing")},
	})
	if se := stripeErr(t, err); se.HTTPStatusCode != 400 {
		t.Fatalf("unattached default: got %d", se.HTTPStatusCode)
	}
	_, err = s.client.V1Customers.Update(ctx, "cus_missing", up)
	if se := stripeErr(t, err); se.HTTPStatusCode != 404 {
		t.Fatalf("missing customer: got %d", se.HTTPStatusCode)
	}
}
