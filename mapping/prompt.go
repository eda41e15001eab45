package mapping

import (
	"strings"

	"github.com/aep-kimi/aep-kimi/aep"
)

// A tool permission request's prompt, at redacted and full, is the one
// place the request carries the tool's argument text (attention.requested
// has no other field for content at redacted): ToolPrompt writes it and
// PromptArgs reads it back, so a rule can match what a person reads.

// toolPromptLead opens a tool permission prompt; the tool's name and ": "
// follow, then the argument text.
const toolPromptLead = "Kimi wants to use "

// LineBreak stands for a line break in a one-line argument text: a shell
// operator to the redaction of a command line (aep.Redactor.Command) and to
// the rules.
const LineBreak = aep.LineBreak

// Cut ends an argument text cut short.
const Cut = "…"

// argsLimit bounds an argument text, in characters.
const argsLimit = 240

// ToolPrompt is a tool permission request's prompt: "Kimi wants to use
// TOOL: ARGS", or without ": ARGS" when there is no argument text.
func ToolPrompt(tool, args string) string {
	if args == "" {
		return toolPromptLead + tool
	}
	return toolPromptLead + tool + ": " + args
}

// PromptArgs reads the argument text out of a prompt ToolPrompt wrote for
// tool: ok false when the prompt is not one (synthesized at metadata,
// another agent's words, no argument text); cut when the text was cut
// short, so it is only the start of the arguments.
func PromptArgs(prompt, tool string) (args string, cut, ok bool) {
	args, ok = strings.CutPrefix(prompt, toolPromptLead+tool+": ")
	if !ok || args == "" {
		return "", false, false
	}
	return args, strings.HasSuffix(args, Cut), true
}

// ArgsSummary is a one-line view of a tool's input: the field a person
// would want first (a command, a path, a URL), else compact JSON, cut short
// (ending in Cut). Runs of spaces and tabs read as one space and a line
// break as LineBreak, so a second command on a new line stays visible as
// one. It returns "" for an input that is not a non-empty object.
func ArgsSummary(in any) string {
	m, ok := in.(map[string]any)
	if !ok || len(m) == 0 {
		return ""
	}
	s := ""
	for _, k := range []string{"command", "file_path", "path", "url", "pattern", "query", "description", "prompt"} {
		if v, ok := m[k].(string); ok && v != "" {
			s = v
			break
		}
	}
	if s == "" {
		if b, err := aep.Canonical(m); err == nil {
			s = string(b)
		}
	}
	var lines []string
	for _, l := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			lines = append(lines, l)
		}
	}
	s = strings.Join(lines, " "+LineBreak+" ")
	if r := []rune(s); len(r) > argsLimit {
		s = string(r[:argsLimit]) + Cut
	}
	return s
}
