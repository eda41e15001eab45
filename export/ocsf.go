package export

import (
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
)

// OCSFVersion is the OCSF schema version the projection targets (AEP-0005
// §4.1).
const OCSFVersion = "1.8.0"

// OCSF class, category and enum values used by the projection (§4.2).
const (
	ocsfAuthentication   = 3002
	ocsfProcessActivity  = 1007
	ocsfDetectionFinding = 2004

	ocsfBlocked  = 2
	ocsfNoAction = 16
)

// ocsfClass is one row of the §4.2 table; zero status or disposition means
// the record asserts none.
type ocsfClass struct {
	class, category, activity, status, disposition int
}

// ocsfClassOf returns the §4.2 row for an event type.
func ocsfClassOf(typ string) (ocsfClass, bool) {
	switch typ {
	case "session.started":
		return ocsfClass{ocsfAuthentication, 3, 1, 1, 0}, true
	case "session.ended":
		return ocsfClass{ocsfAuthentication, 3, 2, 1, 0}, true
	case "tool.requested":
		return ocsfClass{ocsfProcessActivity, 1, 1, 0, 0}, true
	case "tool.completed":
		return ocsfClass{ocsfProcessActivity, 1, 2, 1, 0}, true
	case "tool.failed":
		return ocsfClass{ocsfProcessActivity, 1, 2, 2, 0}, true
	case "tool.denied":
		return ocsfClass{ocsfProcessActivity, 1, 1, 2, ocsfBlocked}, true
	case "attention.requested":
		return ocsfClass{ocsfDetectionFinding, 2, 1, 1, 0}, true
	case "attention.answered":
		return ocsfClass{ocsfDetectionFinding, 2, 2, 2, 0}, true
	case "attention.resolved":
		return ocsfClass{ocsfDetectionFinding, 2, 3, 4, 0}, true
	case "attention.timeout":
		return ocsfClass{ocsfDetectionFinding, 2, 3, 0, ocsfNoAction}, true
	}
	return ocsfClass{}, false
}

// ocsfSeverity is the §4.4 table.
func ocsfSeverity(s string) int {
	switch s {
	case "notice":
		return 2
	case "warning":
		return 3
	case "error":
		return 4
	case "critical":
		return 5
	}
	return 1
}

// OCSFProjects reports whether events of type typ have an OCSF projection.
func OCSFProjects(typ string) bool {
	_, ok := ocsfClassOf(typ)
	return ok
}

// OCSF projects e onto its OCSF 1.8.0 record (AEP-0005 §4) under the
// capture ceiling max, as canonical JSON. ok is false for events outside
// the §4.2 families, which produce no record.
func OCSF(e *aep.Event, max aep.Capture) (rec []byte, ok bool, err error) {
	c, ok := ocsfClassOf(e.Type)
	if !ok {
		return nil, false, nil
	}
	var data map[string]any
	if raw := survivingData(e, max); raw != nil {
		if data, err = e.DataMap(); err != nil {
			return nil, true, fmt.Errorf("%s %s: %w", e.Type, e.ID, err)
		}
	}
	if e.Type == "attention.resolved" && data["resolution"] == "dismissed" {
		c.disposition = ocsfNoAction
	}
	meta := map[string]any{
		"version":       OCSFVersion,
		"uid":           e.ID,
		"original_time": e.Time,
		"product":       map[string]any{"name": e.Agent},
	}
	if e.Cause != "" {
		meta["correlation_uid"] = e.Cause
	}
	env := e.Clone()
	env.Data = nil
	envJSON, err := env.MarshalJSON()
	if err != nil {
		return nil, true, err
	}
	unmapped := map[string]any{"aep": json.RawMessage(envJSON)}
	if len(data) > 0 {
		unmapped["data"] = data
	}
	r := map[string]any{
		"class_uid":    c.class,
		"category_uid": c.category,
		"activity_id":  c.activity,
		"type_uid":     c.class*100 + c.activity,
		"severity_id":  ocsfSeverity(e.Severity),
		"message":      e.Type,
		"metadata":     meta,
		"unmapped":     unmapped,
	}
	if t, err := time.Parse(time.RFC3339Nano, e.Time); err == nil {
		r["time"] = t.UnixMilli()
	}
	if c.status != 0 {
		r["status_id"] = c.status
	}
	if c.disposition != 0 {
		r["disposition_id"] = c.disposition
		meta["profiles"] = []string{"security_control"}
	}
	switch c.class {
	case ocsfAuthentication:
		r["user"] = map[string]any{"name": e.Agent}
		r["session"] = map[string]any{"uid": e.Session}
	case ocsfProcessActivity:
		r["actor"] = map[string]any{"app_name": e.Agent}
		proc := map[string]any{}
		if e.Subject != "" {
			proc["name"] = e.Subject
		}
		if tool, ok := data["tool"].(map[string]any); ok {
			if id, ok := tool["call_id"].(string); ok && id != "" {
				proc["uid"] = id
			}
		}
		r["process"] = proc
		dev := map[string]any{"type_id": 0}
		if u, err := url.Parse(e.Source); err == nil && u.Host != "" {
			dev["hostname"] = u.Host
		} else {
			dev["name"] = e.Source
		}
		r["device"] = dev
	case ocsfDetectionFinding:
		uid := e.Subject
		if e.Type == "attention.requested" {
			uid = e.ID
		}
		r["finding_info"] = map[string]any{"uid": uid, "title": e.Type}
	}
	rec, err = aep.Canonical(r)
	return rec, true, err
}
