// Package envtable is the table of the environment variables the three
// binaries read: each one's name, what it sets and which binaries besides
// aep-kimi read it. It is data and imports nothing, so a binary's tests
// can check themselves against it without linking the daemons; the
// defaults that are constants of the daemons' code are filled in by
// station.Environment, which docs/reference/environment.md renders.
package envtable

// Var is an environment variable the binaries read.
type Var struct {
	Name string
	// Default is what an unset variable means; empty when the variable is
	// a flag's default, which the flag shows, or when it is a constant of
	// the code, which station.Environment fills in.
	Default string
	// Sets is what the variable sets, when no flag's usage says it.
	Sets string
	// Also names the binaries besides aep-kimi that read it (aep-setup,
	// kimi-hook); their reference tests check the list both ways.
	Also []string
}

// Table is every environment variable the three binaries read, in the
// order docs/reference/environment.md lists them. cmd/aep-kimi's
// reference tests check it against the code both ways: every AEP_ or
// KIMI_ name the code reads is here, every name here is read, and every
// command's environment and flags name only these.
func Table() []Var {
	setup, hook := "aep-setup", "kimi-hook"
	return []Var{
		{Name: "AEP_HOME", Default: "~/.aep", Sets: "the AEP home: tokens, session logs, spool, store, rules (see files.md)", Also: []string{setup, hook}},
		{Name: "AEP_TOKEN", Sets: "the relay token: the relay requires it of every client, and clients send it (prefer AEP_TOKEN_FILE: the environment of a process is readable by its user's other processes)"},
		{Name: "AEP_TOKEN_FILE", Sets: "a file holding the relay token, read when AEP_TOKEN is not set"},
		{Name: "AEP_RELAY", Sets: "the relay's base URL for the sources and the terminal tools"},
		{Name: "AEP_RELAY_CA", Sets: "PEM certificates trusted for an https relay besides the system's"},
		{Name: "AEP_PORT", Sets: "the relay's port on loopback (or on every interface with AEP_PUBLIC)"},
		{Name: "AEP_PUBLIC"},
		{Name: "AEP_ALLOWED_HOSTS"},
		{Name: "AEP_BUFFER", Sets: "events each session's replay buffer holds"},
		{Name: "AEP_BUFFER_BYTES", Sets: "wire bytes held across all sessions; past it the oldest events are trimmed"},
		{Name: "AEP_MAX_SESSIONS", Sets: "sessions the relay holds; the least recently written is evicted past it"},
		{Name: "AEP_MAX_BODY", Sets: "bytes of one POST body or WebSocket message"},
		{Name: "AEP_MAX_BATCH", Sets: "events in one NDJSON POST"},
		{Name: "AEP_MAX_FROM", Default: "AEP_MAX_SESSIONS", Sets: "sessions one resume request may name"},
		{Name: "AEP_MAX_CONNECTIONS", Sets: "streams and sockets served at once, emitters' included; more get 503"},
		{Name: "AEP_LOGIN_TTL", Sets: "how long a fleet page login lasts"},
		{Name: "AEP_STORE"},
		{Name: "AEP_STORE_SYNC"},
		{Name: "AEP_NATS_URL"},
		{Name: "AEP_NATS_CREDS"},
		{Name: "AEP_NATS_CA"},
		{Name: "AEP_NATS_STREAM"},
		{Name: "AEP_TLS_CERT"},
		{Name: "AEP_TLS_KEY"},
		{Name: "AEP_ACME_DOMAIN"},
		{Name: "AEP_ACME_EMAIL"},
		{Name: "AEP_ACME_CA"},
		{Name: "AEP_BEHIND_PROXY"},
		{Name: "AEP_PUBLIC_URL"},
		{Name: "AEP_NOTIFY_USAGE"},
		{Name: "AEP_NOTIFY_PUSH_ALLOW", Sets: "a test and lab knob: addresses or prefixes (comma-separated) where a Web Push service may be besides public addresses, over plain http too"},
		{Name: "AEP_KIMI_ADDR", Sets: "the adapter's hook intake address; aep-setup points the hooks at it", Also: []string{setup}},
		{Name: "AEP_LOG_SYNC", Sets: "when session logs and spool records left behind reach the disk", Also: []string{hook}},
		{Name: "AEP_CAPTURE", Sets: "the sources' capture level: none, metadata, redacted or full"},
		{Name: "AEP_CAPTURE_ATTENTION", Sets: "the capture level of attention.* events (none under AEP_CAPTURE=none)"},
		{Name: "AEP_REDACT_NAMES", Sets: "environment variable names, comma-separated, whose values are redacted as secrets"},
		{Name: "AEP_REDACT_PII", Default: "1", Sets: "redact e-mail addresses and the like (0 to keep them)"},
		{Name: "AEP_KIMI_CONTROL", Also: []string{setup}},
		{Name: "AEP_KIMI_ON_TIMEOUT"},
		{Name: "AEP_KIMI_GATE_TOOLS", Default: "every tool", Sets: "the tools the gate holds, comma-separated"},
		{Name: "AEP_ATTENTION_TIMEOUT_MS", Sets: "how long the gate holds a tool call for an answer, in milliseconds; aep-setup sizes the PreToolUse timeout from it", Also: []string{setup}},
		{Name: "AEP_INSTRUCT", Default: "off", Sets: "let instruct commands add to a session's next prompt"},
		{Name: "AEP_KIMI_STALE_AFTER"},
		{Name: "AEP_KIMI_IDLE_END"},
		{Name: "AEP_KIMI_MAX_OPEN_LOGS", Sets: "adapter: session log files kept open; the rest reopen on their next event"},
		{Name: "AEP_KIMI_MAX_SESSIONS", Sets: "adapter: sessions kept in memory; the longest idle are evicted (their state comes back from the log)"},
		{Name: "AEP_KIMI_MAX_WATCHES", Sets: "adapter: Kimi processes watched for their exit at once"},
		{Name: "KIMI_CODE_HOME", Default: "~/.kimi-code", Sets: "Kimi's home: its config.toml (aep-setup, the gate's registered timeout) and kimi web's instance records (the bridge)", Also: []string{setup}},
		{Name: "AEP_KIMI_WEB_ADDR"},
		{Name: "AEP_KIMI_WEB_MODE"},
		{Name: "AEP_KIMI_WEB_CONTROL", Default: "off", Sets: "bridge-web in primary mode takes control commands (cancel, answers) for kimi web sessions"},
		{Name: "AEP_KIMI_WEB_MAX_OPEN_LOGS", Sets: "bridge-web: session log files kept open"},
		{Name: "AEP_KIMI_WEB_ALLOW_REMOTE_KAP"},
		{Name: "AEP_KIMI_KAP_URL"},
		{Name: "AEP_KIMI_KAP_TOKEN_FILE"},
		{Name: "GOMEMLIMIT", Sets: "the Go runtime's soft memory limit; the relay sets it from its byte budget unless this is set"},
		{Name: "NO_COLOR", Sets: "set (any value): no colour, even on a terminal"},
		{Name: "COLUMNS", Default: "the terminal's width", Sets: "the width tail's lines are cut to"},
		{Name: "PATH", Sets: "where aep-setup looks for kimi and kimi-hook", Also: []string{setup}},
	}
}
