// Package stripesim is a stateful Stripe simulator: an HTTP server that the real
// stripe-go v82 client talks to (stripe.NewBackendsWithConfig with URL set to
// the server), so billrun runs a whole billing period with no network and its
// tests prove "one payment per customer per period" against something that
// behaves like Stripe. stripe-mock, Stripe's own mock, is stateless and cannot.
//
// # Endpoints
//
// Form-encoded parameters in, Stripe's JSON shapes out (API version
// APIVersion):
//
//	POST /v1/customers                     email, name, description, phone, metadata, payment_method, invoice_settings[default_payment_method]
//	GET  /v1/customers/:id
//	POST /v1/customers/:id                 update the same fields (not payment_method)
//	POST /v1/payment_methods/:id/attach    customer
//	GET  /v1/payment_methods/:id
//	POST /v1/payment_intents               amount, currency, customer, payment_method, confirm, off_session, metadata, …
//	GET  /v1/payment_intents/:id
//	GET  /v1/payment_intents               customer, created, limit, starting_after, ending_before
//	GET  /v1/payment_intents/search        query (metadata['k']:'v', status, customer, currency, amount, created), limit, page
//	GET  /v1/events                        type (with * wildcard) or types[], delivery_success, created, paging; last 30 days
//	GET  /v1/events/:id
//	GET  /_sim/ledger, /_sim/requests      the simulator's own views (same auth)
//
// Unknown parameters, wrong types and missing required ones get Stripe's 400
// invalid_request_error (parameter_unknown, parameter_invalid_integer,
// parameter_missing …) and a missing or non-test key gets 401; neither changes
// any state, and nothing is stored under their idempotency key. Lists are
// newest first. expand[] is accepted and ignored (expandable fields are ids).
//
// # Idempotency
//
// A POST with an Idempotency-Key seen in the last 24 hours of the simulator's
// clock replays the first result, status and body, errors and 500s included,
// with Idempotent-Replayed: true. The same key with other parameters or on
// another endpoint gets 400 idempotency_error; the same key while the first
// request still runs gets 409 idempotency_key_in_use; keys over 255 characters
// get 400. Keys are kept across restarts with the rest of the state. The
// request log (Server.Requests) marks keys shaped like the ones stripe-go
// invents when the caller sets none, and counts attempts per key, so SDK
// retries and missing keys are visible. Note that Go's http.Transport itself
// resends a request carrying an Idempotency-Key when a reused keep-alive
// connection dies before any answer (as drop-after does): one more layer of
// retries, seen in the log as a second attempt.
//
// # Test payment methods
//
// pm_card_visa, pm_card_visa_debit, pm_card_mastercard and pm_card_amex
// succeed. The chargeDeclined family (pm_card_visa_chargeDeclined,
// …InsufficientFunds, …LostCard, …StolenCard, pm_card_chargeDeclinedExpiredCard,
// …IncorrectCvc, …ProcessingError, …Fraudulent,
// pm_card_visa_chargeDeclinedVelocityLimitExceeded) cannot be attached and every
// charge answers 402 card_error with its decline_code, leaving the
// PaymentIntent in requires_payment_method. pm_card_chargeCustomerFail attaches,
// then every charge declines. pm_card_authenticationRequired answers 402
// authentication_required off-session and requires_action on-session. Each use
// of a test id makes a new pm_… object, as Stripe does.
//
// # Faults
//
// Faults (ParseFaults for the text form) inject latency, 429s from a rate
// or a concurrency limiter with Stripe-Rate-Limited-Reason, non-JSON 503s and 429 lock_timeouts (the
// ones stripe-go retries), JSON 500s before or after the commit, a connection
// dropped after the commit, a commit slower than the caller's deadline, and
// duplicated or reordered webhooks. Every draw comes from the seed, the
// request's key and its attempt number, so a scenario replays identically.
//
// # Ledger and persistence
//
// Every successful payment enters the ledger (Server.Ledger, ReadLedger for a
// data directory, GET /_sim/ledger) with its customer, amount, currency,
// metadata and idempotency key; Duplicates checks it. With Config.DataDir the
// state is a journal, one synced JSON line per change, replayed and compacted
// at start and locked against a second simulator; without, it is in memory.
//
// # Webhooks
//
// payment_intent.succeeded and payment_intent.payment_failed go to
// Config.WebhookURL, signed like Stripe (Stripe-Signature: t=…,v1=… with
// HMAC-SHA256 of "t.body"), when DeliverWebhooks runs (RunWebhooks runs it
// periodically). Failed deliveries are retried after Config.WebhookRetries on
// the simulator's clock, then stay listable with delivery_success=false.
package stripesim
