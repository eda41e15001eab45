// Package client holds the relay's clients: Publisher sends an emitter's
// events to a relay over its socket (HTTP POST fallback), keeps an outbox
// while disconnected, re-claims live sessions on reconnect and hands routed
// commands to the handler Run is given; SendCommand delivers one command
// and waits for its settlement; Tailer follows a relay's SSE stream with exact resume from a TailState;
// SSEReader parses event streams. They speak the frames of relay/wire and
// reconnect with internal/backoff; none of them depends on the server.
package client
