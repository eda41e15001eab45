package aep

import (
	"bufio"
	"fmt"
	"io"
)

// MaxJSONLLine bounds one line (one event) of a JSONL stream: the relay's
// default body cap.
const MaxJSONLLine = 16 << 20

// LineViolation is a violation at a line of a JSONL stream (1-based).
type LineViolation struct {
	Line int
	Violation
}

// ValidateJSONL checks a JSONL stream: each line's envelope and payload,
// and the stream rules across the lines (AEP-0003 §3.1: one event per
// line, no blank lines). It returns the number of events and the
// violations; err is for a stream that cannot be read on, naming the line.
func ValidateJSONL(r io.Reader) (int, []LineViolation, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxJSONLLine)
	var sv StreamValidator
	var out []LineViolation
	n, line := 0, 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 {
			out = append(out, LineViolation{line, Violation{Rule: "AEP-0003 §3.1", Msg: "blank line (JSONL carries one event per line, no blank lines)"}})
			continue
		}
		n++
		e, err := ParseEvent(b)
		if err != nil {
			out = append(out, LineViolation{line, Violation{Rule: "AEP-0001 §5", Msg: err.Error()}})
			continue
		}
		vs := ValidateEnvelope(e)
		vs = append(vs, ValidatePayload(e)...)
		vs = append(vs, sv.Add(e)...)
		for _, v := range vs {
			out = append(out, LineViolation{line, v})
		}
	}
	if err := sc.Err(); err != nil {
		return n, out, fmt.Errorf("line %d: %w", line+1, err)
	}
	return n, out, nil
}
