package export

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestSinkConfigBuild(t *testing.T) {
	for _, c := range []struct {
		cfg  SinkConfig
		want string // error substring; "" builds
	}{
		{SinkConfig{Mode: NameOTLP}, "--endpoint is required"},
		{SinkConfig{Mode: NameOTLP, TracesEndpoint: "http://t", Signal: "both"}, "--endpoint is required for logs"},
		{SinkConfig{Mode: NameOTLP, Endpoint: "http://e", Signal: "metrics"}, "metrics"},
		{SinkConfig{Mode: NameOTLP, Endpoint: "http://e", Signal: "traces"}, ""},
		{SinkConfig{Mode: NameCE}, "--sink is required"},
		{SinkConfig{Mode: NameCE, URL: "http://s"}, ""},
		{SinkConfig{Mode: NameOCSF}, "exactly one of --out and --sink"},
		{SinkConfig{Mode: NameOCSF, URL: "http://s", Out: "f"}, "exactly one of --out and --sink"},
		{SinkConfig{Mode: NameOCSF, Out: t.TempDir() + "/out.ndjson"}, ""},
		{SinkConfig{Mode: "xml"}, "unknown mode"},
	} {
		s, closeSink, err := c.cfg.Build()
		closeSink()
		switch {
		case c.want == "" && (err != nil || s == nil):
			t.Errorf("%+v: %v", c.cfg, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

func TestServeRefusesPublicMetrics(t *testing.T) {
	err := Serve(context.Background(), &Live{}, prometheus.NewRegistry(), "0.0.0.0:9464")
	if err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Fatalf("Serve = %v", err)
	}
}

func TestConvertFilesCountsAndReports(t *testing.T) {
	var out bytes.Buffer
	var bad, unreadable []string
	n := Converter{Mode: ModeCE, MaxCapture: DefaultMaxCapture}.ConvertFiles([]string{"-", "/nonexistent/x.jsonl"},
		strings.NewReader("{\"aep\":\n"), &out,
		func(name string, line int, msg string) { bad = append(bad, name) },
		func(name string, err error) { unreadable = append(unreadable, name) })
	if n.In != 1 || n.Bad != 1 || len(bad) != 1 || bad[0] != "-" || len(unreadable) != 1 || unreadable[0] != "/nonexistent/x.jsonl" {
		t.Fatalf("counts %+v, bad %v, unreadable %v", n, bad, unreadable)
	}
}
