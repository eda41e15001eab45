package stacktest

// The exit codes aep-kimi's command senders (respond, cancel, instruct,
// rate, pending) promise in their usage: a test of the built binary holds
// it to them.
const (
	ExitRejected       = 3
	ExitUnknownSession = 5
	ExitUnknownRequest = 6
	ExitNotPending     = 7
	ExitSeveralPending = 8
)
