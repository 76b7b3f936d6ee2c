package api

import (
	"net/http"

	"billrun.dev/billrun/internal/billing"
)

// IssueRequest is IssueVaultKeys' body.
type IssueRequest struct {
	Period      string `json:"period"`
	ExecutionID string `json:"execution_id"`
	Cursor      string `json:"cursor"`
	// PageSize is 1 to 150; 0 means 100.
	PageSize int `json:"page_size"`
}

// IssueResponse is IssueVaultKeys' 200 answer. It carries key references
// only, never a credential (I5).
type IssueResponse struct {
	Customers []billing.KeyedCustomer `json:"customers"`
	// Held counts this page's customers held for review by issuance (above
	// their cap, no cap source, key revoked); they are not in Customers.
	Held       int    `json:"held"`
	NextCursor string `json:"next_cursor"`
	Done       bool   `json:"done"`
	DueCount   int64  `json:"due_count"`
}

// IssueVaultKeys returns one page of customers to charge, each with its capped
// vault key, creating their write-ahead charge records and recording the
// customers held for review; only the lease owner may page (409 lease_lost).
func IssueVaultKeys(svc *billing.Service, b Base) http.Handler {
	b = b.withDefaults()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req IssueRequest
		if err := decode(w, r, b.MaxBodyBytes, &req); err != nil {
			fail(w, r, b.Log, NameIssueVaultKeys, err)
			return
		}
		page, err := svc.IssueVaultKeys(r.Context(), billing.DueRequest{
			Period: req.Period, Execution: req.ExecutionID, Cursor: req.Cursor, PageSize: req.PageSize,
		})
		if err != nil {
			fail(w, r, b.Log, NameIssueVaultKeys, err)
			return
		}
		out := IssueResponse{Customers: page.Customers, Held: page.Held, NextCursor: page.NextCursor, Done: page.Done, DueCount: page.DueCount}
		if out.Customers == nil {
			out.Customers = []billing.KeyedCustomer{}
		}
		respond(w, http.StatusOK, out)
	})
}
