// Package rules is the fleet's standing answers to permission requests:
// "always allow `go test *` in this project", "never `rm -rf *`".
//
// One rules file serves the fleet. It lives with the relay (FileName under
// the relay's home, 0600, replaced atomically, never read or written
// through a symbolic link), so every adapter and bridge publishing to that
// relay is covered, and the relay answers through the path every answer
// takes: a control.attention.respond routed to the session's claimant and
// stored on the stream, sent by "rule:<id>" (AgentPrefix), which the
// emitter records as the answer's by.
//
// A rule has an id, an effect and conditions: the tool's name (required,
// "*" for any), and optionally the agent, the project (the session's
// working directory and everything under it) and the tool's argument text.
// Deny beats ask beats allow; among equals the first in the file decides.
// Ask keeps a person in the loop even when an allow rule matches.
//
// Rules match what the stream carries, nothing more. The argument text is
// the one a person reads in the request's prompt (mapping.ToolPrompt),
// present only at capture redacted or full; the project is the session's
// cwd from its session.started, present only at redacted or full too. A
// rule needing a fact the request does not carry never matches
// (Unknowable), and a deny or ask rule in that state keeps every allow rule
// from answering, so a blind spot sends the request to a person rather than
// letting a broad allow through. More guards keep an allow narrow: its
// wildcards never span a shell operator (Pattern.Safe: `echo *` does not
// allow `echo ok; rm -rf /`), and it never reads an argument text the
// emitter cut short or redacted (Redacted): that is not the command that
// runs. The emitter redacts a command line so that no marker takes an
// operator (aep.Redactor.Command), so a deny rule still sees what follows
// one; a deny or ask rule that misses a cut text is unknowable.
//
// Book keeps the file: a change on disk is taken once it holds still, a
// file that stops parsing leaves the last good rules in force and says why
// (Status, the log), and Add and Remove start from what is on disk and
// refuse to overwrite a file they cannot parse. API serves it over HTTP
// behind the relay's token.
package rules
