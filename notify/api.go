package notify

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// The notification API's paths under relay.NotifyPath.
const (
	PathVAPID         = relay.NotifyPath + "vapid"
	PathSubscriptions = relay.NotifyPath + "subscriptions"
	PathTest          = relay.NotifyPath + "test"
	PathUsage         = relay.NotifyPath + "usage"
	// apiBodyTimeout bounds reading one request body.
	apiBodyTimeout = 10 * time.Second
)

// API error codes.
const (
	CodeBadSubscription = "bad-subscription"
	CodeTooMany         = "too-many-subscriptions"
	CodeNoPush          = "push-unavailable"
	CodeStoreFailed     = "store-failed"
)

// SubscribeRequest is POST /notify/subscriptions's body.
type SubscribeRequest struct {
	Subscription struct {
		Endpoint string `json:"endpoint"`
		Keys     struct {
			P256dh string `json:"p256dh"`
			Auth   string `json:"auth"`
		} `json:"keys"`
	} `json:"subscription"`
	Device string `json:"device"`
}

// Listed is one subscription as the API shows it (never its keys or
// endpoint, which are the device's).
type Listed struct {
	ID      string    `json:"id"`
	Device  string    `json:"device"`
	Owner   string    `json:"owner"`
	Created time.Time `json:"created"`
	LastOK  time.Time `json:"last_ok,omitzero"`
}

// Listing is GET /notify/subscriptions's answer.
type Listing struct {
	Subscriptions []Listed `json:"subscriptions"`
}

// UsageReport is GET /notify/usage's answer: the --notify-usage
// thresholds, and the context fill (percent) at which the page marks a
// session near its limit.
type UsageReport struct {
	Thresholds         []string `json:"thresholds"`
	NearContextPercent int64    `json:"near_context_percent"`
}

// TestResult is what one target or device answered a test message.
type TestResult struct {
	Target string `json:"target"`
	OK     bool   `json:"ok"`
	Error  string `json:"error,omitempty"`
}

// TestReport is POST /notify/test's answer.
type TestReport struct {
	Results []TestResult `json:"results"`
}

// API serves the notification API: the VAPID key, the subscriptions of
// the person asking (an admin's: everyone's), and the test.
func (n *Notifier) API() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, ok := relay.PrincipalOf(r)
		if !ok {
			httpguard.WriteError(w, http.StatusForbidden, wire.CodeUnauthorized, "notifications need an authenticated relay")
			return
		}
		switch p := r.URL.Path; {
		case p == PathVAPID && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			httpguard.WriteJSON(w, http.StatusOK, map[string]string{"public_key": n.vapid.Public})
		case p == PathSubscriptions && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			n.listSubs(w, who)
		case p == PathSubscriptions && r.Method == http.MethodPost:
			n.subscribe(w, r, who)
		case strings.HasPrefix(p, PathSubscriptions+"/") && r.Method == http.MethodDelete:
			n.unsubscribe(w, who, strings.TrimPrefix(p, PathSubscriptions+"/"))
		case p == PathTest && r.Method == http.MethodPost:
			n.test(w, r, who)
		case p == PathUsage && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			rep := UsageReport{Thresholds: []string{}, NearContextPercent: n.cfg.Usage.NearContext()}
			for _, t := range n.cfg.Usage {
				rep.Thresholds = append(rep.Thresholds, t.String())
			}
			httpguard.WriteJSON(w, http.StatusOK, rep)
		case p == PathVAPID || p == PathSubscriptions || p == PathTest || p == PathUsage || strings.HasPrefix(p, PathSubscriptions+"/"):
			httpguard.WriteError(w, http.StatusMethodNotAllowed, wire.CodeMethod, "method not allowed on this endpoint")
		default:
			httpguard.WriteError(w, http.StatusNotFound, wire.CodeNotFound, "no such notification endpoint (GET /notify/vapid, GET/POST /notify/subscriptions, DELETE /notify/subscriptions/ID, POST /notify/test, GET /notify/usage)")
		}
	})
}

func (n *Notifier) listSubs(w http.ResponseWriter, who access.Principal) {
	out := Listing{Subscriptions: []Listed{}}
	if n.push != nil {
		for _, s := range sortedSubs(n.push.list()) {
			if s.ownedBy(who) || who.Can(access.RoleAdmin) {
				out.Subscriptions = append(out.Subscriptions, Listed{ID: s.ID, Device: s.Device, Owner: s.Owner, Created: s.Created, LastOK: s.LastOK})
			}
		}
	}
	httpguard.WriteJSON(w, http.StatusOK, out)
}

func (n *Notifier) subscribe(w http.ResponseWriter, r *http.Request, who access.Principal) {
	if n.push == nil {
		httpguard.WriteError(w, http.StatusServiceUnavailable, CodeNoPush, "this relay keeps no push subscriptions (it has no home)")
		return
	}
	body, err := httpguard.ReadBody(w, r, maxPushBody, apiBodyTimeout)
	if err != nil {
		httpguard.WriteError(w, http.StatusBadRequest, CodeBadSubscription, "the body could not be read: "+err.Error())
		return
	}
	var req SubscribeRequest
	if err := json.Unmarshal(body, &req); err != nil {
		httpguard.WriteError(w, http.StatusBadRequest, CodeBadSubscription, "want {\"subscription\": PushSubscription.toJSON(), \"device\": NAME}: "+err.Error())
		return
	}
	ps := req.Subscription
	if err := checkEndpoint(ps.Endpoint, n.cfg.PushServiceAllow); err != nil {
		httpguard.WriteError(w, http.StatusBadRequest, CodeBadSubscription, err.Error())
		return
	}
	if err := checkKeys(ps.Keys.P256dh, ps.Keys.Auth); err != nil {
		httpguard.WriteError(w, http.StatusBadRequest, CodeBadSubscription, err.Error())
		return
	}
	id, err := tokenfile.Random(9)
	if err != nil {
		httpguard.WriteError(w, http.StatusInternalServerError, CodeStoreFailed, "no subscription id: "+err.Error())
		return
	}
	sub, err := n.push.put(Subscription{
		ID: id, Device: deviceName(req.Device), Owner: who.Name, Token: who.Token.String(), Role: string(who.Role), Capture: who.Capture.String(),
		Created: time.Now().UTC().Truncate(time.Second), Endpoint: ps.Endpoint,
		P256dh: strings.TrimRight(ps.Keys.P256dh, "="), Auth: strings.TrimRight(ps.Keys.Auth, "="),
	})
	if err != nil {
		httpguard.WriteError(w, http.StatusConflict, CodeTooMany, err.Error())
		return
	}
	n.mu.Lock()
	n.addDeviceLocked(sub)
	n.mu.Unlock()
	n.log.Info("device subscribed to notifications", "device", sub.Device, "owner", sub.Owner)
	httpguard.WriteJSON(w, http.StatusCreated, Listed{ID: sub.ID, Device: sub.Device, Owner: sub.Owner, Created: sub.Created})
}

func (n *Notifier) unsubscribe(w http.ResponseWriter, who access.Principal, id string) {
	if n.push != nil {
		for _, s := range n.push.list() {
			if s.ID != id || (!s.ownedBy(who) && !who.Can(access.RoleAdmin)) {
				continue
			}
			n.mu.Lock()
			n.removeDeviceLocked(id)
			n.mu.Unlock()
			if _, _, err := n.push.remove(id); err != nil {
				httpguard.WriteError(w, http.StatusInternalServerError, CodeStoreFailed, err.Error())
				return
			}
			n.log.Info("device unsubscribed from notifications", "device", s.Device, "owner", s.Owner, "by", who.Name)
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	// Someone else's subscription is as unknown as a missing one.
	httpguard.WriteError(w, http.StatusNotFound, wire.CodeNotFound, "no subscription "+id+" of yours")
}

// test sends a test message to every target and device at once, one
// attempt each, and reports what each answered.
func (n *Notifier) test(w http.ResponseWriter, r *http.Request, who access.Principal) {
	if !who.Can(access.RoleAdmin) {
		httpguard.WriteError(w, http.StatusForbidden, wire.CodeForbidden, "sending test notifications needs the admin role")
		return
	}
	n.mu.Lock()
	recips := n.recipients()
	n.mu.Unlock()
	m := Message{Kind: KindTest, Tag: "aep-test", Title: "aep-kimi test notification",
		Body: "Notifications from this relay reach you here.", Open: n.openURL("", "")}
	ctx, cancel := context.WithTimeout(r.Context(), SendTimeout)
	defer cancel()
	results := make([]TestResult, len(recips))
	var wg sync.WaitGroup
	for i, rc := range recips {
		wg.Go(func() {
			err := rc.q.Target().Send(ctx, m)
			results[i] = TestResult{Target: rc.to, OK: err == nil}
			if err != nil {
				// The report names the target already; the error's own prefix
				// (its name, for logs) would say it twice.
				results[i].Error = strings.TrimPrefix(err.Error(), rc.to+": ")
				if errors.Is(err, context.DeadlineExceeded) {
					results[i].Error = "no answer within " + SendTimeout.String()
				}
			}
		})
	}
	wg.Wait()
	httpguard.WriteJSON(w, http.StatusOK, TestReport{Results: results})
}
