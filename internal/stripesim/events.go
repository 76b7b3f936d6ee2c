package stripesim

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

// eventWindow is how far back Stripe lets you list and retrieve events.
const eventWindow = 30 * 24 * time.Hour

// maxEventTypes is the most entries types[] may have.
const maxEventTypes = 20

// webhookTypes are the event types sent to the configured endpoint.
func webhookTypes() []string { return []string{eventPISucceeded, eventPIFailed} }

// newEventLocked records an event about obj caused by request c. Called with
// s.mu held (it takes a sequence number).
func (s *Server) newEventLocked(c *call, typ string, obj any) eventRecord {
	ev := event{
		ID: newID("evt"), Object: "event", APIVersion: APIVersion, Created: c.now.Unix(),
		Data: eventData{Object: mustJSON(obj)}, Type: typ,
		Request: eventRequest{ID: &c.reqID},
	}
	if c.idemKey != "" {
		k := c.idemKey
		ev.Request.IdempotencyKey = &k
	}
	rec := eventRecord{Event: ev, Seq: s.st.nextSeq(), CreatedAt: c.now}
	if s.cfg.WebhookURL != "" && contains(webhookTypes(), typ) {
		rec.Delivery, rec.NextAttempt, rec.Event.PendingWebhooks = deliveryPending, c.now, 1
	}
	return rec
}

func eventListSchema() schema {
	return listSchema(schema{
		"type":             {kind: kString},
		"types":            {kind: kStringList},
		"delivery_success": {kind: kBool},
	})
}

// typeMatches applies Stripe's event type filter, where "*" is a wildcard
// (payment_intent.* matches every PaymentIntent event).
func typeMatches(pattern, typ string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(typ, prefix)
	}
	return pattern == typ
}

func (s *Server) listEvents(c *call) result {
	p := c.p
	if p.has("type") && p.has("types") {
		return failure(invalidRequest("You may pass either `type` or `types`, but not both.", "types", "parameter_invalid_string"))
	}
	if len(p.list("types")) > maxEventTypes {
		return failure(invalidRequest(fmt.Sprintf("Invalid array: types can have at most %d entries", maxEventTypes), "types", "parameter_invalid_string"))
	}
	patterns := p.list("types")
	if p.has("type") {
		patterns = []string{p.str("type")}
	}
	created, hasCreated := p.rangeOf("created")
	oldest := c.now.Add(-eventWindow)

	s.mu.Lock()
	defer s.mu.Unlock()
	var items []listItem
	for _, rec := range s.st.events {
		if rec.CreatedAt.Before(oldest) || hasCreated && !created.contains(rec.Event.Created) {
			continue
		}
		if len(patterns) > 0 && !anyMatch(patterns, rec.Event.Type) {
			continue
		}
		if p.has("delivery_success") {
			// Events no endpoint wanted are in neither set.
			want := deliveryDelivered
			if !p.boolean("delivery_success") {
				want = "undelivered"
			}
			got := rec.Delivery
			if got == deliveryPending || got == deliveryFailed {
				got = "undelivered"
			}
			if got != want {
				continue
			}
		}
		items = append(items, listItem{seq: rec.Seq, obj: rec.Event})
	}
	cursor := func(id string) (int64, bool) {
		rec := s.st.events[id]
		if rec == nil {
			return 0, false
		}
		return rec.Seq, true
	}
	return s.listPage(c, "/v1/events", "event", items, cursor)
}

func anyMatch(patterns []string, typ string) bool {
	for _, p := range patterns {
		if typeMatches(p, typ) {
			return true
		}
	}
	return false
}

func (s *Server) retrieveEvent(c *call) result {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.st.events[c.args[0]]
	if rec == nil || rec.CreatedAt.Before(c.now.Add(-eventWindow)) {
		return failure(resourceMissing(http.StatusNotFound, "event", c.args[0], "id"))
	}
	return success(rec.Event, nil)
}

// SignWebhook returns a Stripe-Signature header value for payload at time t:
// t=<unix>,v1=<hex HMAC-SHA256 of "<unix>.<payload>">.
func SignWebhook(secret string, t time.Time, payload []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "%d.", t.Unix())
	mac.Write(payload)
	return fmt.Sprintf("t=%d,v1=%s", t.Unix(), hex.EncodeToString(mac.Sum(nil)))
}

// DeliverWebhooks makes one attempt at every delivery that is due on the
// simulator's clock, oldest event first, and returns how many events it tried.
// A failed attempt is retried after the next of Config.WebhookRetries; when
// they run out the event stays undelivered (listable with
// delivery_success=false).
func (s *Server) DeliverWebhooks(ctx context.Context) (int, error) {
	s.deliverMu.Lock()
	defer s.deliverMu.Unlock()
	now := s.clock.Now()
	s.mu.Lock()
	var due []eventRecord
	for _, rec := range s.st.events {
		if rec.Delivery == deliveryPending && !rec.NextAttempt.After(now) {
			due = append(due, *rec)
		}
	}
	faults := s.faults
	s.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].Seq < due[j].Seq })
	s.sweeps++
	if rng := seededRand(s.cfg.Seed, "webhook-sweep", s.sweeps); rng.Float64() < faults.WebhookReorder {
		rng.Shuffle(len(due), func(i, j int) { due[i], due[j] = due[j], due[i] })
	}

	for i := range due {
		rec := &due[i]
		payload := mustJSON(rec.Event)
		delivered := s.post(ctx, payload, now)
		if seededRand(s.cfg.Seed, "webhook", rec.Event.ID, rec.Attempts).Float64() < faults.WebhookDuplicate {
			delivered = s.post(ctx, payload, now) || delivered
		}
		if ctx.Err() != nil {
			return i, ctx.Err() // our own stop is not the endpoint's failure
		}
		rec.Attempts++
		switch {
		case delivered:
			rec.Delivery, rec.Event.PendingWebhooks, rec.NextAttempt = deliveryDelivered, 0, time.Time{}
		case rec.Attempts <= len(s.retry):
			rec.NextAttempt = now.Add(s.retry[rec.Attempts-1])
		default:
			rec.Delivery, rec.Event.PendingWebhooks, rec.NextAttempt = deliveryFailed, 0, time.Time{}
		}
		s.mu.Lock()
		err := s.persistLocked(&batch{Events: []eventRecord{*rec}})
		s.mu.Unlock()
		if err != nil {
			return i, fmt.Errorf("stripesim: deliver webhooks: %w", err)
		}
	}
	return len(due), ctx.Err()
}

// post sends one signed delivery; true on a 2xx answer.
func (s *Server) post(ctx context.Context, payload []byte, now time.Time) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.WebhookURL, bytes.NewReader(payload))
	if err != nil {
		s.log.Error("stripesim: webhook request", "err", err)
		return false
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
	req.Header.Set("Stripe-Signature", SignWebhook(s.cfg.WebhookSecret, now, payload))
	resp, err := s.hook.Do(req)
	if err != nil {
		s.log.Warn("stripesim: webhook delivery failed", "err", err)
		return false
	}
	resp.Body.Close()
	s.log.Info("stripesim: webhook delivered", "status", resp.StatusCode)
	return resp.StatusCode >= 200 && resp.StatusCode < 300
}

// RunWebhooks delivers due webhooks every interval of real time until ctx ends
// or the server closes. The CLI runs it; tests call DeliverWebhooks instead.
func (s *Server) RunWebhooks(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.closed:
			return
		case <-t.C:
			if _, err := s.DeliverWebhooks(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("stripesim: webhooks", "err", err)
			}
		}
	}
}
