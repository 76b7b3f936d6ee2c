package api

import (
	"net/http"

	"billrun.dev/billrun/internal/billing"
)

// DueRequest is DueCustomers' body.
type DueRequest struct {
	Period      string `json:"period"`
	ExecutionID string `json:"execution_id"`
	Cursor      string `json:"cursor"`
	PageSize    int    `json:"page_size"`
}

// DueResponse is DueCustomers' 200 answer.
type DueResponse struct {
	Customers  []billing.DueCustomer `json:"customers"`
	NextCursor string                `json:"next_cursor"`
	Done       bool                  `json:"done"`
	DueCount   int64                 `json:"due_count"`
}

// DueCustomers returns one page of customers to charge, creating their
// write-ahead charge records; only the lease owner may page (409 lease_lost).
func DueCustomers(svc *billing.Service, b Base) http.Handler {
	b = b.withDefaults()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req DueRequest
		if err := decode(w, r, b.MaxBodyBytes, &req); err != nil {
			fail(w, r, b.Log, NameDueCustomers, err)
			return
		}
		page, err := svc.DueCustomers(r.Context(), billing.DueRequest{
			Period: req.Period, Execution: req.ExecutionID, Cursor: req.Cursor, PageSize: req.PageSize,
		})
		if err != nil {
			fail(w, r, b.Log, NameDueCustomers, err)
			return
		}
		out := DueResponse{Customers: page.Customers, NextCursor: page.NextCursor, Done: page.Done, DueCount: page.DueCount}
		if out.Customers == nil {
			out.Customers = []billing.DueCustomer{}
		}
		respond(w, http.StatusOK, out)
	})
}
