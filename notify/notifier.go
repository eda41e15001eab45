package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/defaults"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay"
)

// Defaults and bounds of the notifier.
const (
	// CoalesceWindow: requests that come due within it of a notification
	// become one digest ("3 sessions need you") rather than one each.
	CoalesceWindow = 3 * time.Second
	// settle is the least wait before a request is notified: a rule's
	// answer is admitted in the same batch as the request, and the feed
	// must have seen it before anything is sent.
	settle = 150 * time.Millisecond
	// tick paces the checks of what is due.
	tick = 50 * time.Millisecond
	// FeedQueue bounds the stream events waiting for the notifier; past it
	// they are dropped (counted, logged), never held against the relay.
	FeedQueue = 4096
	// MaxSessions bounds the sessions the notifier's fold keeps.
	MaxSessions = 2048
	// routerAgent is the agent of the attention.routed events the
	// notifier emits (AEP-0002 §7.3: the router's own identity).
	routerAgent = "aep-kimi-notify"
	// DefaultCapture is the most a notification says (AEP capture level)
	// unless its recipient may see more.
	DefaultCapture = aep.CaptureMetadata
)

// Relay is what the notifier needs of the relay it serves.
type Relay interface {
	// RespondAnswer answers a held request (relay.Server.RespondAnswer).
	RespondAnswer(ctx context.Context, p access.Principal, surface, session, request string, answer map[string]any) error
	// Person is who p is now (relay.Server.Person): false once the token
	// p was admitted with is revoked.
	Person(p access.Principal) (access.Principal, bool)
	// Backend is the relay's store, followed in process and written to
	// with attention.routed.
	Backend() relay.Backend
}

// Config configures a Notifier. Zero values take the defaults.
type Config struct {
	// Home is the AEP home: the answer link key, the used links, the Web
	// Push keys and subscriptions live there.
	Home string
	// PublicURL is the base of every link sent (scheme, host, optional
	// path prefix): what a phone or a chat reaches the relay at.
	PublicURL string
	// After waits this long after a request before notifying, and sends
	// nothing when somebody answered by then (--notify-after).
	After time.Duration
	// Targets are the --notify targets; their answers are the owner's.
	Targets []Target
	// Window is the coalescing window (default CoalesceWindow).
	Window time.Duration
	// Capture is the most the targets are told (default metadata).
	Capture aep.Capture
	// Logger receives the notifier's logs; nil discards them.
	Logger *slog.Logger
	// PushServiceAllow are addresses where a Web Push service may be
	// besides public ones, over plain http too: a push service on this
	// machine in tests (AEP_NOTIFY_PUSH_ALLOW). None by default.
	PushServiceAllow []netip.Prefix
	// Usage are the --notify-usage thresholds: each session crossing one
	// is notified once (none by default).
	Usage UsageSpec
	// Now is the clock an answer link is judged by (its expiry, its
	// request's deadline); nil means time.Now.
	Now func() time.Time

	// settle and tick replace the defaults of those names when set: the
	// package's tests shorten them (export_test.go), so each request
	// they notify does not wait the product's pace.
	settle, tick time.Duration
}

// Notifier reaches people when requests wait: it follows the relay's
// stream, decides what deserves a notification, sends it to every target
// and device through their queues, serves the answer links and records
// each delivery on the stream as attention.routed.
type Notifier struct {
	cfg    Config
	log    *slog.Logger
	met    *Metrics
	signer *Signer
	base   *url.URL
	source string // the attention.routed events' source

	relay atomic.Pointer[relayRef]
	// sub is the stream's subscription, from Attach on.
	attachMu sync.Mutex
	sub      *feedSub
	unfollow func()

	// targets are the --notify recipients, fixed at start.
	targets []*recipient
	// Web Push: the relay's VAPID keys, the subscriptions kept, and one
	// recipient per subscribed device (guarded by mu), whose queues run
	// under runCtx once Run starts.
	vapid   vapidKeys
	push    *pushStore
	devices map[string]*device
	runCtx  context.Context
	queues  sync.WaitGroup
	client  *http.Client

	feed feed // the stream's state, guarded by mu
	mu   sync.Mutex
	// usage follows every session's token figures, from Attach on.
	usage *usageWatch
}

type relayRef struct{ Relay }

// recipient is one place notifications go: a --notify target or a device.
type recipient struct {
	q       *Queue
	who     access.Principal // the person its answers are attributed to
	surface string           // the surface its answers come from
	ceiling aep.Capture      // the most it is told
	to, via string           // how attention.routed names it
}

// New builds a notifier; Run starts it on the relay.
func New(cfg Config) (*Notifier, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.After < 0 {
		return nil, fmt.Errorf("notify: --notify-after %v is negative", cfg.After)
	}
	if cfg.Window < 0 {
		return nil, fmt.Errorf("notify: coalescing window %v is negative", cfg.Window)
	}
	defaults.Set(&cfg.Window, CoalesceWindow)
	defaults.Set(&cfg.settle, settle)
	defaults.Set(&cfg.tick, tick)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Capture == 0 {
		cfg.Capture = DefaultCapture
	}
	if cfg.Home == "" {
		return nil, errors.New("notify: no AEP home to keep the answer link key and the push subscriptions in")
	}
	base, err := ParsePublicURL(cfg.PublicURL)
	if err != nil {
		return nil, err
	}
	n := &Notifier{cfg: cfg, log: cfg.Logger, met: NewMetrics(), base: base}
	if n.signer, err = OpenSigner(cfg.Home); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	n.source = aep.AgentSourceURI(host, routerAgent)
	for _, t := range cfg.Targets {
		kind, _, _ := strings.Cut(t.Name(), ":")
		n.targets = append(n.targets, &recipient{
			q: NewQueue(t, kind, n.met, n.log), who: access.Owner(), surface: mapping.AgentLink,
			ceiling: cfg.Capture, to: t.Name(), via: kind,
		})
	}
	n.feed.init()
	n.usage = newUsageWatch(cfg.Usage, n.log)
	n.devices = map[string]*device{}
	n.client = newPushClient(cfg.PushServiceAllow)
	if n.vapid, err = loadVAPID(cfg.Home); err != nil {
		return nil, err
	}
	if n.push, err = openPushStore(cfg.Home); err != nil {
		return nil, err
	}
	for _, sub := range n.push.list() {
		n.addDeviceLocked(sub)
	}
	return n, nil
}

// device is one subscribed browser: its recipient and the end of its
// queue.
type device struct {
	rec  *recipient
	stop context.CancelFunc
}

// addDeviceLocked makes sub a recipient (replacing one with its id) and,
// once running, starts its queue. n.mu held, or not yet shared.
func (n *Notifier) addDeviceLocked(sub Subscription) {
	n.removeDeviceLocked(sub.ID)
	who := sub.principal()
	t := &pushTarget{sub: sub, keys: n.vapid, contact: n.contact(), client: n.client,
		sent: func(id string) { n.push.ok(id, time.Now()) },
		drop: n.dropDevice}
	d := &device{rec: &recipient{q: NewQueue(t, "push", n.met, n.log), who: who, surface: mapping.AgentPush,
		ceiling: min(who.Capture, n.cfg.Capture), to: t.Name(), via: "push"}}
	n.devices[sub.ID] = d
	if n.runCtx != nil {
		n.startDeviceLocked(d)
	}
}

func (n *Notifier) startDeviceLocked(d *device) {
	ctx, stop := context.WithCancel(n.runCtx)
	d.stop = stop
	n.queues.Go(func() { _ = d.rec.q.Run(ctx) })
}

func (n *Notifier) removeDeviceLocked(id string) {
	if d := n.devices[id]; d != nil {
		if d.stop != nil {
			d.stop()
		}
		delete(n.devices, id)
	}
}

// dropDevice forgets a subscription that can never be delivered to.
func (n *Notifier) dropDevice(id, why string) {
	n.mu.Lock()
	n.removeDeviceLocked(id)
	n.mu.Unlock()
	if sub, ok, err := n.push.remove(id); ok {
		n.log.Info("push subscription dropped: "+why, "device", sub.Device, "owner", sub.Owner, "err", err)
	}
}

// contact is the VAPID subscriber: the public URL when it is https.
func (n *Notifier) contact() string {
	if n.base.Scheme == "https" {
		return n.base.String()
	}
	return pushSubscriber
}

// ParsePublicURL checks a --public-url: absolute http(s), no query or
// fragment; its path is a prefix every link starts with.
func ParsePublicURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("notify: --public-url %q: want an absolute http or https URL such as https://relay.example.org", s)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// Collectors are the notifier's metrics.
func (n *Notifier) Collectors() []prometheus.Collector {
	return append(n.met.Collectors(), n.feed.dropped, n.usage)
}

// link is the absolute URL of path under the public URL.
func (n *Notifier) link(path string) string {
	u := *n.base
	u.Path += path
	return u.String()
}

// openURL is the page at one request.
func (n *Notifier) openURL(session, request string) string {
	u := *n.base
	u.Path += "/"
	if session != "" {
		u.RawQuery = url.Values{"session": {session}, "request": {request}}.Encode()
	}
	return u.String()
}

// sessionURL is the page at one session.
func (n *Notifier) sessionURL(session string) string {
	u := *n.base
	u.Path += "/"
	u.RawQuery = url.Values{"session": {session}}.Encode()
	return u.String()
}

// Attach follows the relay's stream from now on: call it before the relay
// serves, so nothing it admits is missed (Run attaches when not yet
// attached, from the moment it starts).
func (n *Notifier) Attach(r Relay) error {
	n.attachMu.Lock()
	defer n.attachMu.Unlock()
	if n.sub != nil {
		return nil
	}
	filter, err := aep.ParseFilter([]byte(FeedFilter))
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	sub := &feedSub{newLiveQueue(FeedQueue, n.feed.dropped, n.log,
		"the notifier is behind the stream: events dropped, their requests may go unnotified (counted in aepkimi_notify_feed_dropped_total)")}
	cancel, err := r.Backend().Subscribe(relay.SubscribeRequest{Filter: filter}, sub)
	if err != nil {
		return fmt.Errorf("notify: follow the relay: %w", err)
	}
	cancelUsage, err := n.usage.attach(r.Backend())
	if err != nil {
		cancel()
		return fmt.Errorf("notify: follow the relay's token figures: %w", err)
	}
	n.relay.Store(&relayRef{r})
	n.sub = sub
	n.unfollow = func() { cancel(); cancelUsage() }
	return nil
}

// Run follows the relay's stream and delivers until ctx ends.
func (n *Notifier) Run(ctx context.Context, r Relay) error {
	if err := n.Attach(r); err != nil {
		return err
	}
	defer n.unfollow()
	g, ctx := errgroup.WithContext(ctx)
	n.mu.Lock()
	n.runCtx = ctx
	for _, d := range n.devices {
		n.startDeviceLocked(d)
	}
	n.mu.Unlock()
	defer n.queues.Wait()
	for _, t := range n.targets {
		g.Go(func() error { return t.q.Run(ctx) })
	}
	g.Go(func() error { return n.follow(ctx, n.sub.ch) })
	g.Go(func() error { return n.usage.run(ctx, n.alertUsage) })
	err := g.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// recipients is everyone a notification goes to now: the targets, then
// the devices (by id, an order that does not change). n.mu held.
func (n *Notifier) recipients() []*recipient {
	out := append([]*recipient(nil), n.targets...)
	ids := make([]string, 0, len(n.devices))
	for id := range n.devices {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		out = append(out, n.devices[id].rec)
	}
	return out
}
