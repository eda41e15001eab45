package bridgeweb

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// checkingPublisher records every published event that is not valid AEP:
// whatever the server sends, what the bridge publishes is well formed. (It
// fails the input after the frame path returns: failing inside Publish
// would unwind with the session's lock held.)
type checkingPublisher struct {
	mu  sync.Mutex
	bad []string
}

func (p *checkingPublisher) Publish(ev *aep.Event) {
	if err := aep.Validate(ev); err != nil {
		p.mu.Lock()
		p.bad = append(p.bad, fmt.Sprintf("%s: %v", ev.Type, err))
		p.mu.Unlock()
	}
}

// take returns what was recorded since the last take.
func (p *checkingPublisher) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	bad := p.bad
	p.bad = nil
	return bad
}

// FuzzFrame feeds arbitrary bytes, one frame per line, through the bridge's
// frame path (link.handle) on a connection where some sessions are live,
// some pending and some unknown, in both modes. It must never panic, and
// every event it publishes must be valid.
func FuzzFrame(f *testing.F) {
	if frames, err := readHarnessFrames(); err == nil {
		// The start of the real session as one input (small enough for the
		// fuzzer to minimize), and frames alone.
		f.Add(bytes.Join(frames[:40], []byte("\n")), false)
		f.Add(bytes.Join(frames[:40], []byte("\n")), true)
		for _, fr := range frames[:20] {
			f.Add(fr, true)
		}
	}
	f.Add([]byte(`{"type":"turn.started","seq":3,"session_id":"s1","epoch":"A","payload":{"agentId":"main","turnId":0}}`+"\n"+
		`{"type":"tool.result","seq":5,"session_id":"s1","epoch":"A","payload":{"toolCallId":"c"}}`), true)
	f.Add([]byte(`{"type":"ack","id":"sub-1","code":0,"payload":{"accepted":["s1"],"cursors":{"s1":{"seq":"x"}}}}`), false)
	f.Add([]byte(`{"type":"resync_required","payload":{"session_id":"s1","reason":"epoch_changed","current_seq":-4}}`), true)
	f.Add([]byte(`{"type":"event.session.archived","seq":2,"session_id":"__global__","epoch":"G","payload":{"sessionId":"s1"}}`), false)
	f.Add([]byte("not json\n{}\n\x00\n[]"), true)

	bridges := map[bool]*Bridge{}
	pub := &checkingPublisher{}
	for _, primary := range []bool{false, true} {
		mode := mapping.Companion
		if primary {
			mode = mapping.Primary
		}
		b, err := NewBridge(Config{Config: emitter.Config{Home: f.TempDir(), Host: "fuzz", Publisher: pub,
			Logger: slog.New(slog.DiscardHandler)}, KimiHome: f.TempDir(), Mode: mode,
			Control: Control{Enabled: true, Authenticated: true}})
		if err != nil {
			f.Fatal(err)
		}
		bridges[primary] = b
	}
	f.Fuzz(func(t *testing.T, data []byte, primary bool) {
		b := bridges[primary]
		pub.take()
		// Keep the state bounded across inputs.
		if keys := b.core.Keys(); len(keys) > 64 {
			for _, k := range keys {
				b.core.Evict(k)
			}
		}
		l := newLink(newFollower(b, Instance{}), func(context.Context, []byte) error { return nil })
		l.subs["s1"] = subLive
		l.subs[mapping.GlobalSession] = subLive
		l.subs["s2"] = subPending
		l.pending["sub-1"] = []string{"s2"}
		for _, line := range bytes.Split(data, []byte("\n")) {
			l.handle(context.Background(), line)
		}
		for _, msg := range pub.take() {
			t.Errorf("published an invalid event: %s", msg)
		}
	})
}

// FuzzQuestionAnswer reads arbitrary answers against arbitrary questions
// (both as JSON): it never panics, and an answer it takes posts only the
// questions asked, each in a kap answer kind that fits the question, with
// choices it offers and free text only where the question allows it.
func FuzzQuestionAnswer(f *testing.F) {
	asked, _ := json.Marshal(askedPayload())
	f.Add(asked, []byte(`{"values":{"q_0":"prod","q_1":["ops","the boss"]}}`))
	f.Add(asked, []byte(`{"text":"dismiss"}`))
	f.Add([]byte(`{"questions":[{"id":"q","question":"A?","options":[{"id":"a","label":"A"},{"id":"b","label":"a"}]}]}`), []byte(`{"text":"a"}`))
	f.Fuzz(func(t *testing.T, questions, answer []byte) {
		var pl, ans map[string]any
		if json.Unmarshal(questions, &pl) != nil || json.Unmarshal(answer, &ans) != nil {
			return
		}
		qs := mapping.WebQuestions(pl)
		qa, err := readQuestionAnswer(qs, ans)
		if err != nil || qa.dismiss {
			if err != nil && (err.Error() == "" || strings.ContainsAny(err.Error(), "\n")) {
				t.Fatalf("error %q is not one line", err)
			}
			return
		}
		if len(qa.answers) == 0 || len(qa.answers) != len(qa.values) {
			t.Fatalf("answers %v values %v", qa.answers, qa.values)
		}
		byID := map[string]mapping.Question{}
		for _, q := range qs {
			byID[q.ID] = q
		}
		for id, a := range qa.answers {
			q, ok := byID[id]
			if !ok {
				t.Fatalf("posted an answer to %q, not asked", id)
			}
			kap := a.(map[string]any)
			offered := func(id string) bool {
				for _, c := range q.Choices {
					if c.ID == id {
						return true
					}
				}
				return false
			}
			switch kap["kind"] {
			case kapSingle:
				if q.Multi || !offered(kap["option_id"].(string)) {
					t.Fatalf("single %v on %+v", kap, q)
				}
			case kapMulti, kapMultiWithOther:
				ids := kap["option_ids"].([]string)
				if !q.Multi || len(ids) == 0 {
					t.Fatalf("multi %v on %+v", kap, q)
				}
				for _, id := range ids {
					if !offered(id) {
						t.Fatalf("choice %q not offered", id)
					}
				}
				if kap["kind"] == kapMultiWithOther && (!q.Other || strings.TrimSpace(kap["other_text"].(string)) == "") {
					t.Fatalf("other text %v on %+v", kap, q)
				}
			case kapOther:
				if !q.Other || strings.TrimSpace(kap["text"].(string)) == "" {
					t.Fatalf("other %v on %+v", kap, q)
				}
			default:
				t.Fatalf("kind %v", kap["kind"])
			}
		}
	})
}
