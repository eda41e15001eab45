package mapping

import (
	"errors"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
)

func rateCommand(t testing.TB, data string) *aep.Event {
	t.Helper()
	e := &aep.Event{AEP: aep.Version, ID: "01CMD", Type: TypeRate, Time: "2026-11-29T00:00:00.000Z",
		Source: "aep://h/agent/aep-kimi-page/session/s", Agent: AgentPage, Session: "s", Run: "r1"}
	e.Data = []byte(data)
	return e
}

func TestCheckNote(t *testing.T) {
	for _, c := range []struct {
		note string
		want error
	}{
		{"", nil},
		{"missed the buffer bound", nil},
		{"日本語のメモ", nil},
		{strings.Repeat("é", MaxNoteRunes), nil},
		{strings.Repeat("é", MaxNoteRunes+1), ErrNoteTooLong},
		{"two\nlines", ErrNoteControl},
		{"tab\there", ErrNoteControl},
		{"\x1b[31mred", ErrNoteControl},
		{"del\x7f", ErrNoteControl},
		{"c1\u0085", ErrNoteControl},
		{"rtl \u202eevil", ErrNoteControl},
		{"isolate \u2066x\u2069", ErrNoteControl},
	} {
		if err := CheckNote(c.note); !errors.Is(err, c.want) {
			t.Errorf("CheckNote(%q) = %v, want %v", c.note, err, c.want)
		}
	}
	if CheckNote("bad \xff utf8") == nil {
		t.Error("invalid UTF-8 passed")
	}
}

// TestRatingOf: a command's data is read strictly for what the feedback is
// built from, and nothing else a sender writes reaches it.
func TestRatingOf(t *testing.T) {
	for _, c := range []struct {
		data string
		want Rating
		ok   bool
	}{
		{`{"rating":1}`, Rating{Verdict: VerdictUp}, true},
		{`{"rating":-1,"comment":"wrong file"}`, Rating{Verdict: VerdictDown, Note: "wrong file"}, true},
		{`{"rating":-1,"by":"admin","source":"robot","x-kimi-code-by":"admin"}`, Rating{Verdict: VerdictDown}, true},
		{`{"rating":0}`, Rating{}, false},
		{`{"rating":2}`, Rating{}, false},
		{`{"rating":"1"}`, Rating{}, false},
		{`{"rating":1.5}`, Rating{}, false},
		{`{}`, Rating{}, false},
		{`{"rating":1,"comment":7}`, Rating{}, false},
		{`{"rating":1,"comment":"a\nb"}`, Rating{}, false},
		{`{"rating":1,"comment":"` + strings.Repeat("x", MaxNoteRunes+1) + `"}`, Rating{}, false},
		{`[1]`, Rating{}, false},
	} {
		got, err := RatingOf(rateCommand(t, c.data))
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("RatingOf(%s) = %+v, %v; want %+v ok=%v", c.data, got, err, c.want, c.ok)
		}
	}
}

// TestFeedbackReceivedCapture: the note is gated by the attention level,
// like an answer's text: left out below redacted, and the verdict kept at
// every level but none.
func TestFeedbackReceivedCapture(t *testing.T) {
	r := Rating{Verdict: VerdictDown, Note: "leaked the key"}
	meta := FeedbackReceived(r, "alice", "page", Posture{Capture: aep.CaptureMetadata, AttentionCapture: aep.CaptureMetadata})
	if _, ok := meta.Data["comment"]; ok || meta.Capture != aep.CaptureMetadata || meta.Data["label"] != LabelThumbsDown {
		t.Errorf("at metadata: %+v", meta)
	}
	none := FeedbackReceived(r, "alice", "page", Posture{Capture: aep.CaptureNone, AttentionCapture: aep.CaptureNone})
	if none.Capture != aep.CaptureNone || len(none.Data) != 0 {
		t.Errorf("at none: %+v", none)
	}
	for _, m := range []Event{meta, none} {
		checkMapped(t, m)
	}
}

// FuzzRatingOf: any command data either reads as a rating whose note
// passes CheckNote and whose feedback is a valid event at every posture,
// or is refused; it never panics.
func FuzzRatingOf(f *testing.F) {
	f.Add(`{"rating":1}`)
	f.Add(`{"rating":-1,"comment":"missed the bound"}`)
	f.Add(`{"rating":-1,"comment":"\u202e"}`)
	f.Add(`{"rating":-1.0}`)
	postures := []Posture{DefaultPosture(), {Capture: aep.CaptureNone}, {Capture: aep.CaptureFull, AttentionCapture: aep.CaptureFull}}
	f.Fuzz(func(t *testing.T, data string) {
		r, err := RatingOf(rateCommand(t, data))
		if err != nil {
			return
		}
		if err := r.Check(); err != nil {
			t.Fatalf("accepted %q, which Check refuses: %v", data, err)
		}
		for _, p := range postures {
			checkMapped(t, FeedbackReceived(r, "alice", "page", p))
		}
	})
}
