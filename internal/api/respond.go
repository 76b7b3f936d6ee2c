package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"billrun.dev/billrun/internal/billing"
)

// httpError is an answer decided before the service was called.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

// decode reads one JSON object from a POST body of at most limit bytes into v,
// refusing unknown fields and trailing data.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return &httpError{http.StatusMethodNotAllowed, "method " + r.Method + " not allowed: use POST"}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			err = errors.New("unexpected data after the JSON object")
		}
	}
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooBig):
		return &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", tooBig.Limit)}
	case errors.Is(err, io.EOF):
		return &httpError{http.StatusBadRequest, "request body: empty; want a JSON object"}
	default:
		return &httpError{http.StatusBadRequest, "request body: malformed JSON: " + err.Error()}
	}
}

// respond writes v as JSON with status.
func respond(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone; nothing to do
}

// errorBody is the shape of every error answer.
type errorBody struct {
	Error   string `json:"error"`
	Detail  string `json:"detail,omitempty"`
	Pending *int64 `json:"pending,omitempty"`
}

// Retry-After for store contention or unavailability.
const storeRetryAfter = time.Second

// retryAfterHeader sets Retry-After in whole seconds, at least 1.
func retryAfterHeader(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(d.Seconds())))))
}

// fail answers an error from decoding or from the service: the one place that
// maps billing's sentinels onto statuses.
func fail(w http.ResponseWriter, r *http.Request, log *slog.Logger, op string, err error) {
	var he *httpError
	var inc *billing.IncompleteError
	switch {
	case errors.As(err, &he):
		respond(w, he.status, errorBody{Error: he.msg})
	case errors.Is(err, billing.ErrInvalidInput):
		respond(w, http.StatusBadRequest, errorBody{Error: err.Error()})
	case errors.As(err, &inc):
		respond(w, http.StatusConflict, errorBody{Error: inc.Reason, Pending: &inc.Pending})
	case errors.Is(err, billing.ErrLeaseLost):
		respond(w, http.StatusConflict, errorBody{Error: "lease_lost", Detail: err.Error()})
	case errors.Is(err, billing.ErrRunCompleted):
		respond(w, http.StatusConflict, errorBody{Error: "run_completed", Detail: err.Error()})
	case billing.IsTransient(err):
		log.WarnContext(r.Context(), op+": store busy", "error", err.Error())
		retryAfterHeader(w, storeRetryAfter)
		respond(w, http.StatusServiceUnavailable, errorBody{Error: "store unavailable or contended; retry", Detail: err.Error()})
	case errors.Is(err, billing.ErrStripeConfig):
		log.ErrorContext(r.Context(), op+": stripe configuration", "error", err.Error())
		respond(w, http.StatusInternalServerError, errorBody{Error: "stripe configuration error"})
	default:
		log.ErrorContext(r.Context(), op+": internal error", "error", err.Error())
		respond(w, http.StatusInternalServerError, errorBody{Error: "internal error"})
	}
}
