package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/export"
	"github.com/aep-kimi/aep-kimi/internal/testkit/reftest"
	"github.com/aep-kimi/aep-kimi/station"
)

// metricsDaemon is one daemon's /metrics: its registries built as its
// command builds them, plainest first; a metric only a later one serves
// is served only in that configuration (when).
type metricsDaemon struct {
	name, serves string
	builds       []metricsBuild
}

type metricsBuild struct {
	when  string
	build func(t *testing.T) *prometheus.Registry
}

// refToken is a relay token long enough for every posture.
const refToken = "reference-token-0123456789abcdef"

// daemonEnv is an empty environment with a home of the test's and the
// given variables.
func daemonEnv(t *testing.T, kv ...string) func(string) string {
	env := map[string]string{"AEP_HOME": t.TempDir(), "KIMI_CODE_HOME": t.TempDir()}
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return func(k string) string { return env[k] }
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// parseFlags binds flags with bind and parses args, as the command does.
func parseFlags(t *testing.T, bind func(fs *flag.FlagSet), args ...string) {
	fs := flag.NewFlagSet("reference", flag.ContinueOnError)
	bind(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
}

func relayRegistry(t *testing.T, getenv func(string) string, args ...string) *prometheus.Registry {
	var o station.RelayFlags
	parseFlags(t, func(fs *flag.FlagSet) { o.BindFlags(fs, getenv) }, args...)
	cfg, err := o.Config(getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = quietLog()
	srv, _, closeStore, err := station.NewRelay(context.Background(), cfg, o.RelayOptions, getenv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeStore)
	return srv.Registry()
}

func adapterRegistry(t *testing.T, getenv func(string) string) *prometheus.Registry {
	var o station.AdapterOptions
	parseFlags(t, func(fs *flag.FlagSet) { o.BindFlags(fs, getenv) })
	srv, err := station.NewAdapter(o, refToken, getenv, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	return srv.Registry()
}

func bridgeRegistry(t *testing.T, getenv func(string) string) *prometheus.Registry {
	var o station.BridgeOptions
	parseFlags(t, func(fs *flag.FlagSet) { o.BindFlags(fs, getenv) })
	b, err := station.NewBridge(o, refToken, getenv, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	return b.Registry()
}

func metricsDaemons() []metricsDaemon {
	return []metricsDaemon{
		{name: "relay", serves: "`aep-kimi relay` and `up`, on the relay's address", builds: []metricsBuild{
			{"", func(t *testing.T) *prometheus.Registry { return relayRegistry(t, daemonEnv(t), "--store", "memory") }},
			{"with a token", func(t *testing.T) *prometheus.Registry {
				return relayRegistry(t, daemonEnv(t, "AEP_TOKEN", refToken), "--store", "memory")
			}},
			{"with --store jetstream", func(t *testing.T) *prometheus.Registry {
				return relayRegistry(t, daemonEnv(t, "AEP_TOKEN", refToken), "--store", "jetstream")
			}},
		}},
		{name: "adapter", serves: "`aep-kimi adapter` and `up`, on the hook intake's address", builds: []metricsBuild{
			{"", func(t *testing.T) *prometheus.Registry { return adapterRegistry(t, daemonEnv(t)) }},
		}},
		{name: "bridge-web", serves: "`aep-kimi bridge-web` and `up`, on the bridge's address", builds: []metricsBuild{
			{"", func(t *testing.T) *prometheus.Registry { return bridgeRegistry(t, daemonEnv(t)) }},
		}},
		{name: "export", serves: "`aep-kimi export MODE --relay URL ... --metrics ADDR`", builds: []metricsBuild{
			{"", func(*testing.T) *prometheus.Registry {
				reg := prometheus.NewRegistry()
				export.NewMetrics(reg, "otlp")
				return reg
			}},
		}},
	}
}

// metricsReference is metrics.md: each daemon's aepkimi_ metrics.
func metricsReference(t *testing.T) string {
	var b strings.Builder
	b.WriteString(reftest.Banner + "# Metrics\n\n" +
		"Every Prometheus metric each daemon serves on `/metrics`, as its registry describes it. Each also\n" +
		"serves the Go runtime's `go_*` and `process_*` metrics, not listed here. A labelled metric shows no\n" +
		"series until its first sample unless its labels are known ahead.\n")
	for _, d := range metricsDaemons() {
		var all []reftest.Metric
		when := map[string]string{}
		for _, bld := range d.builds {
			ms, err := reftest.Metrics(bld.build(t), "aepkimi_")
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				if _, seen := when[m.Name]; !seen {
					when[m.Name] = bld.when
					all = append(all, m)
				}
			}
		}
		slices.SortFunc(all, func(a, b reftest.Metric) int { return strings.Compare(a.Name, b.Name) })
		b.WriteString("\n## " + d.name + "\n\nServed by " + d.serves + ".\n\n")
		b.WriteString(reftest.MetricsTable(all, func(m reftest.Metric) string { return when[m.Name] }))
	}
	return b.String()
}
