package export

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/aep-kimi/aep-kimi/aep"
)

// Mode is a conversion: one of the AEP-0005 bridges.
type Mode int

// Conversions.
const (
	// ModeCE maps AEP events to CloudEvents (§1).
	ModeCE Mode = iota
	// ModeCEInverse maps CloudEvents back to AEP events (§2).
	ModeCEInverse
	// ModeOTLP maps AEP events to OTLP/JSON log requests (§3).
	ModeOTLP
	// ModeOCSF projects AEP events onto OCSF records (§4).
	ModeOCSF
)

// MaxLine bounds one input line (one event).
const MaxLine = 16 << 20

// Converter turns one record per line into one record per line. The zero
// value converts to CloudEvents; MaxCapture's zero value is capture none, so
// callers set it (DefaultMaxCapture is the AEP-0005 default).
type Converter struct {
	Mode       Mode
	MaxCapture aep.Capture
	// ServiceName overrides the OTLP service.name (default: the agent).
	ServiceName string
}

// Counts reports one conversion run.
type Counts struct {
	// In counts input lines, Out records written, Skipped inputs outside the
	// mode's scope (non-OCSF families, foreign CloudEvents), Bad inputs that
	// could not be read or mapped, Dropped extension attributes the CE
	// inverse could not carry.
	In, Out, Skipped, Bad, Dropped int
}

// ErrSkip marks an input outside the mode's scope: not an error, no output.
var ErrSkip = errors.New("outside the bridge's scope")

// Convert maps one input record. It returns ErrSkip (possibly wrapped) for
// inputs the mode does not cover; diag receives per-record diagnostics that
// do not stop the conversion (the CE inverse's dropped attributes).
func (c Converter) Convert(line []byte, diag func(string)) ([]byte, error) {
	if c.Mode == ModeCEInverse {
		e, dropped, err := FromCE(line)
		for _, d := range dropped {
			diag(d)
		}
		if errors.Is(err, ErrForeignCE) {
			return nil, fmt.Errorf("%w: %w", ErrSkip, err)
		}
		if err != nil {
			return nil, err
		}
		return e.MarshalJSON()
	}
	e, err := aep.ParseEvent(line)
	if err != nil {
		return nil, err
	}
	if err := aep.CheckEnvelope(e); err != nil {
		return nil, err
	}
	return c.Event(e)
}

// Event maps one parsed event in a forward mode.
func (c Converter) Event(e *aep.Event) ([]byte, error) {
	switch c.Mode {
	case ModeCE:
		return ToCE(e), nil
	case ModeOTLP:
		lr, err := LogRecord(e, c.MaxCapture)
		if err != nil {
			return nil, err
		}
		b := LogsBatch{ServiceName: c.ServiceName}
		b.Add(e.Agent, lr)
		if er, ok := EvaluationRecord(e, c.MaxCapture); ok {
			b.Add(e.Agent, er)
		}
		return MarshalLogsJSON(b.Data())
	case ModeOCSF:
		rec, ok, err := OCSF(e, c.MaxCapture)
		if err == nil && !ok {
			err = fmt.Errorf("%w: %s has no OCSF class", ErrSkip, e.Type)
		}
		return rec, err
	}
	return nil, fmt.Errorf("mode %d has no forward mapping", c.Mode)
}

// Run converts a JSONL stream: each output record is one line on w; each
// bad or skipped input and each diagnostic goes to report with its line
// number. Only a read or write failure stops it.
func (c Converter) Run(r io.Reader, w io.Writer, report func(line int, msg string)) (Counts, error) {
	var n Counts
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLine)
	bw := bufio.NewWriter(w)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		n.In++
		out, err := c.Convert(b, func(msg string) { n.Dropped++; report(line, msg) })
		switch {
		case errors.Is(err, ErrSkip):
			n.Skipped++
			continue
		case err != nil:
			n.Bad++
			report(line, err.Error())
			continue
		}
		bw.Write(out)
		if err := bw.WriteByte('\n'); err != nil {
			return n, err
		}
		n.Out++
	}
	if err := sc.Err(); err != nil {
		return n, fmt.Errorf("line %d: %w", line+1, err)
	}
	return n, bw.Flush()
}
