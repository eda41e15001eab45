package aep

import "strings"

// Option is one closed-choice answer an attention request offers
// (attention.requested data.options[]).
type Option struct {
	ID    string
	Label string
}

// OptionsData renders options for attention.requested data at a capture
// level: real labels at redacted and above, and at metadata the option id as
// its label, the structural placeholder the [metadata*] rule asks for.
func OptionsData(options []Option, level Capture) []any {
	out := make([]any, len(options))
	for i, o := range options {
		label := o.ID
		if level >= CaptureRedacted {
			label = o.Label
		}
		out[i] = map[string]any{"id": o.ID, "label": label}
	}
	return out
}

// MatchOption applies AEP-0008 to a text-only answer: text that, trimmed,
// case-insensitively equals an option's id, or exactly one option's label,
// is that option. Anything else matches nothing; for a permission request the
// caller must then never apply the permissive choice.
func MatchOption(options []Option, text string) (string, bool) {
	t := strings.ToLower(strings.TrimSpace(text))
	if t == "" {
		return "", false
	}
	for _, o := range options {
		if t == strings.ToLower(o.ID) {
			return o.ID, true
		}
	}
	found := ""
	for _, o := range options {
		if t == strings.ToLower(o.Label) {
			if found != "" {
				return "", false // two labels match: ambiguous, so nothing
			}
			found = o.ID
		}
	}
	return found, found != ""
}
