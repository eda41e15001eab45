package export

import (
	"bytes"
	"context"
	"os"
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

func TestHeaders(t *testing.T) {
	file := t.TempDir() + "/auth"
	if err := os.WriteFile(file, []byte("Basic c2VjcmV0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var h Headers
	for _, v := range []string{"X-A=1", "Authorization=@" + file, " X-B =two=2"} {
		if err := h.Set(v); err != nil {
			t.Fatalf("Set(%q): %v", v, err)
		}
	}
	if h["X-A"] != "1" || h["Authorization"] != "Basic c2VjcmV0" || h["X-B"] != "two=2" {
		t.Fatalf("headers %v", h)
	}
	for _, bad := range []string{"novalue", "=v", "K=@/nonexistent/file"} {
		if err := h.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
}
