package stripesim

import (
	"fmt"
	"net/http"
	"strings"
)

// Stripe's error types (the "type" field of an error body).
const (
	errTypeAPI            = "api_error"
	errTypeCard           = "card_error"
	errTypeIdempotency    = "idempotency_error"
	errTypeInvalidRequest = "invalid_request_error"
)

// apiError is an error response in Stripe's shape: {"error": {...}}.
type apiError struct {
	status        int
	Type          string         `json:"type"`
	Code          string         `json:"code,omitempty"`
	DeclineCode   string         `json:"decline_code,omitempty"`
	Message       string         `json:"message"`
	Param         string         `json:"param,omitempty"`
	DocURL        string         `json:"doc_url,omitempty"`
	Charge        string         `json:"charge,omitempty"`
	PaymentIntent *paymentIntent `json:"payment_intent,omitempty"`
	PaymentMethod *paymentMethod `json:"payment_method,omitempty"`
	RequestLogURL string         `json:"request_log_url,omitempty"`
	extraHeaders  http.Header    // e.g. Stripe-Rate-Limited-Reason
}

func (e *apiError) body() any { return map[string]any{"error": e} }

func apiErrorf(status int, typ, code, format string, args ...any) *apiError {
	e := &apiError{status: status, Type: typ, Code: code, Message: fmt.Sprintf(format, args...)}
	if code != "" {
		e.DocURL = "https://stripe.com/docs/error-codes/" + strings.ReplaceAll(code, "_", "-")
	}
	return e
}

func invalidRequest(msg, param, code string) *apiError {
	e := apiErrorf(http.StatusBadRequest, errTypeInvalidRequest, code, "%s", msg)
	e.Param = param
	return e
}

func resourceMissing(status int, what, id, param string) *apiError {
	e := apiErrorf(status, errTypeInvalidRequest, "resource_missing", "No such %s: '%s'", what, id)
	e.Param = param
	return e
}

func withHeader(e *apiError, k, v string) *apiError {
	if e.extraHeaders == nil {
		e.extraHeaders = http.Header{}
	}
	e.extraHeaders.Set(k, v)
	return e
}
