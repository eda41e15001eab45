// Package docs holds the prose beyond the README; its test keeps the links
// between the pages, and the README's length, honest.
package docs

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// readmeMaxLines is the README's budget: what it is, the first ten
// minutes, a picture and links; the rest lives in docs/.
const readmeMaxLines = 300

// root is the repository root, seen from this package's directory.
const root = ".."

// pages are the Markdown files whose links are checked, relative to root:
// the README, DEVELOPERS.md, BENCHMARKS.md and everything under docs/.
func pages(t *testing.T) []string {
	t.Helper()
	out := []string{"README.md", "DEVELOPERS.md", "BENCHMARKS.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	fence   = regexp.MustCompile("^ *(```|~~~)")
	heading = regexp.MustCompile(`^#{1,6} +(.*?) *#*$`)
	// A link or an image: [text](target) or ![alt](target), the target up
	// to its first space (a title may follow) or closing parenthesis.
	link = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)[^)]*\)`)
	code = regexp.MustCompile("`[^`]*`")
)

// prose returns text with its fenced code blocks and inline code blanked,
// line for line, so a link's line number stays its own.
func prose(text string) []string {
	lines := strings.Split(text, "\n")
	in := false
	for i, line := range lines {
		switch {
		case fence.MatchString(line):
			in = !in
			lines[i] = ""
		case in:
			lines[i] = ""
		default:
			lines[i] = code.ReplaceAllString(line, "``")
		}
	}
	return lines
}

// anchors are the fragments GitHub gives text's headings: lower case,
// punctuation dropped but hyphens and underscores, spaces as hyphens, a
// repeated one numbered -1, -2 ...
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	in := false
	for _, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			in = !in
			continue
		}
		m := heading.FindStringSubmatch(line)
		if in || m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// TestLinksResolve follows every relative link in the pages: the file it
// names exists, and a #fragment on a Markdown page names one of its
// headings.
func TestLinksResolve(t *testing.T) {
	texts := map[string]string{}
	read := func(p string) (string, bool) {
		if s, ok := texts[p]; ok {
			return s, true
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			return "", false
		}
		texts[p] = string(b)
		return texts[p], true
	}
	checked := 0
	for _, page := range pages(t) {
		text, ok := read(page)
		if !ok {
			t.Errorf("%s: cannot read it", page)
			continue
		}
		body := strings.Join(prose(text), "\n")
		for _, loc := range link.FindAllStringSubmatchIndex(body, -1) {
			n := strings.Count(body[:loc[0]], "\n") + 1
			target := body[loc[2]:loc[3]]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = path.Clean(path.Join(path.Dir(page), file))
			}
			checked++
			if strings.HasPrefix(dest, "../") {
				t.Errorf("%s:%d: %s leaves the repository", page, n, target)
				continue
			}
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
				t.Errorf("%s:%d: %s: no such file %s", page, n, target, dest)
				continue
			}
			if frag == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			destText, _ := read(dest)
			if !anchors(destText)[frag] {
				t.Errorf("%s:%d: %s: %s has no heading #%s", page, n, target, dest, frag)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no links found: the pattern is broken")
	}
}

// TestAnchors pins the slug rules the link check relies on.
func TestAnchors(t *testing.T) {
	got := anchors("# Control: answering and steering (opt-in)\n## People and roles: `aep-kimi token`\n" +
		"```sh\n# not a heading\n```\n## Against Centrifugo (2026-12-01)\n## TLS\n### TLS\n")
	for _, want := range []string{"control-answering-and-steering-opt-in", "people-and-roles-aep-kimi-token",
		"against-centrifugo-2026-12-01", "tls", "tls-1"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("a comment in a code block made an anchor: %v", got)
	}
}

// TestREADMEShort keeps the README within its budget.
func TestREADMEShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, at most %d: move the rest to docs/ and link it", n, readmeMaxLines)
	}
}
