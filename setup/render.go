package setup

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/aep-kimi/aep-kimi/mapping"
)

// Fence lines. The begin line may claim the line breaks just above it
// ("(+1 line break above)"): Merge adds them so the block starts after a blank
// line, and Strip removes them so write->remove gives back the original bytes.
const (
	fenceBeginText = "# >>> aep-setup kimi-code >>>"
	fenceEndText   = "# <<< aep-setup kimi-code <<<"
)

var (
	fenceBeginRE = regexp.MustCompile(`^[ \t]*# >>> aep-setup kimi-code(?: \(\+([12]) line breaks? above\))? >>>[ \t]*$`)
	fenceEndRE   = regexp.MustCompile(`^[ \t]*# <<< aep-setup kimi-code <<<[ \t]*$`)
)

// maxLead is the most line breaks a begin fence claims: one to end an
// unterminated last line plus one blank separator line.
const maxLead = 2

func fenceBeginLine(lead int) string {
	switch lead {
	case 0:
		return fenceBeginText
	case 1:
		return "# >>> aep-setup kimi-code (+1 line break above) >>>"
	default:
		return "# >>> aep-setup kimi-code (+" + strconv.Itoa(lead) + " line breaks above) >>>"
	}
}

// parseFenceBegin reports whether a comment is a begin fence and how many
// line breaks above it belong to the block.
func parseFenceBegin(comment string) (lead int, ok bool) {
	m := fenceBeginRE.FindStringSubmatch(comment)
	if m == nil {
		return 0, false
	}
	if m[1] != "" {
		lead = int(m[1][0] - '0')
	}
	return lead, true
}

func isFenceEnd(comment string) bool { return fenceEndRE.MatchString(comment) }

// HookCommand is the shell command registered for a hook whose Kimi timeout
// is timeoutSec: kimi-hook with the daemon URL, AEP home and its hard ceiling
// in argv, each word POSIX-quoted when needed.
func (c Config) HookCommand(timeoutSec int) string {
	c, _ = c.withDefaults() // a refused field is reported by Render
	return strings.Join([]string{
		shellQuote(c.HookCmd),
		"--daemon", shellQuote(c.DaemonURL),
		"--home", shellQuote(c.AEPHome),
		"--timeout", strconv.Itoa(timeoutSec),
	}, " ")
}

// Render returns the fenced block for cfg in canonical form: LF line breaks
// and no claimed line breaks above. Merge adapts both to the target file.
// It holds one [[hooks]] table per event with exactly event, command and
// timeout: any other key (the online docs' fail_mode) voids every hook on 2.1.0.
func Render(cfg Config) ([]byte, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := cfg.validateRender(); err != nil {
		return nil, err
	}
	events := cfg.Events()
	var b bytes.Buffer
	b.WriteString(fenceBeginLine(0) + "\n")
	b.WriteString("# Managed by `aep-setup write kimi-code`: edits inside this block are overwritten.\n")
	b.WriteString("# `aep-setup remove kimi-code` deletes it, with any line breaks its first line claims above it.\n")
	fmt.Fprintf(&b, "# %s\n", describeBlock(cfg, len(events)))
	for i, ev := range events {
		if i > 0 {
			b.WriteString("\n")
		}
		t := cfg.HookTimeout(ev)
		b.WriteString("[[hooks]]\n")
		b.WriteString("event = " + tomlString(ev) + "\n")
		b.WriteString("command = " + tomlString(cfg.HookCommand(t)) + "\n")
		b.WriteString("timeout = " + strconv.Itoa(t) + "\n")
	}
	b.WriteString(fenceEndText + "\n")
	return b.Bytes(), nil
}

// describeBlock is the block's summary comment. It names the event set, not
// the Kimi version, so a Kimi upgrade that keeps the set rewrites nothing.
func describeBlock(cfg Config, n int) string {
	set := fmt.Sprintf("%d hook events (the set every Kimi release accepts)", n)
	if n == ExtendedEventCount {
		set = fmt.Sprintf("%d hook events (Kimi >= %s)", n, ExtendedEventsSince)
	}
	if cfg.Control {
		return fmt.Sprintf("%s; PreToolUse timeout %d s holds the AEP permission gate.", set, cfg.HookTimeout(mapping.HookPreToolUse))
	}
	return set + "; control off."
}

// tomlString encodes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
