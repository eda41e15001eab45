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
// # Rooms
//
// The files, by the path an event or a command takes:
//
//	server.go     NewServer, the routes, the drain
//	ingest.go     every ingest, POST and socket alike, to Server.admit
//	ingestq.go    a socket's bounded queue from its reader to its ingester
//	message.go    Message: an event as the relay moves it
//	backend.go    the storage seam: Backend, Subscriber, the batch and wake
//	              types, and what a store may add
//	memory.go     MemoryBackend: histories, caps, fan-out, replay
//	memsnap.go    the memory index's snapshot, in its own terms
//	queue.go      a consumer's bounded queue and subscription
//	ws.go         /socket: hello, frames, subscribe, the writer
//	sse.go        /stream
//	route.go      a command's route to its claimant, and the claims
//	respond.go    answers from outside the sockets (links, phones)
//	rules.go      the fleet's rules at admission and their API
//	roles.go      who may do what
//	discovery.go  the discovery document and /healthz
//	metrics.go    /metrics; assess.go: the assessments counted there
//	config.go     Config and the defaults; env.go: flags and environment
//	jetstream.go  JetStreamBackend, with js*.go, jetstream_strays.go,
//	              natsauth.go and natslog.go: its index, routes (jsroute.go),
//	              snapshot file (jssnap.go), health, sync and start-up
//
// # Storage and fan-out
//
// The bindings talk to a Backend (see its doc comment for the contract:
// positions are (epoch, seq), admission dedupes on (source, id), replay and
// live delivery hand over without gap or overlap). MemoryBackend keeps
// everything in the process; JetStreamBackend keeps every admitted event in
// a NATS JetStream stream (embedded, or an external NATS shared by several
// relays) with a MemoryBackend as its index, rebuilt from the stream on
// start. The JetStream store uses its index only through the Backend
// methods and the index contract in memory.go.
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
