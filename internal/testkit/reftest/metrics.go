package reftest

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metric is one metric family a registry serves.
type Metric struct {
	Name, Type, Help string
	Labels           []string
}

// descRe reads a prometheus.Desc's String(): its fields are not exported.
var descRe = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), unit: "(?:[^"\\]|\\.)*", constLabels: \{(.*)\}, variableLabels: \{(.*)\}\}$`)

// Metrics is every metric reg describes whose name starts with prefix,
// by name, its type read from what reg collects. A labelled family with
// no series yet has no sample to read its type from: it takes the type
// the naming rule gives (a counter's name ends in _total, a gauge's does
// not), and the rule is checked on every family that has a sample, so a
// name that breaks it is an error rather than a wrong type.
func Metrics(reg *prometheus.Registry, prefix string) ([]Metric, error) {
	types := map[string]string{}
	mch := make(chan prometheus.Metric)
	go func() { reg.Collect(mch); close(mch) }()
	for m := range mch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			return nil, err
		}
		name, _, _, err := parseDesc(m.Desc())
		if err != nil {
			return nil, err
		}
		switch {
		case d.Counter != nil:
			types[name] = "counter"
		case d.Gauge != nil:
			types[name] = "gauge"
		case d.Histogram != nil:
			types[name] = "histogram"
		case d.Summary != nil:
			types[name] = "summary"
		default:
			types[name] = "untyped"
		}
	}
	dch := make(chan *prometheus.Desc)
	go func() { reg.Describe(dch); close(dch) }()
	var out []Metric
	for d := range dch {
		name, help, labels, err := parseDesc(d)
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		typ, sampled := types[name]
		byName := "gauge"
		if strings.HasSuffix(name, "_total") {
			byName = "counter"
		}
		switch {
		case !sampled:
			typ = byName
		case (typ == "counter" || typ == "gauge") && typ != byName:
			return nil, fmt.Errorf("%s is a %s: a counter's name ends in _total and only a counter's does", name, typ)
		}
		out = append(out, Metric{Name: name, Type: typ, Help: help, Labels: labels})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func parseDesc(d *prometheus.Desc) (name, help string, labels []string, err error) {
	m := descRe.FindStringSubmatch(d.String())
	if m == nil {
		return "", "", nil, fmt.Errorf("unreadable metric description %s", d)
	}
	if name, err = strconv.Unquote(m[1]); err == nil {
		help, err = strconv.Unquote(m[2])
	}
	// A constant label is named without its value (a mode, say).
	for _, part := range []string{m[3], m[4]} {
		for _, l := range strings.Split(part, ",") {
			l, _, _ = strings.Cut(l, "=")
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
	}
	return name, help, labels, err
}

// MetricsTable renders metrics as a Markdown table; when(m) says when a
// metric is served ("" always).
func MetricsTable(ms []Metric, when func(Metric) string) string {
	var b strings.Builder
	b.WriteString("| metric | type | labels | what |\n|---|---|---|---|\n")
	for _, m := range ms {
		labels := ""
		if len(m.Labels) > 0 {
			labels = Code(strings.Join(m.Labels, ", "))
		}
		help := Cell(m.Help)
		if w := when(m); w != "" {
			help += " (" + Cell(w) + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", Code(m.Name), m.Type, labels, help)
	}
	return b.String()
}
