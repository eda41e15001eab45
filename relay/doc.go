// Package relay is aep-kimi's AEP 0.1 collector/relay (AEP-0003, AEP-0004).
// Its clients live in relay/client; the frames, codes and positions both
// sides speak live in relay/wire.
//
// # Server
//
// NewServer(Config) builds a relay; Run (or Serve on a listener) serves it
// until its context ends, then drains. Endpoints:
//
//	POST /events          ingest: one event (application/json) or an NDJSON batch
//	GET  /events          the discovery document (also /.well-known/aep)
//	GET  /stream          SSE: filter, capture, from (positions or "all"), Last-Event-ID, live=0
//	GET  /socket          WebSocket: hello, subscribe/unsubscribe, roster, ping, events, commands
//	GET  /healthz         {"ok":true}, or 503 {"ok":false} while the store cannot make events
//	                      durable; counts and the reason only for an authorized request
//	GET  /metrics         Prometheus, from a private registry
//	     /rules           the fleet's rules (rules.API), with Config.Rules
//
// Every event is parsed and validated once at ingest and then forwarded as
// the bytes it arrived as, except where a subscription's capture ceiling
// down-levels it (or a multi-line single POST is compacted onto one line,
// because every binding frames one event per line).
//
// # Storage and fan-out
//
// The bindings talk to a Backend (see its doc comment for the contract:
// positions are (epoch, seq), admission dedupes on (source, id), replay and
// live delivery hand over without gap or overlap). MemoryBackend keeps
// everything in the process; JetStreamBackend keeps every admitted event in
// a NATS JetStream stream (embedded, or an external NATS shared by several
// relays) with a MemoryBackend as its index, rebuilt from the stream on
// start.
//
// # Commands
//
// A socket claims a session by sending a positioned event for it; a
// command arriving on any socket routes to the one live claimant, byte for
// byte, and is then held in the session's history (after the latest
// positioned event, never a resume position) and fanned out to watchers.
// Refusals (unauthorized, unsupported, ambiguous, no-route) answer the
// sender with a cause-linked error frame and touch no history. Without a
// token the relay is watch-only and refuses every command. On a store
// shared by several relays (a RemoteRouter) a command for a session no
// socket here claims is routed through the relay whose socket does.
//
// # Rules
//
// With Config.Rules the relay answers the permission requests its rules
// decide: when it admits an attention.requested offered for control, a
// deciding rule's control.attention.respond (agent rule:<id>) is routed to
// the claimant like any command and admitted right behind the request, in
// the same batch (see rules.go).
//
// # Backpressure
//
// Each consumer has a bounded queue fed without blocking: debug/info are
// shed first (counted), and a consumer that cannot take a notice-or-above
// event is disconnected with its positions (WebSocket closing frame, SSE
// stream end) so it can resume exactly. Ingest never waits for a consumer.
package relay
