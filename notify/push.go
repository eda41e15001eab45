package notify

import (
	"context"
	"crypto/ecdh"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/atomicfile"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// Web Push (RFC 8030, 8291, 8292): the relay is the application server.
// Its VAPID key pair is made on first start; each device a person
// subscribes from the page is a target of its own, tied to that person.
const (
	// VAPIDFileName keeps the VAPID key pair (0600).
	VAPIDFileName = "vapid.json"
	// SubscriptionsFileName keeps the push subscriptions (0600).
	SubscriptionsFileName = "push-subscriptions.json"
	// MaxSubscriptions bounds the subscriptions kept, MaxPerPerson each
	// person's.
	MaxSubscriptions = 1000
	MaxPerPerson     = 20
	// maxDeviceRunes bounds a device's name.
	maxDeviceRunes = 64
	// maxPushBody is the largest subscription request taken.
	maxPushBody = 16 << 10
	// pushTTLMax bounds how long a push service keeps an undelivered
	// request's notification; an update or a test lives pushTTLOther.
	pushTTLMax   = 24 * time.Hour
	pushTTLOther = 10 * time.Minute
	// pushSubscriber is the VAPID contact when the public URL is not
	// https (RFC 8292 §2.1 wants mailto: or https:).
	pushSubscriber = "aep-kimi@localhost"
)

// vapidKeys is the relay's VAPID key pair, base64url as webpush-go takes it.
type vapidKeys struct {
	Private string `json:"private"`
	Public  string `json:"public"`
}

// loadVAPID reads the key pair under home, made on first use.
func loadVAPID(home string) (vapidKeys, error) {
	path := filepath.Join(home, VAPIDFileName)
	var k vapidKeys
	b, err := safefile.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if k.Private, k.Public, err = webpush.GenerateVAPIDKeys(); err != nil {
			return k, fmt.Errorf("notify: VAPID keys: %w", err)
		}
		if err := safefile.PrivateDir(home); err != nil {
			return k, fmt.Errorf("notify: VAPID keys: %w", err)
		}
		b, _ := json.Marshal(k)
		if err := atomicfile.Write(path, b, atomicfile.Options{}); err != nil && !errors.Is(err, atomicfile.ErrDirSync) {
			return k, fmt.Errorf("notify: VAPID keys: %w", err)
		}
		return k, nil
	case err != nil:
		return k, fmt.Errorf("notify: VAPID keys: %w", err)
	}
	if err := json.Unmarshal(b, &k); err != nil || k.Private == "" || k.Public == "" {
		return k, fmt.Errorf("notify: VAPID keys %s are not readable: remove the file to make new ones (every device then subscribes again)", path)
	}
	return k, nil
}

// Subscription is one device's push subscription, tied to the person who
// made it.
type Subscription struct {
	ID      string `json:"id"`
	Device  string `json:"device"`
	Owner   string `json:"owner"`
	Role    string `json:"role"`
	Capture string `json:"capture"`
	// Token names the token Owner subscribed with (access.Ref; "" for
	// the owner): the device is told nothing once that token is gone.
	Token    string    `json:"token,omitempty"`
	Created  time.Time `json:"created"`
	LastOK   time.Time `json:"last_ok,omitzero"`
	Endpoint string    `json:"endpoint"`
	P256dh   string    `json:"p256dh"`
	Auth     string    `json:"auth"`
}

// principal is who the subscription answers as.
func (s Subscription) principal() access.Principal {
	c, err := aep.ParseCapture(s.Capture)
	if err != nil {
		c = aep.CaptureMetadata
	}
	return access.Principal{Name: s.Owner, Role: access.Role(s.Role), Capture: c, Token: access.ParseRef(s.Token)}
}

// ownedBy reports whether who made the subscription, with the token they
// hold now: a name given a new token owns none of the old one's devices.
func (s Subscription) ownedBy(who access.Principal) bool {
	return s.Owner == who.Name && s.Token == who.Token.String()
}

// pushStore keeps the subscriptions in a 0600 file under the home.
type pushStore struct {
	path string
	mu   sync.Mutex
	subs []Subscription
}

func openPushStore(home string) (*pushStore, error) {
	s := &pushStore{path: filepath.Join(home, SubscriptionsFileName)}
	b, err := safefile.ReadFile(s.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("notify: push subscriptions: %w", err)
	}
	if err := json.Unmarshal(b, &s.subs); err != nil {
		return nil, fmt.Errorf("notify: push subscriptions %s: %w", s.path, err)
	}
	return s, nil
}

func (s *pushStore) saveLocked() error {
	b, err := json.Marshal(s.subs)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(s.path, b, atomicfile.Options{}); err != nil && !errors.Is(err, atomicfile.ErrDirSync) {
		return fmt.Errorf("notify: push subscriptions: %w", err)
	}
	return nil
}

func (s *pushStore) list() []Subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Subscription(nil), s.subs...)
}

// put adds sub, or replaces the subscription with its endpoint (a browser
// subscribing again), keeping that one's id.
func (s *pushStore) put(sub Subscription) (Subscription, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mine := 0
	for i, old := range s.subs {
		if old.Endpoint == sub.Endpoint {
			sub.ID, sub.Created = old.ID, old.Created
			prev := s.subs[i]
			s.subs[i] = sub
			if err := s.saveLocked(); err != nil {
				s.subs[i] = prev
				return Subscription{}, err
			}
			return sub, nil
		}
		if old.ownedBy(sub.principal()) {
			mine++
		}
	}
	switch {
	case mine >= MaxPerPerson:
		return Subscription{}, fmt.Errorf("%s has %d devices subscribed, the most kept: remove one first", sub.Owner, mine)
	case len(s.subs) >= MaxSubscriptions:
		return Subscription{}, fmt.Errorf("this relay keeps %d push subscriptions, the most it keeps: remove some first", len(s.subs))
	}
	s.subs = append(s.subs, sub)
	if err := s.saveLocked(); err != nil {
		s.subs = s.subs[:len(s.subs)-1]
		return Subscription{}, err
	}
	return sub, nil
}

// remove drops the subscription id; false when there is none.
func (s *pushStore) remove(id string) (Subscription, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, sub := range s.subs {
		if sub.ID == id {
			s.subs = append(s.subs[:i:i], s.subs[i+1:]...)
			return sub, true, s.saveLocked()
		}
	}
	return Subscription{}, false, nil
}

// ok notes a delivery the push service took.
func (s *pushStore) ok(id string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.subs {
		if s.subs[i].ID == id {
			s.subs[i].LastOK = at
			_ = s.saveLocked() // best effort: last_ok is informational
		}
	}
}

// pushTarget delivers to one device.
type pushTarget struct {
	sub     Subscription
	keys    vapidKeys
	contact string
	client  *http.Client
	// sent notes an accepted push; drop forgets a subscription that can
	// never be delivered to, saying why.
	sent func(id string)
	drop func(id, why string)
}

func (t *pushTarget) Name() string { return "push:" + t.sub.Owner + "'s " + t.sub.Device }

// PushPayload is what a device's service worker receives, decrypted.
type PushPayload struct {
	V       int          `json:"v"`
	Tag     string       `json:"tag"`
	Title   string       `json:"title"`
	Body    string       `json:"body"`
	Open    string       `json:"open"`
	Close   bool         `json:"close"`
	Answers []PushAnswer `json:"answers"`
}

// PushAnswer is one action of a notification.
type PushAnswer struct {
	Option string `json:"option"`
	Label  string `json:"label"`
	URL    string `json:"url"`
}

// pushPayload is m as a service worker reads it.
func pushPayload(m Message) PushPayload {
	p := PushPayload{V: 1, Tag: m.Tag, Title: m.Title, Body: m.Body, Open: m.Open, Close: m.Kind == KindUpdate, Answers: []PushAnswer{}}
	for _, a := range m.Answers {
		p.Answers = append(p.Answers, PushAnswer(a))
	}
	return p
}

// topic collapses pending pushes with one tag at the push service (RFC
// 8030 §5.4: at most 32 base64url characters).
func topic(tag string) string {
	h := sha256.Sum256([]byte(tag))
	return base64.RawURLEncoding.EncodeToString(h[:])[:32]
}

// pushOptions are the headers of m's push: a waiting request is urgent and
// worthless after its deadline; an update or a test is neither.
func pushOptions(m Message, now time.Time) (ttl time.Duration, urgency webpush.Urgency) {
	switch m.Kind {
	case KindRequest, KindDigest:
		ttl = pushTTLMax
		if !m.Deadline.IsZero() {
			ttl = min(max(m.Deadline.Sub(now), time.Second), pushTTLMax)
		}
		return ttl, webpush.UrgencyHigh
	}
	return pushTTLOther, webpush.UrgencyNormal
}

func (t *pushTarget) Send(ctx context.Context, m Message) error {
	body, err := json.Marshal(pushPayload(m))
	if err != nil {
		return fmt.Errorf("push payload: %w: %w", err, ErrPermanent)
	}
	ttl, urgency := pushOptions(m, time.Now())
	resp, err := webpush.SendNotificationWithContext(ctx, body, &webpush.Subscription{
		Endpoint: t.sub.Endpoint, Keys: webpush.Keys{P256dh: t.sub.P256dh, Auth: t.sub.Auth},
	}, &webpush.Options{
		HTTPClient: t.client, Subscriber: t.contact, Topic: topic(m.Tag), TTL: int(ttl / time.Second), Urgency: urgency,
		VAPIDPublicKey: t.keys.Public, VAPIDPrivateKey: t.keys.Private,
	})
	// The endpoint is the device's capability: net/http's errors quote it,
	// and these errors are logged.
	err = transportError(err)
	if errors.Is(err, errNonPublic) {
		// Pushing again would only probe the same place (or tell the
		// subscriber whether it answers): the subscription goes.
		t.drop(t.sub.ID, "its push service is not at a public address")
		return fmt.Errorf("push: %w: the subscription is dropped: %w", err, ErrPermanent)
	}
	if err != nil {
		return fmt.Errorf("push: %w", err) // unreachable, refused at the socket or out of time: retried
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	switch st := resp.StatusCode; {
	case st >= 200 && st < 300:
		t.sent(t.sub.ID)
		return nil
	case st == http.StatusNotFound || st == http.StatusGone:
		t.drop(t.sub.ID, "the push service no longer knows it")
		return fmt.Errorf("push service answered %d: the subscription is gone and dropped: %w", st, ErrPermanent)
	case st == http.StatusTooManyRequests || st >= 500:
		return fmt.Errorf("push service answered %d", st)
	default:
		return fmt.Errorf("push service answered %d: %w", st, ErrPermanent)
	}
}

// checkKeys accepts the browser's keys: p256dh an uncompressed P-256
// point, auth 16 bytes (RFC 8291 §3).
func checkKeys(p256dh, auth string) error {
	pk, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(p256dh, "="))
	if err != nil {
		return errors.New("keys.p256dh is not base64url")
	}
	if _, err := ecdh.P256().NewPublicKey(pk); err != nil || len(pk) != 65 {
		return errors.New("keys.p256dh is not an uncompressed P-256 public key")
	}
	a, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(auth, "="))
	if err != nil || len(a) != 16 {
		return errors.New("keys.auth is not 16 bytes of base64url")
	}
	return nil
}

// deviceName is a device's name as people gave it, one clean line.
func deviceName(s string) string {
	s = consumer.Line(s)
	if s == "" {
		return "browser"
	}
	return clip(s, maxDeviceRunes)
}

// sortedSubs orders subscriptions by when they were made.
func sortedSubs(subs []Subscription) []Subscription {
	sort.SliceStable(subs, func(i, j int) bool { return subs[i].Created.Before(subs[j].Created) })
	return subs
}
