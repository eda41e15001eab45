package consumer

import (
	"sort"
	"strings"

	"github.com/aep-kimi/aep-kimi/mapping"
)

// Label lengths.
const (
	// sessionPrefix is what Kimi puts before every session id; it tells
	// sessions apart no better than nothing, so labels leave it out.
	sessionPrefix = "session_"
	// shortIDRunes is a label's id length before collisions lengthen it.
	shortIDRunes = 6
	// labelSep joins a label's parts.
	labelSep = " · "
)

// Label is what a person recognises a session by: its project (the last
// element of its working directory), Kimi's title when it sent one, and a
// short id, distinct among the sessions shown together. fleetpage's
// state.js computes the same labels (its labels function); both are held
// to testdata/labels.json.
type Label struct {
	Project string `json:"project,omitempty"`
	Title   string `json:"title,omitempty"`
	ID      string `json:"id"`
}

// String joins the label's parts: "acme-shop · bump chi · 3f2a9c".
func (l Label) String() string {
	var parts []string
	for _, p := range []string{l.Project, l.Title, l.ID} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, labelSep)
}

// LabelOf is what a label is made of: a session's id, project and title.
type LabelOf struct {
	Session string `json:"session"`
	Project string `json:"project,omitempty"`
	Title   string `json:"title,omitempty"`
}

// Labels labels sessions shown together: each short id is the shortest
// prefix (at least shortIDRunes) of the id without Kimi's session_ prefix
// that no other session's id shares.
func Labels(sessions []LabelOf) map[string]Label {
	ids := make([]string, 0, len(sessions))
	seen := map[string]bool{}
	for _, s := range sessions {
		if !seen[s.Session] {
			seen[s.Session] = true
			ids = append(ids, s.Session)
		}
	}
	sort.Strings(ids)
	short := shortIDs(ids)
	out := make(map[string]Label, len(sessions))
	for _, s := range sessions {
		out[s.Session] = Label{Project: oneLine(s.Project), Title: oneLine(s.Title), ID: short[s.Session]}
	}
	return out
}

// shortIDs gives each id the shortest distinct prefix of its bare form.
func shortIDs(ids []string) map[string]string {
	bare := make([][]rune, len(ids))
	for i, id := range ids {
		bare[i] = []rune(BareID(id))
	}
	out := make(map[string]string, len(ids))
	for i, b := range bare {
		n := min(shortIDRunes, len(b))
		for j, o := range bare {
			if j != i {
				n = max(n, min(commonPrefix(b, o)+1, len(b)))
			}
		}
		out[ids[i]] = string(b[:n])
	}
	return out
}

func commonPrefix(a, b []rune) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// BareID is a session id without Kimi's session_ prefix (the whole id when
// that would leave nothing).
func BareID(id string) string {
	if b := strings.TrimPrefix(id, sessionPrefix); b != "" {
		return b
	}
	return id
}

// Project is the last element of a working directory, POSIX or Windows
// ("" for none).
func Project(cwd string) string { return mapping.ProjectName(cwd) }

// ProjectOf is the project a session.started's data names: the source's
// project field (mapping.DataProject, at metadata), else the last element
// of its cwd (at redacted and up).
func ProjectOf(data map[string]any) string {
	if p, _ := data[mapping.DataProject].(string); p != "" {
		return p
	}
	c, _ := data["cwd"].(string)
	return Project(c)
}

// Labels labels every session the fold knows.
func (f *Fold) Labels() map[string]Label {
	var of []LabelOf
	for _, id := range f.Sessions() {
		s := f.Session(id)
		of = append(of, LabelOf{Session: id, Project: s.Project, Title: s.Title})
	}
	return Labels(of)
}
