package relay

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// relayAgent is the identity.agent of the relay's hello.
const relayAgent = "aep-kimi-relay"

// buildCapabilities is the relay's declaration, shared by the discovery
// document (AEP-0003 §3.4) and its socket hello (§4): what it actually
// implements. Control is present only when routing is on (a token is
// configured): the relay itself accepts no commands, it routes them.
func buildCapabilities(cfg Config) wire.Capabilities {
	c := wire.Capabilities{
		Filters:      []string{"attr-match"},
		Replay:       &wire.Replay{Buffer: cfg.Buffer, All: true},
		Capture:      []string{"none", "metadata", "redacted", "full"},
		Roster:       &struct{}{},
		Experimental: json.RawMessage(`{}`),
	}
	if cfg.Token != "" {
		c.Control = &wire.Control{Accepts: []string{}}
	}
	return c
}

// buildDiscovery renders the discovery document, the one a watcher gets
// (no control) and the socket hello once.
func buildDiscovery(cfg Config) (discovery, watch, hello []byte, err error) {
	caps := buildCapabilities(cfg)
	doc := func(caps wire.Capabilities) ([]byte, error) {
		return json.Marshal(map[string]any{
			"aep":          []string{aep.Version},
			"role":         "collector",
			"endpoints":    map[string]string{"events": "/events", "stream": "/stream", "socket": "/socket"},
			"capabilities": caps,
		})
	}
	if discovery, err = doc(caps); err != nil {
		return nil, nil, nil, err
	}
	watchCaps := caps
	watchCaps.Control = nil
	if watch, err = doc(watchCaps); err != nil {
		return nil, nil, nil, err
	}
	return discovery, watch, wire.Encode(wire.NewHello(wire.RoleBoth, wire.Identity{Agent: relayAgent, Instance: cfg.Instance}, caps)), nil
}

// serveDiscovery answers the discovery document; to a caller who may not
// answer (a watcher) it declares no control, so a client offers that
// reader no answer commands.
func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	if who, ok := PrincipalOf(r); ok && !who.Can(access.RoleAnswer) {
		_, _ = w.Write(s.discoveryWatch)
		return
	}
	_, _ = w.Write(s.discovery)
}

// serveHealth answers {"ok":true} to anyone (probes carry no tokens) and adds
// the topology counts only for an authorized request. A store that cannot
// make events durable makes it 503 {"ok":false}; the reason is for an
// authorized request.
func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	if s.draining() {
		httpguard.WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"ok": false, "draining": true})
		return
	}
	store := storeStatus{OK: true}
	if sr, ok := s.backend.(storeReporter); ok {
		store = sr.storeStatus()
	}
	status := http.StatusOK
	if !store.OK {
		status = http.StatusServiceUnavailable
	}
	if !s.authorized(r) {
		h := map[string]any{"ok": store.OK}
		if !store.OK {
			h["error"] = errStoreUnavailable.Error()
		}
		httpguard.WriteJSON(w, status, h)
		return
	}
	st := s.backend.Stats()
	h := map[string]any{
		"ok":           store.OK,
		"store":        store,
		"sessions":     st.Sessions,
		"events":       st.Events,
		"bytes":        st.Bytes,
		"buffer_bytes": s.cfg.BufferBytes,
		"subscribers":  st.Subscribers,
		"connections":  s.nSSE.Load() + s.nWS.Load(),
		"uptime_s":     int64(time.Since(s.started).Seconds()),
	}
	if r := s.rulesHealth(); r != nil {
		h["rules"] = r
	}
	httpguard.WriteJSON(w, status, h)
}
