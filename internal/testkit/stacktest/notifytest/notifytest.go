// Package notifytest receives and answers a Stack's notifications: a webhook
// receiver, its answer links, the relay's VAPID key. It reads the webhook
// body with package webhook alone, so it links no relay.
package notifytest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/notify/webhook"
)

// WebhookReceiver keeps the webhook bodies it was posted, with when each
// arrived.
type WebhookReceiver struct {
	*httptest.Server
	Mu     sync.Mutex
	Bodies []webhook.Body
	At     []time.Time
}

func NewWebhookReceiver(t *testing.T) *WebhookReceiver {
	r := &WebhookReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var b webhook.Body
		raw, _ := io.ReadAll(req.Body)
		if err := json.Unmarshal(raw, &b); err != nil {
			t.Errorf("webhook body: %v: %s", err, raw)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.Mu.Lock()
		r.Bodies, r.At = append(r.Bodies, b), append(r.At, time.Now())
		r.Mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

// Request is the first body about request id, and when it came.
func (r *WebhookReceiver) Request(id string) (webhook.Body, time.Time, bool) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	for i, b := range r.Bodies {
		if b.Request == id && b.Kind == webhook.KindRequest {
			return b, r.At[i], true
		}
	}
	return webhook.Body{}, time.Time{}, false
}

func (r *WebhookReceiver) All() []webhook.Body {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	return append([]webhook.Body(nil), r.Bodies...)
}

func LinkFor(t *testing.T, b webhook.Body, option string) string {
	t.Helper()
	for _, a := range b.Answers {
		if a.Option == option {
			return a.URL
		}
	}
	t.Fatalf("the notification offers no %q: %+v", option, b.Answers)
	return ""
}

// UsageBodies are the usage alerts the receiver got, by threshold.
func (r *WebhookReceiver) UsageBodies() map[string][]webhook.Body {
	out := map[string][]webhook.Body{}
	for _, b := range r.All() {
		if b.Kind == webhook.KindUsage && b.Usage != nil {
			out[b.Usage.Threshold] = append(out[b.Usage.Threshold], b)
		}
	}
	return out
}
