package mapping

import "github.com/aep-kimi/aep-kimi/aep"

// The events below say how a session's life looks from outside Kimi: an end
// the emitter observed (the process exited, or the session fell silent past
// the idle limit), a later chapter of an ended session, the presence of a
// session's emitter and the health of the hook channel. The adapter decides
// when; these decide what.

// Session end reasons (AEP-0002 session.ended) an emitter decides itself.
const (
	// EndNormal: the process exited with no run open.
	EndNormal = "normal"
	// EndKilled: the process exited in the middle of a run.
	EndKilled = "killed"
	// EndTimeout: no process to watch, and silence past the idle limit.
	EndTimeout = "timeout"
)

// ExtObserved is the extension attribute (AEP-0001 §5.4) marking an end an
// emitter observed instead of Kimi reporting it, with how: ObservedProcess
// (the Kimi process, or the kimi web server, exited) or ObservedSilence (the
// idle limit passed without a hook).
const ExtObserved = "kimiobserved"

// ExtChannel is the extension attribute carrying the adapter's hook channel
// state on agent.health, at every capture level (the event's detail is
// capture-gated).
const ExtChannel = "kimichannel"

// ExtKimiSession is the extension attribute naming the Kimi session an
// event's session is another view of: the kimi web bridge's companion
// session {id}.web carries the kap session id, so a consumer shows the two
// as one Kimi session.
const ExtKimiSession = "kimisession"

// How an end was observed (ExtObserved values).
const (
	ObservedProcess = "process"
	ObservedSilence = "silence"
)

// TriggerResume is the session.started trigger of a later chapter: Kimi's
// own word for a resumed session (SessionStart source "resume"), and what an
// emitter says when hooks arrive again after an end it observed.
const TriggerResume = "resume"

// SessionEnded ends a session Kimi never reported ending, with the reason
// the emitter observed. A kill is a warning: work was cut off.
func SessionEnded(reason string, p Posture) Event {
	sev := aep.SeverityNotice
	if reason == EndKilled {
		sev = aep.SeverityWarning
	}
	e := newEvent(p, "session.ended", sev)
	e.Data["reason"] = reason
	return e
}

// SessionResumed starts a later chapter of a session that ended, when hooks
// arrive again without a SessionStart of their own.
func SessionResumed(p Posture) Event {
	e := newEvent(p, "session.started", aep.SeverityNotice)
	e.Data["trigger"] = TriggerResume
	return e
}

// StatusSessionEnded is the outcome token of a subagent or background task
// that was still running when its session ended: it did not finish, and
// nobody said it failed.
const StatusSessionEnded = "session_ended"

// SubagentDrained stops a subagent still running when its session ended.
func SubagentDrained(agentName string, p Posture) Event {
	e := newEvent(p, "delegation.subagent.stopped", aep.SeverityInfo)
	e.Subject = agentName
	e.Data["status"] = StatusSessionEnded
	return e
}

// TypeTaskEnded closes a background task whose completion never arrived.
const TypeTaskEnded = "x." + Vendor + ".progress.task_ended"

// TaskDrained ends a background task still running when its session ended
// (Kimi's tasks are its own child processes: they go with it).
func TaskDrained(taskID string, p Posture) Event {
	e := newEvent(p, TypeTaskEnded, aep.SeverityInfo)
	e.Subject = taskID
	if taskID != "" {
		e.Data["task_id"] = taskID
	}
	e.Data["status"] = StatusSessionEnded
	return e
}

// Presence states (AEP-0002 agent.presence).
const (
	PresenceOnline  = "online"
	PresenceOffline = "offline"
)

// Presence says a session's emitter came back (online) or went quiet past
// the heartbeat window (offline). agent.* events carry no session: the
// emitter's source names it.
func Presence(state string, p Posture) Event {
	sev := aep.SeverityInfo
	if state == PresenceOffline {
		sev = aep.SeverityNotice
	}
	e := newEvent(p, "agent.presence", sev)
	e.Data["state"] = state
	return e
}

// Health statuses (AEP-0002 agent.health).
const (
	HealthOK       = "ok"
	HealthDegraded = "degraded"
	HealthFailing  = "failing"
)

// ChannelHealth reports the hook channel's state as agent.health: active
// (hooks arrive) and stopped (every session ended) are ok, error is failing,
// and anything else (stale, unavailable, a state this table does not know)
// is degraded. The state rides in detail (redacted and above: detail is free
// text in the schema); the emitter also carries it in an extension
// attribute, which every capture level keeps.
func ChannelHealth(state string, p Posture) Event {
	status, sev := HealthDegraded, aep.SeverityWarning
	switch state {
	case "active", "stopped":
		status, sev = HealthOK, aep.SeverityInfo
	case "error":
		status, sev = HealthFailing, aep.SeverityError
	}
	e := newEvent(p, "agent.health", sev)
	e.Data["status"] = status
	if e.Capture >= aep.CaptureRedacted {
		e.Data["detail"] = "hook channel " + state
	}
	return e
}
