package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/aep-kimi/aep-kimi/notify/webhook"
)

// Webhook POSTs the JSON body package webhook documents, signed with
// HMAC-SHA256 in webhook.SignatureHeader.
type Webhook struct {
	url    string
	name   string
	secret []byte
	client *http.Client
}

// Name is the target for logs: no credentials, no query.
func (w *Webhook) Name() string { return w.name }

// Send posts m once, signed with the time of this attempt.
func (w *Webhook) Send(ctx context.Context, m Message) error {
	now := time.Now()
	wb := webhookBody(m, now)
	body, err := json.Marshal(wb)
	if err != nil {
		return fmt.Errorf("%s: %w: %w", w.name, ErrPermanent, err)
	}
	h := http.Header{}
	h.Set(webhook.SignatureHeader, webhook.Sign(w.secret, now, body))
	h.Set(webhook.DeliveryHeader, wb.ID)
	return post(ctx, w.client, w.name, w.url, h, body)
}

// webhookBody is the body of one attempt at m, made at now.
func webhookBody(m Message, now time.Time) webhook.Body {
	b := messageFields(m)
	b.ID = deliveryID(b)
	b.Timestamp = now.UTC().Format(time.RFC3339)
	return b
}

// messageFields is the part of the body that comes from the message alone.
func messageFields(m Message) webhook.Body {
	b := webhook.Body{
		Version: webhook.Version,
		Kind:    m.Kind,
		Tag:     m.Tag,
		Title:   m.Title,
		Body:    m.Body,
		Session: m.Session,
		Request: m.Request,
		Label:   m.Label,
		Tool:    m.Tool,
		Answers: []webhook.Answer{},
		Open:    m.Open,
	}
	if !m.Deadline.IsZero() {
		d := m.Deadline.UTC().Format(time.RFC3339)
		b.Deadline = &d
	}
	for _, a := range m.Answers {
		b.Answers = append(b.Answers, webhook.Answer(a))
	}
	if u := m.Usage; u != nil {
		b.Usage = &webhook.Usage{Threshold: u.Threshold, Tokens: u.Tokens, BurnPerHour: u.BurnPerHour}
		if c := u.Context; c.Known {
			b.Usage.ContextTokens = &c.Tokens
			if c.Limit > 0 {
				b.Usage.ContextLimit = &c.Limit
			}
		}
	}
	return b
}

// deliveryID is a digest of the message's fields: stable across the
// queue's retries of one message, different for any other message (its
// answer links are one-use tokens, its kind and text differ).
func deliveryID(fields webhook.Body) string {
	b, _ := json.Marshal(fields)
	sum := sha256.Sum256(b)
	return "d_" + hex.EncodeToString(sum[:16])
}
