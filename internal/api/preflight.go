package api

import (
	"net/http"
	"time"

	"billrun.dev/billrun/internal/billing"
)

// PreflightRequest is Preflight's body.
type PreflightRequest struct {
	Period      string `json:"period"`
	ExecutionID string `json:"execution_id"`
}

// PreflightResponse is Preflight's 200 answer.
type PreflightResponse struct {
	// Status is claimed, resumed, already_billed or already_running.
	Status         string           `json:"status"`
	Period         string           `json:"period"`
	ExecutionID    string           `json:"execution_id"`
	Owner          string           `json:"owner,omitempty"`
	LeaseExpiresAt *time.Time       `json:"lease_expires_at,omitempty"`
	PreviousOwner  string           `json:"previous_owner,omitempty"`
	Summary        *billing.Summary `json:"summary,omitempty"`
}

// Preflight claims the run for a period (single flight, I4).
func Preflight(svc *billing.Service, b Base) http.Handler {
	b = b.withDefaults()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req PreflightRequest
		if err := decode(w, r, b.MaxBodyBytes, &req); err != nil {
			fail(w, r, b.Log, NamePreflight, err)
			return
		}
		res, err := svc.Preflight(r.Context(), req.Period, req.ExecutionID)
		if err != nil {
			fail(w, r, b.Log, NamePreflight, err)
			return
		}
		out := PreflightResponse{
			Status: string(res.Status), Period: req.Period, ExecutionID: req.ExecutionID,
			Owner: res.Owner, PreviousOwner: res.PreviousOwner, Summary: res.Summary,
		}
		if !res.LeaseExpiresAt.IsZero() {
			out.LeaseExpiresAt = &res.LeaseExpiresAt
		}
		respond(w, http.StatusOK, out)
	})
}
