package stripesim

import (
	"encoding/json"
	"time"
)

// The JSON shapes below follow Stripe's API reference for the fields billrun and
// stripe-go read; fields Stripe always sends are present even when null.

type customer struct {
	ID              string            `json:"id"`
	Object          string            `json:"object"`
	Balance         int64             `json:"balance"`
	Created         int64             `json:"created"`
	Currency        *string           `json:"currency"`
	DefaultSource   *string           `json:"default_source"`
	Delinquent      bool              `json:"delinquent"`
	Description     *string           `json:"description"`
	Email           *string           `json:"email"`
	InvoiceSettings invoiceSettings   `json:"invoice_settings"`
	Livemode        bool              `json:"livemode"`
	Metadata        map[string]string `json:"metadata"`
	Name            *string           `json:"name"`
	Phone           *string           `json:"phone"`
}

type invoiceSettings struct {
	CustomFields         any     `json:"custom_fields"`
	DefaultPaymentMethod *string `json:"default_payment_method"`
	Footer               *string `json:"footer"`
}

type paymentMethod struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"`
	AllowRedisplay string            `json:"allow_redisplay"`
	BillingDetails billingDetails    `json:"billing_details"`
	Card           card              `json:"card"`
	Created        int64             `json:"created"`
	Customer       *string           `json:"customer"`
	Livemode       bool              `json:"livemode"`
	Metadata       map[string]string `json:"metadata"`
	Type           string            `json:"type"`
}

type billingDetails struct {
	Address any     `json:"address"`
	Email   *string `json:"email"`
	Name    *string `json:"name"`
	Phone   *string `json:"phone"`
}

type card struct {
	Brand        string `json:"brand"`
	Country      string `json:"country"`
	DisplayBrand string `json:"display_brand"`
	ExpMonth     int64  `json:"exp_month"`
	ExpYear      int64  `json:"exp_year"`
	Fingerprint  string `json:"fingerprint"`
	Funding      string `json:"funding"`
	Last4        string `json:"last4"`
}

type paymentIntent struct {
	ID                  string            `json:"id"`
	Object              string            `json:"object"`
	Amount              int64             `json:"amount"`
	AmountCapturable    int64             `json:"amount_capturable"`
	AmountReceived      int64             `json:"amount_received"`
	CaptureMethod       string            `json:"capture_method"`
	ClientSecret        string            `json:"client_secret"`
	ConfirmationMethod  string            `json:"confirmation_method"`
	Created             int64             `json:"created"`
	Currency            string            `json:"currency"`
	Customer            *string           `json:"customer"`
	Description         *string           `json:"description"`
	LastPaymentError    *lastPaymentError `json:"last_payment_error"`
	LatestCharge        *string           `json:"latest_charge"`
	Livemode            bool              `json:"livemode"`
	Metadata            map[string]string `json:"metadata"`
	NextAction          any               `json:"next_action"`
	PaymentMethod       *string           `json:"payment_method"`
	PaymentMethodTypes  []string          `json:"payment_method_types"`
	ReceiptEmail        *string           `json:"receipt_email"`
	SetupFutureUsage    *string           `json:"setup_future_usage"`
	StatementDescriptor *string           `json:"statement_descriptor"`
	Status              string            `json:"status"`
}

type lastPaymentError struct {
	Charge        string         `json:"charge,omitempty"`
	Code          string         `json:"code"`
	DeclineCode   string         `json:"decline_code,omitempty"`
	DocURL        string         `json:"doc_url,omitempty"`
	Message       string         `json:"message"`
	PaymentMethod *paymentMethod `json:"payment_method,omitempty"`
	Type          string         `json:"type"`
}

type event struct {
	ID              string       `json:"id"`
	Object          string       `json:"object"`
	APIVersion      string       `json:"api_version"`
	Created         int64        `json:"created"`
	Data            eventData    `json:"data"`
	Livemode        bool         `json:"livemode"`
	PendingWebhooks int64        `json:"pending_webhooks"`
	Request         eventRequest `json:"request"`
	Type            string       `json:"type"`
}

type eventData struct {
	Object json.RawMessage `json:"object"`
}

type eventRequest struct {
	ID             *string `json:"id"`
	IdempotencyKey *string `json:"idempotency_key"`
}

// Records wrap the API objects with what only the simulator needs.

type pmRecord struct {
	PM paymentMethod `json:"pm"`
	// TestCard is the test payment method this one was made from; it decides
	// every charge's outcome.
	TestCard string `json:"test_card"`
}

type piRecord struct {
	PI        paymentIntent `json:"pi"`
	Seq       int64         `json:"seq"`
	CreatedAt time.Time     `json:"created_at"`
}

type custRecord struct {
	Customer customer `json:"customer"`
	Seq      int64    `json:"seq"`
}

// Webhook delivery states of an event.
const (
	deliveryNone      = ""          // no endpoint wanted this event
	deliveryPending   = "pending"   // not yet delivered; retries left
	deliveryDelivered = "delivered" // an attempt got a 2xx
	deliveryFailed    = "failed"    // every attempt failed
)

type eventRecord struct {
	Event       event     `json:"event"`
	Seq         int64     `json:"seq"`
	CreatedAt   time.Time `json:"created_at"`
	Delivery    string    `json:"delivery,omitempty"`
	Attempts    int       `json:"attempts,omitempty"`
	NextAttempt time.Time `json:"next_attempt,omitzero"`
}

// idemRecord is a stored idempotent result.
type idemRecord struct {
	Key         string          `json:"key"`
	Method      string          `json:"method"`
	Path        string          `json:"path"`
	Fingerprint string          `json:"fingerprint"`
	Status      int             `json:"status"`
	Body        json.RawMessage `json:"body"`
	RequestID   string          `json:"request_id"`
	CreatedAt   time.Time       `json:"created_at"`
}

// Payment is one successful payment in the simulator's ledger: the ground truth
// that "at most one payment per (period, customer)" is checked against.
type Payment struct {
	PaymentIntentID string            `json:"payment_intent"`
	Customer        string            `json:"customer"`
	Amount          int64             `json:"amount"`
	Currency        string            `json:"currency"`
	Metadata        map[string]string `json:"metadata"`
	// IdempotencyKey is the key of the request that created the payment, or ""
	// when the request had none.
	IdempotencyKey string    `json:"idempotency_key"`
	Created        time.Time `json:"created"`
}

// batch is one atomic change of state: the unit of the journal.
type batch struct {
	Customers []custRecord  `json:"customers,omitempty"`
	PMs       []pmRecord    `json:"payment_methods,omitempty"`
	PIs       []piRecord    `json:"payment_intents,omitempty"`
	Events    []eventRecord `json:"events,omitempty"`
	Idem      []idemRecord  `json:"idempotency,omitempty"`
	Ledger    []Payment     `json:"ledger,omitempty"`
}

func (b *batch) empty() bool {
	return b == nil || len(b.Customers)+len(b.PMs)+len(b.PIs)+len(b.Events)+len(b.Idem)+len(b.Ledger) == 0
}
