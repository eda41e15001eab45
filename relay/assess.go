package relay

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// assessSeen bounds the assessment events the counter remembers, so an
// emitter's redelivery after a reconnect is not counted twice.
const assessSeen = 4096

// assessments counts the AEP-0009 assessments the relay admits, by kind
// (feedback, evaluation, guardrail) and label (a feedback's thumbs_up or
// thumbs_down, else other): a fleet's ratings on /metrics. They are rare,
// so reading one's data costs nothing the hot path pays.
type assessments struct {
	counter *prometheus.CounterVec

	mu    sync.Mutex
	seen  map[string]bool
	order []string
}

func newAssessments(reg prometheus.Registerer) *assessments {
	a := &assessments{
		counter: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aepkimi_relay_assessments_total",
			Help: "AEP-0009 assessments admitted, by kind (feedback, evaluation, guardrail, other) and label (thumbs_up, thumbs_down, other).",
		}, []string{"kind", "label"}),
		seen: map[string]bool{},
	}
	for _, l := range []string{mapping.LabelThumbsUp, mapping.LabelThumbsDown} {
		a.counter.WithLabelValues("feedback", l)
	}
	reg.MustRegister(a.counter)
	return a
}

// admitted counts the assessments of a batch the store took.
func (a *assessments) admitted(msgs []*Message) {
	for _, m := range msgs {
		if strings.HasPrefix(m.Type, "assessment.") && a.first(m.Source+"\n"+m.ID) {
			a.counter.WithLabelValues(assessmentLabels(m)).Inc()
		}
	}
}

// first reports whether key is new, remembering it.
func (a *assessments) first(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen[key] {
		return false
	}
	if len(a.order) >= assessSeen {
		delete(a.seen, a.order[0])
		a.order = a.order[1:]
	}
	a.seen[key] = true
	a.order = append(a.order, key)
	return true
}

// assessmentLabels are m's kind and label, from a closed set.
func assessmentLabels(m *Message) (kind, label string) {
	kind, label = "other", "other"
	switch m.Type {
	case mapping.TypeFeedback:
		kind = "feedback"
	case "assessment.evaluation.recorded":
		kind = "evaluation"
	case "assessment.guardrail.recorded":
		kind = "guardrail"
	}
	if kind != "feedback" {
		return kind, label
	}
	ev := m.Event // set at ingest; parsed again rather than written into a shared message
	if ev == nil {
		var err error
		if ev, err = aep.ParseEvent(m.Raw); err != nil {
			return kind, label
		}
	}
	data, _ := ev.DataMap()
	if l, _ := data["label"].(string); l == mapping.LabelThumbsUp || l == mapping.LabelThumbsDown {
		label = l
	}
	return kind, label
}
