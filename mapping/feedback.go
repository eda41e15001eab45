package mapping

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/aep-kimi/aep-kimi/aep"
)

// A person's thumbs up or down on a finished run (AEP-0009). It travels as
// a command, TypeRate, so the relay stamps who sent it (ExtBy) as it does
// an answer; the session's emitter, which owns the session's order, records
// it as TypeFeedback in the run's session, caused by the run's terminal
// (AEP-0009 §2: the envelope names what is assessed).
const (
	TypeRate     = "x." + Vendor + ".control.rate"
	TypeFeedback = "assessment.feedback.received"
)

// The two verdicts a rating gives, as the terminal tools and the page name
// them.
const (
	VerdictUp   = "up"
	VerdictDown = "down"
)

// The feedback's AEP-0009 label for each verdict.
const (
	LabelThumbsUp   = "thumbs_up"
	LabelThumbsDown = "thumbs_down"
)

// FeedbackSource is the feedback's source (AEP-0009 §4): a person gave it.
// Who did is DataBy, the relay's stamp, never the sender's word.
const FeedbackSource = "human"

// DataBy is the vendor field of a feedback event naming who gave it: the
// person the relay stamped on the command (AEP-0009 has no field for it;
// source says only that a human did).
const DataBy = "x-" + Vendor + "-by"

// MaxNoteRunes bounds a rating's note, in characters.
const MaxNoteRunes = 500

// Rating is one verdict on a run and an optional note.
type Rating struct {
	Verdict string // VerdictUp or VerdictDown
	Note    string
}

// ParseVerdict reads "up" or "down".
func ParseVerdict(s string) (string, error) {
	if s != VerdictUp && s != VerdictDown {
		return "", fmt.Errorf("the verdict is %s or %s, not %q", VerdictUp, VerdictDown, s)
	}
	return s, nil
}

// Value is the verdict as AEP-0009's rating: 1 up, -1 down.
func (r Rating) Value() int {
	if r.Verdict == VerdictUp {
		return 1
	}
	return -1
}

// Label is the verdict as AEP-0009's label.
func (r Rating) Label() string {
	if r.Verdict == VerdictUp {
		return LabelThumbsUp
	}
	return LabelThumbsDown
}

// ErrNoteTooLong and ErrNoteControl are why a note is refused.
var (
	ErrNoteTooLong = fmt.Errorf("the note is longer than %d characters", MaxNoteRunes)
	ErrNoteControl = errors.New("the note holds a control character (one line of plain text)")
)

// CheckNote refuses a note that is not one line of plain text within
// MaxNoteRunes: invalid UTF-8, a control character (a newline, an escape)
// or a bidirectional override, which would make it read differently from
// what it holds.
func CheckNote(note string) error {
	if !utf8.ValidString(note) {
		return errors.New("the note is not valid UTF-8")
	}
	if utf8.RuneCountInString(note) > MaxNoteRunes {
		return ErrNoteTooLong
	}
	for _, r := range note {
		if unicode.IsControl(r) || isBidiControl(r) {
			return ErrNoteControl
		}
	}
	return nil
}

func isBidiControl(r rune) bool {
	return r == 0x061C || r == 0x200E || r == 0x200F || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

// Check refuses a rating that cannot be sent.
func (r Rating) Check() error {
	if _, err := ParseVerdict(r.Verdict); err != nil {
		return err
	}
	return CheckNote(r.Note)
}

// CommandData is a TypeRate command's data: AEP-0009's rating and, with a
// note, its comment.
func (r Rating) CommandData() (map[string]any, error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	data := map[string]any{"rating": r.Value()}
	if r.Note != "" {
		data["comment"] = r.Note
	}
	return data, nil
}

// RatingOf reads a TypeRate command's data: a rating of 1 or -1 and an
// optional comment that passes CheckNote. Other members are ignored: the
// feedback is built from these alone, so nothing else a sender writes (a
// "by", a "source") reaches the record.
func RatingOf(cmd *aep.Event) (Rating, error) {
	data, err := cmd.DataMap()
	if err != nil {
		return Rating{}, fmt.Errorf("the command's data: %w", err)
	}
	var r Rating
	switch n, _ := data["rating"].(json.Number); n {
	case "1":
		r.Verdict = VerdictUp
	case "-1":
		r.Verdict = VerdictDown
	default:
		return Rating{}, errors.New("the rating is 1 (up) or -1 (down)")
	}
	if c, ok := data["comment"]; ok {
		s, ok := c.(string)
		if !ok {
			return Rating{}, errors.New("the comment is a string")
		}
		if err := CheckNote(s); err != nil {
			return Rating{}, err
		}
		r.Note = s
	}
	return r, nil
}

// FeedbackReceived is a person's rating of a run as AEP-0009's feedback:
// rating, label and source, who gave it and through what (by and surface,
// from CommandSender), and the note as the comment. The note is the
// person's own words, like an answer's text: the posture's attention level
// decides it, as it does an answer's (at redacted and up through the
// redaction pipeline, the event then capture redacted; below, left out).
// The verdict itself is metadata.
func FeedbackReceived(r Rating, by, surface string, p Posture) Event {
	level := p.AttentionCapture
	e := Event{Type: TypeFeedback, Severity: aep.SeverityInfo, Capture: min(level, aep.CaptureMetadata), Data: map[string]any{}}
	if level <= aep.CaptureNone {
		return e
	}
	e.Data["rating"] = r.Value()
	e.Data["label"] = r.Label()
	e.Data["source"] = FeedbackSource
	if by != "" {
		e.Data[DataBy] = by
	}
	if surface != "" {
		e.Data[DataSurface] = surface
	}
	if r.Note != "" && level >= aep.CaptureRedacted {
		e.Data["comment"] = p.redactor().Text(r.Note)
		e.Capture = aep.CaptureRedacted
	}
	return e
}
