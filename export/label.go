package export

import (
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// AttrSessionLabel names the session of a span or log record as people
// know it on the page and in tail (relay/consumer's Label: project, title,
// short id), since session ids alone are unreadable.
const AttrSessionLabel = "aep.session.label"

// sessionLabels remembers each session's project and title from its
// session.started, with the capture they were taken at. The zero value
// works; it is not safe for concurrent use.
type sessionLabels struct {
	of map[sessKey]labelParts
}

type labelParts struct {
	project, title string
	capture        aep.Capture
}

// observe takes a session.started's project and title when its payload
// survives the ceiling max: what is not exported does not leak through
// the label.
func (l *sessionLabels) observe(e *aep.Event, max aep.Capture) {
	if e.Type != "session.started" || e.Session == "" || survivingData(e, max) == nil {
		return
	}
	data, err := e.DataMap()
	if err != nil {
		return
	}
	title, _ := data["label"].(string)
	cwd, _ := data["cwd"].(string)
	if title == "" && cwd == "" {
		return
	}
	if l.of == nil {
		l.of = map[sessKey]labelParts{}
	}
	l.of[sessKey{e.Agent, e.Session}] = labelParts{project: consumer.Project(cwd), title: title, capture: e.CaptureLevel()}
}

// label is the label of e's session ("" for none): its project and title
// only when they were captured at or below e's own capture, else just the
// short id.
func (l *sessionLabels) label(e *aep.Event) string {
	if e.Session == "" {
		return ""
	}
	of := consumer.LabelOf{Session: e.Session}
	if p, ok := l.of[sessKey{e.Agent, e.Session}]; ok && p.capture <= e.CaptureLevel() {
		of.Project, of.Title = p.project, p.title
	}
	return consumer.Labels([]consumer.LabelOf{of})[e.Session].String()
}
