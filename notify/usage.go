package notify

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// Bounds of the usage watch.
const (
	// UsageQueue bounds the live events waiting for the usage watch; past
	// it they are dropped (counted, logged), never held against the relay.
	UsageQueue = 4096
	// MaxUsageSessions bounds the sessions whose figures the usage watch
	// keeps; past it the least recently seen are forgotten, all but the
	// thresholds they crossed.
	MaxUsageSessions = 4096
	// maxForgotten bounds the forgotten sessions whose crossed thresholds
	// are kept, so that one seen again is not notified twice.
	maxForgotten = 16 * MaxUsageSessions
	// TopBurners is how many sessions' burn rates /metrics shows, by rank.
	TopBurners = 5
)

// usageWatch follows every session's token figures (consumer.Meter, at
// metadata) and says when one crosses a --notify-usage threshold. It
// starts from the relay's whole history and notifies only crossings it
// sees live: a crossing the history holds was the notifier's to send when
// it happened, so a restart, a replay or a reconnect never sends one
// twice. Its figures feed /metrics whether or not thresholds are set.
type usageWatch struct {
	spec UsageSpec
	log  *slog.Logger
	sub  *usageSub

	mu        sync.Mutex
	sessions  map[string]*usageSession // by Kimi session
	forgotten map[string]uint8         // crossed thresholds of forgotten sessions
	fifo      []string                 // forgotten, oldest first

	tokens             *prometheus.CounterVec
	alerts             *prometheus.CounterVec
	dropped            prometheus.Counter
	burnDesc, overDesc *prometheus.Desc
}

// usageSession is one Kimi session's figures: its own lane's and its
// companions' (consumer.Fold joins them the same way).
type usageSession struct {
	lanes   map[string]*consumer.Meter // by AEP session
	project string
	crossed uint8 // bit i: spec[i] crossed
	ended   bool
	seen    time.Time
}

// usageAlert is one session crossing one threshold.
type usageAlert struct {
	session, project string
	threshold        UsageThreshold
	meter            consumer.Meter
}

func newUsageWatch(spec UsageSpec, log *slog.Logger) *usageWatch {
	return &usageWatch{
		spec: spec, log: log,
		sessions: map[string]*usageSession{}, forgotten: map[string]uint8{},
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aepkimi_notify_usage_tokens_total",
			Help: "Tokens the sessions used, as their events report them, since the relay started (rate(...[1h])*3600 is the fleet's burn per hour).",
		}, []string{"direction"}),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aepkimi_notify_usage_alerts_total",
			Help: "Sessions that crossed a --notify-usage threshold and were notified, by threshold.",
		}, []string{"threshold"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aepkimi_notify_usage_dropped_total",
			Help: "Stream events the usage watch dropped because it was behind (a crossing they carried is noticed at the session's next figures).",
		}),
		burnDesc: prometheus.NewDesc("aepkimi_notify_usage_burn_tokens_per_hour",
			"The highest token burn rates among the sessions: tokens each used in the last hour, by rank (1 is the highest); never by session, whose ids would be a new series each.",
			[]string{"rank"}, nil),
		overDesc: prometheus.NewDesc("aepkimi_notify_usage_sessions_over",
			"Sessions not ended whose figures are at or past a --notify-usage threshold now.",
			[]string{"threshold"}, nil),
	}
}

// usageSub is the usage watch's subscription: the history it starts
// from, then every live event.
type usageSub struct {
	liveQueue
	replay atomic.Pointer[replayRef]
}

type replayRef struct{ relay.Replay }

func (s *usageSub) Start(r relay.Replay) { s.replay.Store(&replayRef{r}) }

// attach subscribes to the whole history and what follows it.
func (w *usageWatch) attach(b relay.Backend) (cancel func(), err error) {
	w.sub = &usageSub{liveQueue: newLiveQueue(UsageQueue, w.dropped, w.log,
		"the usage watch is behind the stream: events dropped (counted in aepkimi_notify_usage_dropped_total)")}
	return b.Subscribe(relay.SubscribeRequest{From: wire.From{All: true}}, w.sub)
}

// run takes the history in, then the live events, handing each crossing
// seen live to alert, until ctx ends.
func (w *usageWatch) run(ctx context.Context, alert func([]usageAlert)) error {
	if r := w.sub.replay.Load(); r != nil {
		start := time.Now()
		n := 0
		err := r.Each(ctx, func(m *relay.Message) error {
			n++
			w.take(m, false, time.Now())
			return nil
		})
		if err != nil {
			return fmt.Errorf("notify: the usage watch's history: %w", err)
		}
		w.log.Debug("usage watch: history read", "events", n, "took", time.Since(start).Round(time.Millisecond))
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-w.sub.ch:
			if as := w.take(m, true, time.Now()); len(as) > 0 {
				alert(as)
			}
		}
	}
}

var (
	tokenWord   = []byte("token")
	escapedChar = []byte(`\u`)
)

// take folds one event in and returns the thresholds it made its session
// cross, when live (from the history, a crossing is only recorded).
func (w *usageWatch) take(m *relay.Message, live bool, now time.Time) []usageAlert {
	// Most events carry no token figure: only those that may, and the
	// session starts and ends, are parsed.
	switch m.Type {
	case "session.started", "session.ended", "":
	default:
		if !bytes.Contains(m.Raw, tokenWord) && !bytes.Contains(m.Raw, escapedChar) {
			return nil
		}
	}
	ev, err := m.Envelope()
	if err != nil || ev.Session == "" {
		return nil
	}
	low, err := aep.Downlevel(ev, DefaultCapture)
	if err != nil {
		return nil
	}
	data, _ := low.DataMap()
	kimi := consumer.KimiSessionOf(ev)
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.session(kimi, now)
	switch ev.Type {
	case "session.started":
		s.ended = false
		if p := consumer.ProjectOf(data); p != "" && kimi == ev.Session {
			s.project = p
		}
	case "session.ended":
		s.ended = kimi == ev.Session || s.lanes[kimi] == nil
	}
	lane := s.lanes[ev.Session]
	if lane == nil {
		lane = &consumer.Meter{}
		s.lanes[ev.Session] = lane
	}
	before := lane.Usage
	lane.Take(low.Type, low.Time, data)
	if live {
		w.tokens.WithLabelValues("input").Add(float64(lane.Usage.InputTokens - before.InputTokens))
		w.tokens.WithLabelValues("output").Add(float64(lane.Usage.OutputTokens - before.OutputTokens))
	}
	var out []usageAlert
	if len(w.spec) > 0 {
		meter := s.meter(kimi)
		for i, t := range w.spec {
			bit := uint8(1) << i
			if s.crossed&bit != 0 || !t.Over(meter) {
				continue
			}
			s.crossed |= bit
			if live {
				out = append(out, usageAlert{session: kimi, project: s.project, threshold: t, meter: meter})
			}
		}
	}
	w.bound()
	return out
}

// meter joins a session's lanes: its own first, then its companions in
// order of id.
func (s *usageSession) meter(kimi string) consumer.Meter {
	var m consumer.Meter
	if own := s.lanes[kimi]; own != nil {
		m = *own
	}
	ids := make([]string, 0, len(s.lanes))
	for id := range s.lanes {
		if id != kimi {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		m = m.Join(*s.lanes[id])
	}
	return m
}

// session is the Kimi session's record, made (with what it crossed
// before it was forgotten) on first sight. w.mu held.
func (w *usageWatch) session(kimi string, now time.Time) *usageSession {
	s := w.sessions[kimi]
	if s == nil {
		s = &usageSession{lanes: map[string]*consumer.Meter{}, crossed: w.forgotten[kimi]}
		delete(w.forgotten, kimi)
		w.sessions[kimi] = s
	}
	s.seen = now
	return s
}

// bound forgets the least recently seen sessions past MaxUsageSessions,
// an eighth at a time, keeping what they crossed. w.mu held.
func (w *usageWatch) bound() {
	if len(w.sessions) <= MaxUsageSessions {
		return
	}
	ids := make([]string, 0, len(w.sessions))
	for id := range w.sessions {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return w.sessions[ids[i]].seen.Before(w.sessions[ids[j]].seen) })
	for _, id := range ids[:len(ids)-MaxUsageSessions*7/8] {
		if c := w.sessions[id].crossed; c != 0 {
			w.forgotten[id] = c
			w.fifo = append(w.fifo, id)
		}
		delete(w.sessions, id)
	}
	for len(w.fifo) > maxForgotten {
		delete(w.forgotten, w.fifo[0])
		w.fifo = w.fifo[1:]
	}
}

// Describe and Collect make the watch a collector: the counters, and the
// gauges read at each scrape against the clock.
func (w *usageWatch) Describe(ch chan<- *prometheus.Desc) {
	w.tokens.Describe(ch)
	w.alerts.Describe(ch)
	w.dropped.Describe(ch)
	ch <- w.burnDesc
	ch <- w.overDesc
}

func (w *usageWatch) Collect(ch chan<- prometheus.Metric) {
	w.tokens.Collect(ch)
	w.alerts.Collect(ch)
	w.dropped.Collect(ch)
	now := time.Now()
	w.mu.Lock()
	burns := make([]int64, 0, len(w.sessions))
	over := make([]int, len(w.spec))
	for kimi, s := range w.sessions {
		m := s.meter(kimi)
		if b := m.BurnAt(now); b > 0 {
			burns = append(burns, b)
		}
		if s.ended {
			continue
		}
		for i, t := range w.spec {
			if t.Over(m) {
				over[i]++
			}
		}
	}
	w.mu.Unlock()
	slices.SortFunc(burns, func(a, b int64) int { return cmp.Compare(b, a) })
	for i := range TopBurners {
		var v float64
		if i < len(burns) {
			v = float64(burns[i])
		}
		ch <- prometheus.MustNewConstMetric(w.burnDesc, prometheus.GaugeValue, v, strconv.Itoa(i+1))
	}
	for i, t := range w.spec {
		ch <- prometheus.MustNewConstMetric(w.overDesc, prometheus.GaugeValue, float64(over[i]), t.String())
	}
}

// alertUsage sends each crossing to every recipient: one message per
// session and threshold, said at metadata whatever a recipient may see.
func (n *Notifier) alertUsage(as []usageAlert) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, a := range as {
		n.usage.alerts.WithLabelValues(a.threshold.String()).Inc()
		n.log.Info("usage threshold crossed: notifying", "session", a.session, "threshold", a.threshold.String())
		m := n.composeUsage(a)
		for _, r := range n.recipients() {
			if n.current(r) {
				r.q.Put(m, nil)
			}
		}
	}
}

// composeUsage is the message about a session crossing a threshold: what
// it crossed in the title, the session and its figures in the body.
func (n *Notifier) composeUsage(a usageAlert) Message {
	m, th := a.meter, a.threshold
	used := m.Usage.InputTokens + m.Usage.OutputTokens
	facts := &UsageFacts{Threshold: th.String(), Tokens: used, Context: m.Context, BurnPerHour: m.BurnPerHour()}
	var title string
	switch th.Kind {
	case UsageContext:
		// Rounded down: the title never says less than the threshold.
		title = "Context " + strconv.FormatInt(m.Context.Tokens*100/max(m.Context.Limit, 1), 10) + "% full"
	default:
		title = consumer.CompactCount(used) + " tokens used"
	}
	figures := consumer.TokenWords(m.Usage, m.Context)
	if b := m.BurnPerHour(); b > 0 {
		figures += " · " + consumer.CompactCount(b) + " in the last hour"
	}
	label := n.usageLabel(a.session, a.project)
	return Message{
		Kind: KindUsage, Tag: "aep-usage-" + th.String() + "-" + a.session, Session: a.session, Label: label,
		Title: clip(title+" (alert at "+th.Level()+")", titleRunes),
		Body:  clip(label+"\n"+figures, bodyRunes),
		Open:  n.sessionURL(a.session), Usage: facts,
	}
}

// usageLabel is the session's label as the notifier's fold knows it, else
// one made of the project the usage watch saw. n.mu held.
func (n *Notifier) usageLabel(session, project string) string {
	fo := n.feed.fold(DefaultCapture)
	if fo.Session(session) != nil {
		return fo.Labels()[session].String()
	}
	return consumer.Labels([]consumer.LabelOf{{Session: session, Project: project}})[session].String()
}
