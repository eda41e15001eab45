package emitter

import (
	"encoding/json"
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
// GET /healthz with health's JSON, and /metrics from its registry. Anything
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
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(health()) //nolint:errcheck // client gone
	})
	r.Handle("/metrics", promhttp.HandlerFor(c.metrics.reg, promhttp.HandlerOpts{}))
	list := strings.Join(append(served, "GET /healthz", "GET /metrics"), ", ")
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		WriteError(w, http.StatusNotFound, "not-found", "endpoints: "+list)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		WriteError(w, http.StatusMethodNotAllowed, "method-not-allowed", list)
	})
	return r
}

// ErrorBody is the JSON body of a refused request.
type ErrorBody struct {
	Error  string `json:"error"`
	Detail string `json:"detail,omitempty"`
}

// WriteError refuses a request with status and {"error": code, "detail":
// detail}.
func WriteError(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(ErrorBody{Error: code, Detail: detail}) //nolint:errcheck // client gone
}
