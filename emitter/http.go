package emitter

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aep-kimi/aep-kimi/internal/httpguard"
)

// Route is one of a source's own HTTP endpoints.
type Route struct {
	Method, Path string
	Handler      http.HandlerFunc
}

// Handler serves a source's HTTP endpoints behind the Host allow-list
// (httpguard.Hosts: a defence against DNS rebinding): its own routes,
// GET /healthz with health's JSON (503 when it reports itself not Healthy),
// and /metrics from its registry. Anything
// else is a JSON 404 or 405 naming what is served.
func (c *Core[S]) Handler(allowedHosts []string, health func() any, routes ...Route) http.Handler {
	r := chi.NewRouter()
	r.Use(httpguard.Hosts(allowedHosts))
	var served []string
	for _, rt := range routes {
		r.Method(rt.Method, rt.Path, rt.Handler)
		served = append(served, rt.Method+" "+rt.Path)
	}
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		h, status := health(), http.StatusOK
		if hv, ok := h.(interface{ Healthy() bool }); ok && !hv.Healthy() {
			status = http.StatusServiceUnavailable
		}
		httpguard.WriteJSON(w, status, h)
	})
	r.Handle("/metrics", promhttp.HandlerFor(c.metrics.reg, promhttp.HandlerOpts{}))
	list := strings.Join(append(served, "GET /healthz", "GET /metrics"), ", ")
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		httpguard.WriteError(w, http.StatusNotFound, "not-found", "endpoints: "+list)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		httpguard.WriteError(w, http.StatusMethodNotAllowed, "method-not-allowed", list)
	})
	return r
}
