package export

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/aep-kimi/aep-kimi/aep"
)

// CloudEvents constants (AEP-0005 §1 B1, B3).
const (
	// CETypePrefix is the frozen reverse-DNS root every AEP type maps under.
	CETypePrefix = "dev.aep."
	// CESpecVersion is the CloudEvents version the bridge speaks.
	CESpecVersion = "1.0"
	// CEContentType is the structured-mode media type of one event.
	CEContentType = "application/cloudevents+json"
	ceDataType    = "application/json"
)

// ceAttrs is the §1 B4/B5 table in output order: AEP attribute, CE attribute.
func ceAttrs() [11][2]string {
	return [11][2]string{
		{aep.AttrAEP, "aepversion"}, {aep.AttrAgent, "aepagentid"},
		{aep.AttrSession, "aepsessionid"}, {aep.AttrRun, "aeprunid"},
		{aep.AttrStep, "aepstep"}, {aep.AttrSeq, "aepsequence"},
		{aep.AttrEpoch, "aepepoch"}, {aep.AttrCause, "aepcausationid"},
		{aep.AttrSeverity, "aepseverity"}, {aep.AttrCapture, "aepcapture"},
		{aep.AttrTraceparent, "traceparent"},
	}
}

// ToCE maps an AEP event to a structured-mode CloudEvents 1.0 JSON object
// (AEP-0005 §1). Absent optional attributes produce no CE attribute;
// extension attributes pass through verbatim.
func ToCE(e *aep.Event) []byte {
	var buf bytes.Buffer
	buf.Grow(384 + len(e.Data))
	buf.WriteString(`{"specversion":"1.0"`)
	str := func(k, v string) {
		if v == "" {
			return
		}
		buf.WriteString(`,"`)
		buf.WriteString(k)
		buf.WriteString(`":`)
		buf.WriteString(aep.Quote(v))
	}
	num := func(k string, v *int64) {
		if v == nil {
			return
		}
		buf.WriteString(`,"`)
		buf.WriteString(k)
		buf.WriteString(`":`)
		buf.WriteString(strconv.FormatInt(*v, 10))
	}
	str("id", e.ID)
	str("source", e.Source)
	str("type", CETypePrefix+e.Type)
	str("subject", e.Subject)
	str("time", e.Time)
	if e.Data != nil {
		str("datacontenttype", ceDataType)
	}
	str("aepversion", e.AEP)
	str("aepagentid", e.Agent)
	str("aepsessionid", e.Session)
	str("aeprunid", e.Run)
	str("aepstep", e.Step)
	num("aepsequence", e.Seq)
	num("aepepoch", e.Epoch)
	str("aepcausationid", e.Cause)
	str("aepseverity", e.Severity)
	str("aepcapture", e.Capture)
	str("traceparent", e.Traceparent)
	names := make([]string, 0, len(e.Ext))
	for k := range e.Ext {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if len(e.Ext[k]) == 0 {
			continue
		}
		buf.WriteByte(',')
		buf.WriteString(aep.Quote(k))
		buf.WriteByte(':')
		buf.Write(aep.Compact(e.Ext[k]))
	}
	if e.Data != nil {
		buf.WriteString(`,"data":`)
		buf.Write(aep.Compact(e.Data))
	}
	buf.WriteByte('}')
	return buf.Bytes()
}

// ErrForeignCE marks a CloudEvent whose type is outside the AEP root
// (AEP-0005 §2 rule 3): out of scope for the bridge, not malformed.
var ErrForeignCE = errors.New("foreign CloudEvent: type outside the dev.aep root")

// FromCE maps a structured-mode CloudEvents JSON object back to the AEP event
// it carries (AEP-0005 §2). Unknown extension attributes with legal AEP
// extension names are preserved; others are dropped and reported in dropped
// (one diagnostic each). The result passes envelope validation or FromCE
// returns an error; a type outside the AEP root wraps ErrForeignCE.
func FromCE(b []byte) (e *aep.Event, dropped []string, err error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&m); err != nil {
		return nil, nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if m == nil {
		return nil, nil, errors.New("not a JSON object")
	}
	if _, err := dec.Token(); err == nil {
		return nil, nil, errors.New("trailing data after the JSON object")
	}
	getStr := func(k string) (string, bool, error) {
		v, ok := m[k]
		if !ok {
			return "", false, nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", true, fmt.Errorf("CE attribute %s must be a string", k)
		}
		return s, true, nil
	}
	if v, _, err := getStr("specversion"); err != nil || v != CESpecVersion {
		return nil, nil, fmt.Errorf("specversion must be %q", CESpecVersion)
	}
	typ, _, err := getStr("type")
	if err != nil {
		return nil, nil, err
	}
	if !strings.HasPrefix(typ, CETypePrefix) {
		return nil, nil, fmt.Errorf("%w: %q", ErrForeignCE, typ)
	}
	if ct, ok, err := getStr("datacontenttype"); err != nil || ok && ct != ceDataType {
		return nil, nil, fmt.Errorf("datacontenttype must be %q", ceDataType)
	}
	if _, ok := m["data_base64"]; ok {
		return nil, nil, errors.New("data_base64 cannot carry an AEP payload (data is a JSON object)")
	}
	e = &aep.Event{Type: strings.TrimPrefix(typ, CETypePrefix)}
	strs := map[string]*string{
		"id": &e.ID, "source": &e.Source, "subject": &e.Subject, "time": &e.Time,
		"aepversion": &e.AEP, "aepagentid": &e.Agent, "aepsessionid": &e.Session,
		"aeprunid": &e.Run, "aepstep": &e.Step, "aepcausationid": &e.Cause,
		"aepseverity": &e.Severity, "aepcapture": &e.Capture, "traceparent": &e.Traceparent,
	}
	for k, dst := range strs {
		s, ok, err := getStr(k)
		if err != nil {
			return nil, nil, err
		}
		if ok && s == "" {
			return nil, nil, fmt.Errorf("CE attribute %s must not be empty", k)
		}
		*dst = s
	}
	for k, dst := range map[string]**int64{"aepsequence": &e.Seq, "aepepoch": &e.Epoch} {
		v, ok := m[k]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("CE attribute %s must be an integer", k)
		}
		*dst = aep.Int64(n)
	}
	if d, ok := m["data"]; ok {
		d = bytes.TrimSpace(d)
		if len(d) == 0 || d[0] != '{' {
			return nil, nil, errors.New("data must be a JSON object")
		}
		e.Data = append(json.RawMessage(nil), aep.Compact(d)...)
	}
	known := func(k string) bool {
		switch k {
		case "specversion", "type", "datacontenttype", "data":
			return true
		}
		_, ok := strs[k]
		return ok || k == "aepsequence" || k == "aepepoch"
	}
	names := make([]string, 0, len(m))
	for k := range m {
		if !known(k) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		if err := setExtRaw(e, k, m[k]); err != nil {
			dropped = append(dropped, fmt.Sprintf("dropped CE attribute %q: %v", k, err))
		}
	}
	if err := aep.CheckEnvelope(e); err != nil {
		return nil, dropped, err
	}
	return e, dropped, nil
}

// setExtRaw keeps a CE extension attribute as an AEP extension attribute
// when its name and value are legal there (AEP-0001 §5.4).
func setExtRaw(e *aep.Event, name string, raw json.RawMessage) error {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return err
	}
	switch x := v.(type) {
	case json.Number:
		n, err := x.Int64()
		if err != nil {
			return errors.New("value must be a string, integer or boolean")
		}
		return e.SetExt(name, n)
	case string, bool:
		return e.SetExt(name, x)
	}
	return errors.New("value must be a string, integer or boolean")
}
