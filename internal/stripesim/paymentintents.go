package stripesim

import (
	"fmt"
	"net/http"
	"strings"
)

// Amount limits Stripe applies to card charges (in minor units of any
// currency here; Stripe's real minimum varies a little by currency).
const (
	minChargeAmount = 50
	maxChargeAmount = 99_999_999
)

func paymentIntentCreateSchema() schema {
	return schema{
		"amount":                      {kind: kInt, required: true},
		"currency":                    {kind: kString, required: true},
		"customer":                    {kind: kString},
		"payment_method":              {kind: kString},
		"confirm":                     {kind: kBool},
		"off_session":                 {kind: kBoolOrEnum, enum: []string{"one_off", "recurring"}},
		"metadata":                    {kind: kMetadata},
		"description":                 {kind: kString},
		"receipt_email":               {kind: kString},
		"statement_descriptor":        {kind: kString, maxLen: 22},
		"statement_descriptor_suffix": {kind: kString, maxLen: 22},
		"setup_future_usage":          {kind: kString, enum: []string{"off_session", "on_session"}},
		"payment_method_types":        {kind: kStringList},
		"capture_method":              {kind: kString, enum: []string{"automatic", "automatic_async"}},
		"confirmation_method":         {kind: kString, enum: []string{"automatic", "manual"}},
		"error_on_requires_action":    {kind: kBool},
		"return_url":                  {kind: kString},
		"expand":                      {kind: kStringList},
		"automatic_payment_methods": {kind: kObject, fields: schema{
			"enabled":         {kind: kBool, required: true},
			"allow_redirects": {kind: kString, enum: []string{"always", "never"}},
		}},
	}
}

// cardError is a 402 card_error, carrying the failed PaymentIntent and payment
// method when there are some.
func cardError(d *decline, chargeID string, pi *paymentIntent, pm *paymentMethod) *apiError {
	e := apiErrorf(http.StatusPaymentRequired, errTypeCard, d.code, "%s", d.message)
	e.DeclineCode = d.declineCode
	e.Charge = chargeID
	e.PaymentIntent = pi
	e.PaymentMethod = pm
	return e
}

// Webhook event types the simulator delivers.
const (
	eventPISucceeded = "payment_intent.succeeded"
	eventPIFailed    = "payment_intent.payment_failed"
)

func (s *Server) createPaymentIntent(c *call) result {
	p := c.p
	amount, _ := p.integer("amount")
	currency := strings.ToLower(p.str("currency"))
	custID, pmID := p.str("customer"), p.str("payment_method")
	confirm, offSession := p.boolean("confirm"), p.boolean("off_session")

	switch {
	case len(currency) != 3 || strings.Trim(currency, "abcdefghijklmnopqrstuvwxyz") != "":
		return failure(invalidRequest("Invalid currency: "+p.str("currency")+". Stripe currently supports these currencies: usd, eur, gbp, …", "currency", "parameter_invalid_string"))
	case amount < minChargeAmount:
		return failure(invalidRequest(fmt.Sprintf("Amount must be at least %d in minor units", minChargeAmount), "amount", "amount_too_small"))
	case amount > maxChargeAmount:
		return failure(invalidRequest(fmt.Sprintf("Amount must be no more than %d in minor units", maxChargeAmount), "amount", "amount_too_large"))
	case offSession && !confirm:
		return failure(invalidRequest("You can only pass `off_session` when `confirm` is true.", "off_session", "parameter_invalid_string"))
	case confirm && pmID == "":
		return failure(invalidRequest("You cannot confirm this PaymentIntent because it's missing a payment method. You can either update the PaymentIntent with a payment method and then confirm it again, or confirm it again directly with a payment method.", "payment_method", "payment_intent_unexpected_state"))
	}
	if custID != "" {
		s.mu.Lock()
		_, found := s.st.customers[custID]
		s.mu.Unlock()
		if !found {
			return failure(resourceMissing(http.StatusBadRequest, "customer", custID, "customer"))
		}
	}

	change := &batch{}
	var pm pmRecord
	if pmID != "" {
		var isNew bool
		var e *apiError
		pm, isNew, e = s.resolvePaymentMethod(pmID, "payment_method", c.now)
		if e != nil {
			return failure(e)
		}
		if owner := pm.PM.Customer; owner != nil && *owner != custID {
			return failure(invalidRequest("The provided PaymentMethod is attached to another Customer ("+*owner+"); pass that customer, or a PaymentMethod attached to "+custID+".", "payment_method", "payment_method_unexpected_state"))
		}
		if isNew {
			change.PMs = append(change.PMs, pm)
		}
	}

	pi := paymentIntent{
		ID: newID("pi"), Object: "payment_intent", Amount: amount, Currency: currency,
		CaptureMethod: "automatic", ConfirmationMethod: "automatic", Created: c.now.Unix(),
		Description: optString(p, "description"), ReceiptEmail: optString(p, "receipt_email"),
		StatementDescriptor: optString(p, "statement_descriptor"), SetupFutureUsage: optString(p, "setup_future_usage"),
		Metadata: nonNilMap(p.metadata("metadata")), PaymentMethodTypes: []string{"card"},
		Status: "requires_payment_method",
	}
	pi.ClientSecret = pi.ID + "_secret_" + strings.TrimPrefix(newID("s"), "s_")
	if custID != "" {
		pi.Customer = &custID
	}
	if pmID != "" {
		pi.PaymentMethod = &pm.PM.ID
		pi.Status = "requires_confirmation"
	}
	// The created event shows the PaymentIntent before its confirmation.
	created := pi
	events := []string{"payment_intent.created"}
	var failed *apiError
	if confirm {
		tc := testCards()[pm.TestCard]
		chargeID := newID("ch")
		pi.LatestCharge = &chargeID
		decl := tc.chargeDecline
		if decl == nil && tc.authRequired != nil && offSession {
			decl = tc.authRequired
		}
		switch {
		case decl != nil:
			pi.Status = "requires_payment_method"
			pi.PaymentMethod = nil
			pi.LastPaymentError = &lastPaymentError{
				Charge: chargeID, Code: decl.code, DeclineCode: decl.declineCode, Message: decl.message,
				PaymentMethod: &pm.PM, Type: errTypeCard,
				DocURL: "https://stripe.com/docs/error-codes/" + strings.ReplaceAll(decl.code, "_", "-"),
			}
			events = append(events, eventPIFailed)
			piCopy, pmCopy := pi, pm.PM
			failed = cardError(decl, chargeID, &piCopy, &pmCopy)
		case tc.authRequired != nil:
			pi.Status = "requires_action"
			pi.LatestCharge = nil
			pi.NextAction = map[string]any{"type": "use_stripe_sdk", "use_stripe_sdk": map[string]any{"type": "three_d_secure_redirect", "stripe_js": "https://hooks.stripe.com/redirect/authenticate/" + pi.ID}}
			events = append(events, "payment_intent.requires_action")
		default:
			pi.Status = "succeeded"
			pi.AmountReceived = amount
			events = append(events, eventPISucceeded)
			change.Ledger = append(change.Ledger, Payment{
				PaymentIntentID: pi.ID, Customer: custID, Amount: amount, Currency: currency,
				Metadata: pi.Metadata, IdempotencyKey: c.idemKey, Created: c.now,
			})
		}
	}

	s.mu.Lock()
	change.PIs = append(change.PIs, piRecord{PI: pi, Seq: s.st.nextSeq(), CreatedAt: c.now})
	for _, typ := range events {
		obj := pi
		if typ == "payment_intent.created" {
			obj = created
		}
		change.Events = append(change.Events, s.newEventLocked(c, typ, obj))
	}
	s.mu.Unlock()
	if failed != nil {
		return failureWith(failed, change)
	}
	return success(pi, change)
}

func (s *Server) retrievePaymentIntent(c *call) result {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec := s.st.pis[c.args[0]]; rec != nil {
		return success(rec.PI, nil)
	}
	return failure(resourceMissing(http.StatusNotFound, "payment_intent", c.args[0], "intent"))
}

func paymentIntentListSchema() schema {
	return listSchema(schema{
		"customer": {kind: kString},
	})
}

func (s *Server) listPaymentIntents(c *call) result {
	custID := c.p.str("customer")
	created, hasCreated := c.p.rangeOf("created")
	s.mu.Lock()
	var items []listItem
	for _, rec := range s.st.pis {
		if custID != "" && (rec.PI.Customer == nil || *rec.PI.Customer != custID) {
			continue
		}
		if hasCreated && !created.contains(rec.PI.Created) {
			continue
		}
		items = append(items, listItem{seq: rec.Seq, obj: rec.PI})
	}
	cursors := func(id string) (int64, bool) {
		rec := s.st.pis[id]
		if rec == nil {
			return 0, false
		}
		return rec.Seq, true
	}
	res := s.listPage(c, "/v1/payment_intents", "payment_intent", items, cursors)
	s.mu.Unlock()
	return res
}
