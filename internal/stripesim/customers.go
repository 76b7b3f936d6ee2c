package stripesim

import (
	"net/http"
)

// expandOnly is the schema of a retrieve: expand is accepted, and ignored
// (the simulator always returns ids for expandable fields).
func expandOnly() schema {
	return schema{"expand": {kind: kStringList}}
}

func customerSchema() schema {
	return schema{
		"description":    {kind: kString},
		"email":          {kind: kString, maxLen: 512},
		"expand":         {kind: kStringList},
		"metadata":       {kind: kMetadata},
		"name":           {kind: kString, maxLen: 256},
		"payment_method": {kind: kString},
		"phone":          {kind: kString, maxLen: 20},
		"invoice_settings": {kind: kObject, fields: schema{
			"default_payment_method": {kind: kString},
		}},
	}
}

func customerUpdateSchema() schema {
	sc := customerSchema()
	delete(sc, "payment_method") // attach through /v1/payment_methods/:id/attach
	return sc
}

func optString(p params, name string) *string {
	if !p.has(name) {
		return nil
	}
	v := p.str(name)
	return &v
}

func (s *Server) createCustomer(c *call) result {
	cust := customer{
		ID: newID("cus"), Object: "customer", Created: c.now.Unix(),
		Description: optString(c.p, "description"), Email: optString(c.p, "email"),
		Name: optString(c.p, "name"), Phone: optString(c.p, "phone"),
		Metadata: nonNilMap(c.p.metadata("metadata")),
	}
	change := &batch{}
	if pmID := c.p.str("payment_method"); pmID != "" {
		pm, e := s.attach(pmID, cust.ID, c.now)
		if e != nil {
			return failure(e)
		}
		change.PMs = append(change.PMs, pm)
		if def := c.p.object("invoice_settings").str("default_payment_method"); def == pmID {
			cust.InvoiceSettings.DefaultPaymentMethod = &pm.PM.ID
		}
	}
	if def := c.p.object("invoice_settings").str("default_payment_method"); def != "" && cust.InvoiceSettings.DefaultPaymentMethod == nil {
		return failure(notAttachedError(def))
	}
	s.mu.Lock()
	rec := custRecord{Customer: cust, Seq: s.st.nextSeq()}
	s.mu.Unlock()
	change.Customers = append(change.Customers, rec)
	return success(cust, change)
}

func (s *Server) retrieveCustomer(c *call) result {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.st.customers[c.args[0]]
	if rec == nil {
		return failure(resourceMissing(http.StatusNotFound, "customer", c.args[0], "id"))
	}
	return success(rec.Customer, nil)
}

func (s *Server) updateCustomer(c *call) result {
	def := c.p.object("invoice_settings").str("default_payment_method")
	s.mu.Lock()
	rec := s.st.customers[c.args[0]]
	var updated custRecord
	if rec != nil {
		updated = *rec
	}
	var defPM pmRecord
	if p := s.st.pms[def]; p != nil {
		defPM = *p
	}
	s.mu.Unlock()
	if rec == nil {
		return failure(resourceMissing(http.StatusNotFound, "customer", c.args[0], "id"))
	}
	cust := &updated.Customer
	for name, dst := range map[string]**string{"description": &cust.Description, "email": &cust.Email, "name": &cust.Name, "phone": &cust.Phone} {
		if c.p.has(name) {
			*dst = optString(c.p, name)
		}
	}
	if c.p.has("metadata") {
		cust.Metadata = mergeMetadata(cust.Metadata, c.p.metadata("metadata"))
	}
	if def != "" {
		if defPM.PM.Customer == nil || *defPM.PM.Customer != cust.ID {
			return failure(notAttachedError(def))
		}
		cust.InvoiceSettings.DefaultPaymentMethod = &def
	}
	return success(*cust, &batch{Customers: []custRecord{updated}})
}

func notAttachedError(pmID string) *apiError {
	return invalidRequest("The customer does not have a payment method with the ID "+pmID+". The payment method must be attached to the customer.", "invoice_settings[default_payment_method]", "resource_missing")
}

// mergeMetadata applies Stripe's update rule: keys are set, an empty value
// deletes a key.
func mergeMetadata(old, upd map[string]string) map[string]string {
	out := make(map[string]string, len(old)+len(upd))
	for k, v := range old {
		out[k] = v
	}
	for k, v := range upd {
		if v == "" {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
