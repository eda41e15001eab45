package notify

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// FeedFilter is what the notifier follows: the attention lifecycle, the
// session starts (labels) and ends, the rules' answers, which take a
// request off before anything is sent, and the acks that settle an answer
// link's command (consumer.PendingFilter).
const FeedFilter = consumer.PendingFilter

// liveQueue takes the relay's live messages without ever blocking it:
// past its bound they are dropped, counted, and logged once per run of
// drops (warn says what they cost).
type liveQueue struct {
	ch       chan *relay.Message
	dropped  prometheus.Counter
	log      *slog.Logger
	warn     string
	dropping atomic.Bool
}

func newLiveQueue(size int, dropped prometheus.Counter, log *slog.Logger, warn string) liveQueue {
	return liveQueue{ch: make(chan *relay.Message, size), dropped: dropped, log: log, warn: warn}
}

func (q *liveQueue) Offer(m *relay.Message) {
	select {
	case q.ch <- m:
		q.dropping.Store(false)
	default:
		q.dropped.Inc()
		if !q.dropping.Swap(true) {
			q.log.Warn(q.warn, "queue", cap(q.ch))
		}
	}
}

// feedSub is the notifier's subscription: live only.
type feedSub struct{ liveQueue }

func (s *feedSub) Start(relay.Replay) {}

// feed is the notifier's view of the stream: one fold per capture ceiling
// a recipient has (what a notification says is derived from events lowered
// to its recipient's ceiling), and the requests it tracks.
type feed struct {
	folds   map[aep.Capture]*consumer.Fold
	tracked map[string]*tracked // by request key
	seen    map[string]time.Time
	ended   []string
	// windowEnd is when the current coalescing window closes; batch is
	// what came due within it.
	windowEnd time.Time
	batch     []*tracked
	digests   int
	dropped   prometheus.Counter
	// settling are the answer links' commands on their way (settle).
	settling []*settling
}

// tracked is one request the notifier may notify, or did.
type tracked struct {
	session, id string
	due         time.Time
	notified    bool
	tag         string
	digest      *digest // the digest it went out in, if any
}

// digest is one message about several requests.
type digest struct {
	tag     string
	members []*tracked
	open    int
}

func (f *feed) init() {
	f.folds = map[aep.Capture]*consumer.Fold{}
	f.tracked = map[string]*tracked{}
	f.seen = map[string]time.Time{}
	f.dropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "aepkimi_notify_feed_dropped_total",
		Help: "Stream events the notifier dropped because it was behind (their requests may go unnotified).",
	})
}

func key(session, id string) string { return session + "\n" + id }

// fold is the fold at ceiling c, made on first use.
func (f *feed) fold(c aep.Capture) *consumer.Fold {
	fo := f.folds[c]
	if fo == nil {
		fo = &consumer.Fold{}
		f.folds[c] = fo
	}
	return fo
}

// follow folds the stream in and sends what comes due until ctx ends.
func (n *Notifier) follow(ctx context.Context, ch <-chan *relay.Message) error {
	t := time.NewTicker(n.cfg.tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-ch:
			n.mu.Lock()
			n.take(m, time.Now())
			n.mu.Unlock()
		case now := <-t.C:
			n.mu.Lock()
			n.due(now)
			n.mu.Unlock()
		}
	}
}

// take folds one stream event in, at every ceiling in use.
func (n *Notifier) take(m *relay.Message, now time.Time) {
	ev, err := m.Envelope()
	if err != nil || ev.Session == "" {
		return
	}
	f := &n.feed
	for _, c := range n.ceilings() {
		low, err := aep.Downlevel(ev, c)
		if err != nil {
			continue
		}
		f.fold(c).Add(low)
	}
	f.seen[ev.Session] = now
	f.settle(ev)
	switch ev.Type {
	case "attention.requested":
		k := key(ev.Session, ev.ID)
		if f.tracked[k] == nil {
			f.tracked[k] = &tracked{session: ev.Session, id: ev.ID, due: now.Add(max(n.cfg.After, n.cfg.settle)), tag: "aep-" + ev.ID}
		}
	case "session.ended":
		f.ended = append(f.ended, ev.Session)
	}
}

// ceilings are the capture levels recipients have, and those their answer
// links' pages say things at (linkCeiling), the default first: the fold at
// DefaultCapture decides what is pending.
func (n *Notifier) ceilings() []aep.Capture {
	out := []aep.Capture{DefaultCapture}
	for _, r := range n.recipients() {
		levels := []aep.Capture{r.ceiling}
		if r.who.Can(access.RoleAnswer) {
			levels = append(levels, min(r.who.Capture, aep.CaptureRedacted))
		}
		for _, l := range levels {
			if !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
	}
	return out
}

// request is the fold's view of a tracked request at ceiling c.
func (n *Notifier) request(c aep.Capture, session, id string) (*consumer.Session, *consumer.Request) {
	s := n.feed.fold(c).Session(session)
	if s == nil {
		return nil, nil
	}
	return s, s.Request(id)
}

// waiting reports whether a request still waits on a person at now.
func (n *Notifier) waiting(session, id string, now time.Time) bool {
	_, r := n.request(DefaultCapture, session, id)
	return r != nil && r.Closed(now) == "" && r.Answerable()
}

// due sends what came due at now: requests still waiting (alone, or as a
// digest within a coalescing window), and the updates replacing the
// notifications of requests that closed.
func (n *Notifier) due(now time.Time) {
	f := &n.feed
	var ready []*tracked
	for k, t := range f.tracked {
		switch {
		case t.notified:
			if !n.waiting(t.session, t.id, now) {
				n.closed(t, now)
				delete(f.tracked, k)
			}
		case t.due.After(now):
		case n.waiting(t.session, t.id, now):
			if !t.inBatch(f.batch) {
				ready = append(ready, t)
			}
		default:
			delete(f.tracked, k) // answered (by a rule, or in time) before it was sent
		}
	}
	sort.Slice(ready, func(i, j int) bool { return ready[i].due.Before(ready[j].due) })
	f.batch = append(f.batch, ready...)
	if len(f.batch) > 0 && !now.Before(f.windowEnd) {
		var still []*tracked
		for _, t := range f.batch {
			if n.waiting(t.session, t.id, now) {
				still = append(still, t)
			} else {
				delete(f.tracked, key(t.session, t.id))
			}
		}
		f.batch = nil
		switch len(still) {
		case 0:
		case 1:
			n.notify(still[0], now)
			f.windowEnd = now.Add(n.cfg.Window)
		default:
			n.notifyDigest(still, now)
			f.windowEnd = now.Add(n.cfg.Window)
		}
	}
	n.forget()
}

func (t *tracked) inBatch(batch []*tracked) bool {
	for _, b := range batch {
		if b == t {
			return true
		}
	}
	return false
}

// forget drops the sessions that ended, and the least recently seen past
// MaxSessions, from every fold, unless a tracked request is theirs.
func (n *Notifier) forget() {
	f := &n.feed
	busy := map[string]bool{}
	for _, t := range f.tracked {
		busy[t.session] = true
	}
	var keep []string
	for _, s := range f.ended {
		if busy[s] {
			keep = append(keep, s)
			continue
		}
		n.forgetSession(s)
	}
	f.ended = keep
	if len(f.seen) <= MaxSessions {
		return
	}
	type aged struct {
		s  string
		at time.Time
	}
	var all []aged
	for s, at := range f.seen {
		if !busy[s] {
			all = append(all, aged{s, at})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].at.Before(all[j].at) })
	for _, a := range all[:max(0, min(len(all), len(f.seen)-MaxSessions))] {
		n.forgetSession(a.s)
	}
}

func (n *Notifier) forgetSession(s string) {
	for _, fo := range n.feed.folds {
		fo.Forget(s)
	}
	delete(n.feed.seen, s)
}

// current is whether r's person may still be told: a device whose
// owner's token was revoked, or whose role no longer reads, gets nothing.
func (n *Notifier) current(r *recipient) bool {
	ref := n.relay.Load()
	if ref == nil || r.surface != mapping.AgentPush {
		return true
	}
	p, ok := ref.Person(r.who)
	return ok && p.Can(access.RoleWatch)
}

// notify sends one request to every recipient.
func (n *Notifier) notify(t *tracked, now time.Time) {
	t.notified = true
	for _, r := range n.recipients() {
		if !n.current(r) {
			continue
		}
		m, ok := n.compose(r, t, now)
		if !ok {
			continue
		}
		n.send(r, m, []*tracked{t})
	}
}

// notifyDigest sends several requests as one message to every recipient.
func (n *Notifier) notifyDigest(ts []*tracked, now time.Time) {
	f := &n.feed
	f.digests++
	d := &digest{tag: fmt.Sprintf("aep-digest-%s", ts[0].id), members: ts, open: len(ts)}
	for _, t := range ts {
		t.notified, t.digest = true, d
	}
	for _, r := range n.recipients() {
		if n.current(r) {
			n.send(r, n.composeDigest(r, ts, d.tag, now), ts)
		}
	}
}

// closed sends the update that replaces a closed request's notification
// (or its digest's, once every request in it closed).
func (n *Notifier) closed(t *tracked, now time.Time) {
	if d := t.digest; d != nil {
		d.open--
		if d.open > 0 {
			return
		}
		for _, r := range n.recipients() {
			n.send(r, Message{Kind: KindUpdate, Tag: d.tag, Title: "Nothing waits for you now",
				Body: fmt.Sprintf("The %d requests were answered or closed.", len(d.members)), Open: n.openURL("", "")}, nil)
		}
		return
	}
	for _, r := range n.recipients() {
		if !n.current(r) {
			continue
		}
		if m, ok := n.composeUpdate(r, t, now); ok {
			n.send(r, m, nil)
		}
	}
}

// send queues m for r; once r has it, each request it carries gets its
// attention.routed.
func (n *Notifier) send(r *recipient, m Message, about []*tracked) {
	var result func(error)
	if len(about) > 0 {
		refs := make([][2]string, len(about))
		for i, t := range about {
			refs[i] = [2]string{t.session, t.id}
		}
		result = func(err error) {
			if err == nil {
				for _, ref := range refs {
					n.routed(r, ref[0], ref[1])
				}
			}
		}
	}
	r.q.Put(m, result)
}

// routed records on the stream that a request reached r (AEP-0002 §7.3:
// a consumer's event, in the request's session, seq-less, correlated by
// subject).
func (n *Notifier) routed(r *recipient, session, request string) {
	ref := n.relay.Load()
	if ref == nil {
		return
	}
	ev, err := RoutedEvent(n.source, session, request, r.to, r.via, time.Now())
	if err != nil {
		n.log.Warn("attention.routed not recorded", "err", err)
		return
	}
	m, err := relay.NewMessage(ev, time.Now())
	if err != nil {
		n.log.Warn("attention.routed not recorded", "err", err)
		return
	}
	if res := ref.Backend().Ingest([]*relay.Message{m}); res.Err != nil {
		n.log.Warn("attention.routed not recorded", "err", res.Err)
	}
}

// RoutedEvent is the attention.routed saying request (of session) was
// delivered to a surface: to names it ("webhook:example.org", "push:alice's
// Pixel"), via the mechanism (webhook, ntfy, slack, push).
func RoutedEvent(source, session, request, to, via string, now time.Time) (*aep.Event, error) {
	ev := &aep.Event{AEP: aep.Version, ID: aep.NewID(), Type: "attention.routed", Time: aep.FormatTime(now),
		Source: source, Agent: routerAgent, Session: session, Subject: request, Cause: request,
		Capture: aep.CaptureMetadata.String()}
	if err := ev.SetData(map[string]any{"to": to, "via": via}); err != nil {
		return nil, err
	}
	if err := aep.Validate(ev); err != nil {
		return nil, err
	}
	return ev, nil
}
