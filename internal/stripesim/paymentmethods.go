package stripesim

import (
	"fmt"
	"net/http"
	"time"
)

func attachSchema() schema {
	return schema{
		"customer": {kind: kString, required: true},
		"expand":   {kind: kStringList},
	}
}

// resolvePaymentMethod finds a payment method by id. A test payment method id
// (pm_card_visa…) makes a new PaymentMethod, as Stripe does each time one is
// used; it is returned with isNew set and must be committed by the caller.
func (s *Server) resolvePaymentMethod(id, param string, now time.Time) (pmRecord, bool, *apiError) {
	if tc, ok := testCards()[id]; ok {
		return pmRecord{PM: newPaymentMethod(tc, now), TestCard: id}, true, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec := s.st.pms[id]; rec != nil {
		return *rec, false, nil
	}
	return pmRecord{}, false, resourceMissing(http.StatusBadRequest, "PaymentMethod", id, param)
}

func newPaymentMethod(tc testCard, now time.Time) paymentMethod {
	return paymentMethod{
		ID: newID("pm"), Object: "payment_method", AllowRedisplay: "unspecified",
		Card: card{
			Brand: tc.brand, DisplayBrand: tc.brand, Country: "US", ExpMonth: 12, ExpYear: int64(now.Year() + 3),
			Fingerprint: fmt.Sprintf("sim%s%s", tc.brand, tc.last4), Funding: tc.funding, Last4: tc.last4,
		},
		Created: now.Unix(), Metadata: map[string]string{}, Type: "card",
	}
}

// attach attaches a payment method to a customer (whose existence the caller
// has checked) and returns the record to commit. As in Stripe, cards of the
// chargeDeclined family cannot be attached: attaching fails with their decline.
func (s *Server) attach(pmID, custID string, now time.Time) (pmRecord, *apiError) {
	rec, _, e := s.resolvePaymentMethod(pmID, "payment_method", now)
	if e != nil {
		return pmRecord{}, e
	}
	if d := testCards()[rec.TestCard].attachDecline; d != nil {
		return pmRecord{}, cardError(d, "", nil, nil)
	}
	if rec.PM.Customer != nil {
		if *rec.PM.Customer == custID {
			return rec, nil
		}
		return pmRecord{}, invalidRequest("The payment method you provided has already been attached to a customer.", "payment_method", "payment_method_unexpected_state")
	}
	rec.PM.Customer = &custID
	return rec, nil
}

func (s *Server) attachPaymentMethod(c *call) result {
	custID := c.p.str("customer")
	s.mu.Lock()
	_, custExists := s.st.customers[custID]
	s.mu.Unlock()
	if !custExists {
		return failure(resourceMissing(http.StatusBadRequest, "customer", custID, "customer"))
	}
	rec, e := s.attach(c.args[0], custID, c.now)
	if e != nil {
		return failure(e)
	}
	return success(rec.PM, &batch{PMs: []pmRecord{rec}})
}

func (s *Server) retrievePaymentMethod(c *call) result {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec := s.st.pms[c.args[0]]; rec != nil {
		return success(rec.PM, nil)
	}
	return failure(resourceMissing(http.StatusNotFound, "PaymentMethod", c.args[0], "id"))
}
