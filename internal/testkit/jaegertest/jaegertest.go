// Package jaegertest runs a real Jaeger (the version pinned in the tools/jaeger
// module) on loopback ports for end-to-end tests, and reads traces back
// through its query API.
package jaegertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
)

// Version is the Jaeger release the tools module pins.
const Version = "v1.76.0"

// EnvCache overrides where the built binary is kept.
const EnvCache = "AEP_KIMI_JAEGER_CACHE"

// EnvBuild, when set, lets Start build Jaeger when it is not cached yet.
// Building takes about seven CPU-minutes, so it is opt-in: .ci/run sets it
// and builds Jaeger beside its checks (TestBuild); without it a test needing
// Jaeger skips unless the binary is cached.
const EnvBuild = "AEP_KIMI_JAEGER_BUILD"

// tool is Jaeger built from the tools module (a large one: about seven
// CPU-minutes).
func tool() proctest.Tool {
	return proctest.Tool{Name: "jaeger", Version: Version, EnvCache: EnvCache,
		Module: "tools/jaeger", Pkg: "github.com/jaegertracing/jaeger/cmd/jaeger", Timeout: 30 * time.Minute}
}

// CacheDir is where Bin keeps the binary: $AEP_KIMI_JAEGER_CACHE, else a
// directory per pinned version under the user cache.
func CacheDir() string { return tool().CacheDir() }

// Bin returns the Jaeger binary, building it from the tools module into
// CacheDir on first use.
func Bin(ctx context.Context) (string, error) { return tool().Bin(ctx) }

// Jaeger is a running Jaeger with in-memory storage.
type Jaeger struct {
	// OTLP is the OTLP/HTTP base URL; Query the query service's base URL.
	OTLP, Query string
}

// Start runs Jaeger on free loopback ports until the test ends, building it
// first when EnvBuild allows; otherwise a missing binary skips the test.
func Start(t testing.TB) *Jaeger {
	t.Helper()
	if _, err := os.Stat(filepath.Join(CacheDir(), "jaeger")); err != nil && os.Getenv(EnvBuild) == "" {
		t.Skipf("skipping: Jaeger %s is not built in %s; set %s=1 to build it (about seven CPU-minutes)", Version, CacheDir(), EnvBuild)
	}
	bin, err := Bin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	otlp, query, queryGRPC, health := netaddr.FreeAddr(t), netaddr.FreeAddr(t), netaddr.FreeAddr(t), netaddr.FreeAddr(t)
	cfg := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: %q
  jaeger_query:
    # Jaeger traces its own queries to a collector on localhost:4317 by
    # default, and its shutdown waits on that export.
    enable_tracing: false
    storage:
      traces: mem
    http:
      endpoint: %q
    grpc:
      endpoint: %q
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      http:
        endpoint: %q
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`, health, query, queryGRPC, otlp)
	path := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d := proctest.Start(t, "jaeger", exec.Command(bin, "--config", path))
	j := &Jaeger{OTLP: "http://" + otlp, Query: "http://" + query}
	d.Await(t, 60*time.Second, "its query API", func() bool { return proctest.Answers(j.Query + "/api/services") })
	return j
}

// Span is a span as Jaeger's query API returns it (times in microseconds).
type Span struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	StartTime int64 `json:"startTime"`
	Duration  int64 `json:"duration"`
	Tags      []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

// Tag returns a tag's value.
func (s Span) Tag(key string) any {
	for _, t := range s.Tags {
		if t.Key == key {
			return t.Value
		}
	}
	return nil
}

// Parent is the span's CHILD_OF parent id, or "".
func (s Span) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Trace is one trace from the query API.
type Trace struct {
	TraceID string `json:"traceID"`
	Spans   []Span `json:"spans"`
}

// Traces returns the traces Jaeger holds for service.
func (j *Jaeger) Traces(service string) ([]Trace, error) {
	resp, err := http.Get(j.Query + "/api/traces?limit=100&service=" + url.QueryEscape(service))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jaeger query: HTTP %d %s", resp.StatusCode, b)
	}
	var out struct {
		Data []Trace `json:"data"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out.Data, nil
}
