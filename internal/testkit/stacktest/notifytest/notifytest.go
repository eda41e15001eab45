// Package notifytest receives and answers a Stack's notifications: a webhook
// receiver, its answer links, the relay's VAPID key. It is apart from
// stacktest because the notify package links the relay.
package notifytest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/notify"
)

// WebhookReceiver keeps the webhook bodies it was posted, with when each
// arrived.
type WebhookReceiver struct {
	*httptest.Server
	Mu     sync.Mutex
	Bodies []notify.WebhookBody
	At     []time.Time
}

func NewWebhookReceiver(t *testing.T) *WebhookReceiver {
	r := &WebhookReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var b notify.WebhookBody
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
func (r *WebhookReceiver) Request(id string) (notify.WebhookBody, time.Time, bool) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	for i, b := range r.Bodies {
		if b.Request == id && b.Kind == notify.KindRequest {
			return b, r.At[i], true
		}
	}
	return notify.WebhookBody{}, time.Time{}, false
}

func (r *WebhookReceiver) All() []notify.WebhookBody {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	return append([]notify.WebhookBody(nil), r.Bodies...)
}

func LinkFor(t *testing.T, b notify.WebhookBody, option string) string {
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
func (r *WebhookReceiver) UsageBodies() map[string][]notify.WebhookBody {
	out := map[string][]notify.WebhookBody{}
	for _, b := range r.All() {
		if b.Kind == notify.KindUsage && b.Usage != nil {
			out[b.Usage.Threshold] = append(out[b.Usage.Threshold], b)
		}
	}
	return out
}
