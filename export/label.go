package export

import (
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
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

// labelParts are a session's project and title, each with the capture it
// needs: the source's project field rides at metadata, a project read from
// cwd and the title at their event's capture.
type labelParts struct {
	project, title     string
	projectAt, titleAt aep.Capture
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
	project := consumer.ProjectOf(data)
	if title == "" && project == "" {
		return
	}
	if l.of == nil {
		l.of = map[sessKey]labelParts{}
	}
	parts := labelParts{project: project, title: title, projectAt: e.CaptureLevel(), titleAt: e.CaptureLevel()}
	if p, _ := data[mapping.DataProject].(string); p != "" {
		parts.projectAt = aep.CaptureMetadata
	}
	l.of[sessKey{e.Agent, e.Session}] = parts
}

// label is the label of e's session ("" for none): its project and title
// only when they were captured at or below e's own capture, else just the
// short id.
func (l *sessionLabels) label(e *aep.Event) string {
	if e.Session == "" {
		return ""
	}
	of := consumer.LabelOf{Session: e.Session}
	if p, ok := l.of[sessKey{e.Agent, e.Session}]; ok {
		if p.projectAt <= e.CaptureLevel() {
			of.Project = p.project
		}
		if p.titleAt <= e.CaptureLevel() {
			of.Title = p.title
		}
	}
	return consumer.Labels([]consumer.LabelOf{of})[e.Session].String()
}
