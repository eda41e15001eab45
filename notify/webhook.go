package notify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The webhook format's headers and version.
const (
	// SignatureHeader carries "t=<unix seconds>,v1=<hex HMAC-SHA256 of
	// '<t>.<body>'>", the scheme Stripe's webhooks use.
	SignatureHeader = "X-AEP-Signature"
	// DeliveryHeader carries the body's id.
	DeliveryHeader = "X-AEP-Delivery"
	// WebhookVersion is the body's "v".
	WebhookVersion = 1
	// DefaultSignatureTolerance is how far a signature's timestamp may be
	// from the receiver's clock before VerifySignature refuses it (replay).
	DefaultSignatureTolerance = 5 * time.Minute
)

// Webhook POSTs a documented JSON body (WebhookBody), signed with
// HMAC-SHA256 in SignatureHeader.
type Webhook struct {
	url    string
	name   string
	secret []byte
	client *http.Client
}

// WebhookBody is what a webhook: target receives. Every field is always
// present: strings are "" when they do not apply, deadline is null when
// the request has none, answers is [] when there is nothing to answer.
// Text fields are the plain text as notify built it (JSON escapes control
// characters); a receiver that displays them escapes them for its display.
type WebhookBody struct {
	Version int `json:"v"`
	// ID is the same for every attempt at one message (dedupe on it) and
	// differs between messages.
	ID        string          `json:"id"`
	Timestamp string          `json:"timestamp"` // this attempt, RFC 3339 UTC
	Kind      Kind            `json:"kind"`      // request, digest, update, test
	Tag       string          `json:"tag"`       // a later message with the same tag replaces this one
	Title     string          `json:"title"`
	Body      string          `json:"body"`
	Session   string          `json:"session"`
	Request   string          `json:"request"`
	Label     string          `json:"label"`
	Tool      string          `json:"tool"`
	Deadline  *string         `json:"deadline"` // RFC 3339 UTC, or null
	Answers   []WebhookAnswer `json:"answers"`
	Open      string          `json:"open"`
	Usage     *WebhookUsage   `json:"usage"` // a usage alert's figures, else null
}

// WebhookUsage is what a usage alert (kind usage) says of its session: the
// threshold it crossed, as --notify-usage names it, and its figures (the
// context's are null when not known).
type WebhookUsage struct {
	Threshold     string `json:"threshold"`
	Tokens        int64  `json:"tokens"`
	ContextTokens *int64 `json:"context_tokens"`
	ContextLimit  *int64 `json:"context_limit"`
	BurnPerHour   int64  `json:"burn_per_hour"`
}

// WebhookAnswer is one option and its one-use answer link: POST it to
// answer, GET only shows a confirmation page.
type WebhookAnswer struct {
	Option string `json:"option"`
	Label  string `json:"label"`
	URL    string `json:"url"`
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
	h.Set(SignatureHeader, Sign(w.secret, now, body))
	h.Set(DeliveryHeader, wb.ID)
	return post(ctx, w.client, w.name, w.url, h, body)
}

// webhookBody is the body of one attempt at m, made at now.
func webhookBody(m Message, now time.Time) WebhookBody {
	b := messageFields(m)
	b.ID = deliveryID(b)
	b.Timestamp = now.UTC().Format(time.RFC3339)
	return b
}

// messageFields is the part of the body that comes from the message alone.
func messageFields(m Message) WebhookBody {
	b := WebhookBody{
		Version: WebhookVersion,
		Kind:    m.Kind,
		Tag:     m.Tag,
		Title:   m.Title,
		Body:    m.Body,
		Session: m.Session,
		Request: m.Request,
		Label:   m.Label,
		Tool:    m.Tool,
		Answers: []WebhookAnswer{},
		Open:    m.Open,
	}
	if !m.Deadline.IsZero() {
		d := m.Deadline.UTC().Format(time.RFC3339)
		b.Deadline = &d
	}
	for _, a := range m.Answers {
		b.Answers = append(b.Answers, WebhookAnswer(a))
	}
	if u := m.Usage; u != nil {
		b.Usage = &WebhookUsage{Threshold: u.Threshold, Tokens: u.Tokens, BurnPerHour: u.BurnPerHour}
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
func deliveryID(fields WebhookBody) string {
	b, _ := json.Marshal(fields)
	sum := sha256.Sum256(b)
	return "d_" + hex.EncodeToString(sum[:16])
}

// Sign is the SignatureHeader value for body sent at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte("."))
	h.Write(body)
	return h.Sum(nil)
}

// VerifySignature checks a SignatureHeader value against body, as a
// receiver written in Go would: one of its v1 signatures must match and
// its timestamp be within tolerance of now (DefaultSignatureTolerance when
// zero).
func VerifySignature(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultSignatureTolerance
	}
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if s, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, s)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("signature: no timestamp")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("signature: timestamp %s from now, outside %s", d.Round(time.Second), tolerance)
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return nil
		}
	}
	return errors.New("signature: no v1 signature matches")
}
