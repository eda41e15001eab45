// Package bridgeweb is `aep-kimi bridge-web`: it observes the sessions of
// `kimi web` (the kap-server) over its WebSocket and REST API and publishes
// them as AEP events, with opt-in approval and cancel.
//
// # Following the kap-server
//
// Servers are found through their instance registry,
// $KIMI_CODE_HOME/server/instances/*.json, read every DiscoveryPoll (1 s):
// each live record gets a follower of its own, so a `kimi web` started after
// the bridge is attached without a restart and several are followed at
// once. Records of dead pids, records whose 15 s heartbeat stopped, links
// and records naming a non-loopback host are skipped; a record caught
// mid-rewrite keeps its server. The bearer token is
// $KIMI_CODE_HOME/server.token, read fresh for every connection; a fixed URL
// and token file can be given instead (one follower, never ended). A
// follower backs off and reconnects after a loss.
//
// A server is gone when its record is removed, its process is dead
// (kill(pid, 0); with procinfo, also a zombie or another process on its pid)
// or its heartbeat stopped. Its follower stops and the sessions that were
// live on it end (session.endObserved): open attention dismissed, open runs
// drained, then session.ended normal (no run open) or killed (one was), each
// event marked kimiobserved = process. In companion mode, where the hook
// adapter owns the core lifecycle, the bridge's own stream ends with
// x.kimi-code.web.ended (same reason and mark) instead. A session a later
// server loads again is a new chapter, the hook adapter's convention: the
// next source (journal.NextChapter), session.started with trigger resume in
// primary mode. Nothing ends when the bridge itself stops.
//
// The WebSocket uses the kimi-code.bearer.<token> subprotocol. After the
// server_hello the bridge lists the sessions over REST (paginated) and
// subscribes to all of them plus the server-wide __global__ stream, answers
// every ping with a pong, and follows a session the first time any frame of
// it is broadcast (its creation, a title, a work change). Every session is
// subscribed from the bridge's cursor, the kap journal position (epoch, seq)
// it last mapped (recovered from its own log after a restart), so the
// server replays what was missed. Frames are deduped on (session, epoch,
// seq); frames that arrive past a hole while a replay is on its way wait for
// it. A hole nothing can fill (a resync_required demand, a rotated journal,
// a seq jump) is reported as an x.kimi-code.web.gap event, never papered
// over. Sessions the server has not loaded (it restarted) are re-subscribed
// every couple of seconds: a resumed session's events are only journaled by
// the server once someone subscribes. A server told to shut down closes its
// listener but keeps running while a WebSocket client stays, and removes its
// record only when it exits; the bridge probes the REST listener and lets go
// at the first refused probe.
//
// # Modes
//
// Companion (the default) emits only the channel-visible x.kimi-code.web.*
// family: the hook adapter observes the same sessions and is the core-type
// authority. Primary maps the wire to core types for stream-only
// deployments: the kap turn boundaries carry the runs (every event inside a
// turn has its run), tool.call.started and tool.result pair by call id with
// the tool name re-attached (an unpaired result degrades to channel
// visibility), every ask is an attention request closed by its answer or
// dismissal, and every attention lifecycle event has subject = the
// attention.requested event's id. Volatile frames and the internal
// permission.approval.* bus echoes never emit; no session start is invented
// (kap sessions outlive connections), but a session ends with its server.
//
// # Identity
//
// The bridge is a different emitter than the hook adapter, and the relay
// keys replay buffers, resume tokens and command routing by the bare session
// string, so (the lead's decision):
//
//   - source is aep://{host}/agent/kimi-code/web/session/{kap session id};
//   - in primary mode session is the kap session id (stream-only
//     deployments, no hook adapter);
//   - in companion mode session is {kap session id}.web, its own session, so
//     its (epoch, seq) order and its relay claim never collide with the
//     adapter's session of the same name, and every companion event carries
//     the extension attribute kimisession = the kap session id;
//   - the epoch comes from the bridge's own file-locked counter,
//     $AEP_HOME/kimi/web-epoch: max(last + 1, start time in Unix seconds).
//
// Events that come from a kap frame carry kimiseq and kimiepoch (the frame's
// journal position); run.started carries kimiturn ("{agent}/{turn}"). Logs
// are JSONL per session under $AEP_HOME/logs/kimi-code-web/, mode 0600.
//
// # Control
//
// With AEP_KIMI_WEB_CONTROL=1, in primary mode, over an authenticated relay
// binding, the bridge accepts control.attention.respond on an approval (the
// REST decision: approved, approved for the session, or rejected with the
// free text as feedback; AEP-0008 text rules), control.attention.respond on
// a question (the form's values posted to the question endpoint, or its
// dismiss option to :dismiss; docs/questions.md), and control.cancel scope run
// (the running prompt's abort); scope session is refused. Otherwise its
// hello accepts nothing. The command protocol (dedupe, one ack per command,
// redelivery) is the emitter core's; the bridge only decides. Outcomes are
// taken from the kap broadcasts, never assumed. Neither the relay token nor
// the kap token is ever logged.
package bridgeweb
