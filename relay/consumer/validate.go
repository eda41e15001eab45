package consumer

import (
	"fmt"
	"io"
	"os"

	"github.com/aep-kimi/aep-kimi/aep"
)

// WriteValidation checks each JSONL stream ("-": stdin): every line's
// envelope and payload, and the stream rules across a file's lines. It
// writes one line per violation (none when quiet) and a summary; ok is
// false on any violation or unreadable file.
func WriteValidation(w io.Writer, files []string, stdin io.Reader, quiet bool) (ok bool) {
	var total, bad, unreadable int
	for _, name := range files {
		n, vs, err := validateFile(name, stdin)
		total += n
		if err != nil {
			fmt.Fprintf(w, "%s: %s\n", Line(name), Line(err.Error()))
			unreadable++
			continue
		}
		bad += len(vs)
		if !quiet {
			for _, v := range vs {
				fmt.Fprintf(w, "%s:%d: %s\n", Line(name), v.Line, Line(v.Error()))
			}
		}
	}
	fmt.Fprintf(w, "%d event(s) in %d file(s): %d violation(s)", total, len(files), bad)
	if unreadable > 0 {
		fmt.Fprintf(w, ", %d file(s) unreadable", unreadable)
	}
	fmt.Fprintln(w)
	return bad == 0 && unreadable == 0
}

// validateFile reads one JSONL stream ("-": stdin) and returns its event
// count and violations; err is for a file that cannot be read at all.
func validateFile(name string, stdin io.Reader) (int, []aep.LineViolation, error) {
	if name == "-" {
		return aep.ValidateJSONL(stdin)
	}
	f, err := os.Open(name)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	return aep.ValidateJSONL(f)
}
