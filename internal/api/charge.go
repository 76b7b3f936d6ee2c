package api

import (
	"net/http"

	"billrun.dev/billrun/internal/billing"
)

// ChargeRequest is Charge's body. It has no amount: the amount comes from the
// write-ahead record, and a body carrying one is refused as unknown.
type ChargeRequest struct {
	Period     string `json:"period"`
	CustomerID string `json:"customer_id"`
	KeyRef     string `json:"key_ref,omitempty"`
	// ExecutionID is the execution that owns the run's lease (for a child
	// segment, its parent): Charge keeps that lease alive while a slow page
	// is charged (billing.ChargeRequest.Execution). The workflow always sends
	// it; without it no lease is renewed.
	ExecutionID string `json:"execution_id,omitempty"`
}

// ChargeResponse is Charge's answer: 200 (charged, already_charged, skipped),
// 422 (declined, requires_action, held_for_review, failed) or 503/429 (retry).
type ChargeResponse struct {
	Outcome       string `json:"outcome"`
	CustomerID    string `json:"customer_id"`
	PaymentIntent string `json:"payment_intent,omitempty"`
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency,omitempty"`
	Attempts      int64  `json:"attempts"`
	Reason        string `json:"reason,omitempty"`
	ErrorCode     string `json:"error_code,omitempty"`
	DeclineCode   string `json:"decline_code,omitempty"`
	Reconciled    bool   `json:"reconciled,omitempty"`
}

// Charge charges one customer for one period, exactly once however often it is
// called.
func Charge(svc *billing.Service, b Base) http.Handler {
	b = b.withDefaults()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req ChargeRequest
		if err := decode(w, r, b.MaxBodyBytes, &req); err != nil {
			fail(w, r, b.Log, NameCharge, err)
			return
		}
		res, err := svc.Charge(r.Context(), billing.ChargeRequest{
			Period: req.Period, CustomerID: req.CustomerID, KeyRef: req.KeyRef, Execution: req.ExecutionID,
		})
		if err != nil {
			fail(w, r, b.Log, NameCharge, err)
			return
		}
		out := ChargeResponse{
			Outcome: string(res.Outcome), CustomerID: res.CustomerID, PaymentIntent: res.PaymentIntent,
			Amount: res.Amount, Currency: res.Currency, Attempts: res.Attempts, Reconciled: res.Reconciled,
		}
		status := http.StatusOK
		switch {
		case res.Outcome == billing.OutcomeRetry:
			status = http.StatusServiceUnavailable
			if res.RateLimited {
				status = http.StatusTooManyRequests
			}
			retryAfterHeader(w, res.RetryAfter)
			out.Reason, out.ErrorCode = res.Reason, res.ErrorCode
		case res.Permanent():
			status = http.StatusUnprocessableEntity
			out.Reason, out.ErrorCode, out.DeclineCode = res.Reason, res.ErrorCode, res.DeclineCode
		}
		respond(w, status, out)
	})
}
