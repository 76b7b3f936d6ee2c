package api

import (
	"net/http"

	"billrun.dev/billrun/internal/billing"
)

// CompleteRequest is MarkCompleted's body.
type CompleteRequest struct {
	Period      string `json:"period"`
	ExecutionID string `json:"execution_id"`
}

// MarkCompleted completes the run and answers its summary (200), or 409 with
// the number of due customers still pending.
func MarkCompleted(svc *billing.Service, b Base) http.Handler {
	b = b.withDefaults()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req CompleteRequest
		if err := decode(w, r, b.MaxBodyBytes, &req); err != nil {
			fail(w, r, b.Log, NameMarkCompleted, err)
			return
		}
		sum, err := svc.MarkCompleted(r.Context(), req.Period, req.ExecutionID)
		if err != nil {
			fail(w, r, b.Log, NameMarkCompleted, err)
			return
		}
		respond(w, http.StatusOK, sum)
	})
}
