// Package webhook is the format a webhook: notification target receives:
// the JSON body, its headers and its signature. notify builds and sends
// it; a receiver parses and verifies it with this package alone, which
// links neither notify nor the relay.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The format's headers and version.
const (
	// SignatureHeader carries "t=<unix seconds>,v1=<hex HMAC-SHA256 of
	// '<t>.<body>'>", the scheme Stripe's webhooks use.
	SignatureHeader = "X-AEP-Signature"
	// DeliveryHeader carries the body's id.
	DeliveryHeader = "X-AEP-Delivery"
	// Version is the body's "v".
	Version = 1
	// DefaultSignatureTolerance is how far a signature's timestamp may be
	// from the receiver's clock before VerifySignature refuses it (replay).
	DefaultSignatureTolerance = 5 * time.Minute
)

// Kind says what a notification is about.
type Kind string

// The kinds of notification.
const (
	KindRequest Kind = "request" // one waiting request, with its answers
	KindDigest  Kind = "digest"  // several waiting requests in one message
	KindUpdate  Kind = "update"  // replaces the message with the same Tag: answered elsewhere, expired, withdrawn
	KindTest    Kind = "test"    // `aep-kimi notify test`
	KindUsage   Kind = "usage"   // a session crossed a --notify-usage threshold
)

// Body is what a webhook: target receives. Every field is always
// present: strings are "" when they do not apply, deadline is null when
// the request has none, answers is [] when there is nothing to answer.
// Text fields are the plain text as notify built it (JSON escapes control
// characters); a receiver that displays them escapes them for its display.
type Body struct {
	Version int `json:"v"`
	// ID is the same for every attempt at one message (dedupe on it) and
	// differs between messages.
	ID        string   `json:"id"`
	Timestamp string   `json:"timestamp"` // this attempt, RFC 3339 UTC
	Kind      Kind     `json:"kind"`      // request, digest, update, usage, test
	Tag       string   `json:"tag"`       // a later message with the same tag replaces this one
	Title     string   `json:"title"`
	Body      string   `json:"body"`
	Session   string   `json:"session"`
	Request   string   `json:"request"`
	Label     string   `json:"label"`
	Tool      string   `json:"tool"`
	Deadline  *string  `json:"deadline"` // RFC 3339 UTC, or null
	Answers   []Answer `json:"answers"`
	Open      string   `json:"open"`
	Usage     *Usage   `json:"usage"` // a usage alert's figures, else null
}

// Usage is what a usage alert (kind usage) says of its session: the
// threshold it crossed, as --notify-usage names it, and its figures (the
// context's are null when not known).
type Usage struct {
	Threshold     string `json:"threshold"`
	Tokens        int64  `json:"tokens"`
	ContextTokens *int64 `json:"context_tokens"`
	ContextLimit  *int64 `json:"context_limit"`
	BurnPerHour   int64  `json:"burn_per_hour"`
}

// Answer is one option and its one-use answer link: POST it to
// answer, GET only shows a confirmation page.
type Answer struct {
	Option string `json:"option"`
	Label  string `json:"label"`
	URL    string `json:"url"`
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
