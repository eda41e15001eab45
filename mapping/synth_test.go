package mapping

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
)

// synthArgs are the arguments a synthesized-event golden case passes to its
// constructor (the call.json section: {"ctor": NAME, "args": {...}}).
type synthArgs struct {
	Trigger      string       `json:"trigger"`
	Failed       bool         `json:"failed"`
	Resolution   string       `json:"resolution"`
	LatencyMs    int64        `json:"latency_ms"`
	Reason       string       `json:"reason"`
	AfterMs      int64        `json:"after_ms"`
	Option       string       `json:"option"`
	Text         string       `json:"text"`
	By           string       `json:"by"`
	Surface      string       `json:"surface"`
	Tool         string       `json:"tool"`
	CallID       string       `json:"call_id"`
	Detail       string       `json:"detail"`
	QueuedMs     int64        `json:"queued_ms"`
	FromSeq      int64        `json:"from_seq"`
	ToSeq        int64        `json:"to_seq"`
	KapEpoch     string       `json:"kap_epoch"`
	NextKapEpoch string       `json:"next_kap_epoch"`
	ExpiresAt    string       `json:"expires_at"`
	OnExpiry     string       `json:"on_expiry"`
	Options      []aep.Option `json:"options"`
	DurationMs   int64        `json:"duration_ms"`
	Runs         int          `json:"runs"`
	State        string       `json:"state"`
	Agent        string       `json:"agent"`
	Task         string       `json:"task"`
	Verdict      string       `json:"verdict"`
	// ContextTokens and ContextLimit are a context window (WithContext).
	ContextTokens int64 `json:"context_tokens"`
	ContextLimit  int64 `json:"context_limit"`
	// Hook and Frame are the input a decorated (or gate) event is first
	// mapped from: a hook payload, or a kap frame in primary mode.
	Hook  json.RawMessage `json:"hook"`
	Frame json.RawMessage `json:"frame"`
	// Control, Values and Via are a question request's offer and answer:
	// the questions are the frame's.
	Control bool           `json:"control"`
	Values  map[string]any `json:"values"`
	Via     string         `json:"via"`
}

// mapped is the event a case's hook payload or kap frame maps to.
func (a synthArgs) mapped(p Posture) (Event, error) {
	var evs []Event
	switch {
	case a.Hook != nil:
		r, err := Hook(a.Hook, p)
		if err != nil {
			return Event{}, err
		}
		evs = r.Events
	case a.Frame != nil:
		r, err := Web(a.Frame, Primary, p)
		if err != nil {
			return Event{}, err
		}
		evs = r.Events
	}
	if len(evs) != 1 {
		return Event{}, fmt.Errorf("the input maps to %d events, want 1", len(evs))
	}
	return evs[0], nil
}

// decorated applies a decorator to the case's mapped event, and checks the
// decorator left that event as it was.
func decorated(a synthArgs, p Posture, decorate func(Event) Event) (Event, error) {
	e, err := a.mapped(p)
	if err != nil {
		return Event{}, err
	}
	before, _ := json.Marshal(e)
	out := decorate(e)
	if after, _ := json.Marshal(e); !bytes.Equal(before, after) {
		return Event{}, fmt.Errorf("the decorator changed its input:\n%s\n%s", before, after)
	}
	return out, nil
}

// synthCtors names every constructor of an event an emitter synthesizes from
// its own state; each has at least one golden case in testdata/synth.
var synthCtors = map[string]func(a synthArgs, p Posture) (Event, error){
	"RunStarted":        func(a synthArgs, p Posture) (Event, error) { return RunStarted(a.Trigger, p), nil },
	"RunDrained":        func(_ synthArgs, p Posture) (Event, error) { return RunDrained(p), nil },
	"PromptQueued":      func(_ synthArgs, p Posture) (Event, error) { return PromptQueued(p), nil },
	"SubagentTurnEnded": func(a synthArgs, p Posture) (Event, error) { return SubagentTurnEnded(a.Failed, p), nil },
	"AttentionResolved": func(a synthArgs, p Posture) (Event, error) {
		return AttentionResolved(a.Resolution, a.LatencyMs, a.Reason, p), nil
	},
	"AttentionTimeout": func(a synthArgs, p Posture) (Event, error) {
		return AttentionTimeout(a.AfterMs, a.Reason, a.OnExpiry, p), nil
	},
	"AttentionAnsweredByControl": func(a synthArgs, p Posture) (Event, error) {
		return AttentionAnsweredByControl(a.Option, a.Text, a.By, p), nil
	},
	"ToolDenied":           func(a synthArgs, p Posture) (Event, error) { return ToolDenied(a.Tool, a.CallID, a.By, p), nil },
	"ControlAccepted":      func(_ synthArgs, p Posture) (Event, error) { return ControlAccepted(p), nil },
	"ControlRejected":      func(a synthArgs, p Posture) (Event, error) { return ControlRejected(a.Reason, a.Detail, p), nil },
	"InstructionDelivered": func(a synthArgs, p Posture) (Event, error) { return InstructionDelivered(a.QueuedMs, p), nil },
	"InstructionDropped":   func(a synthArgs, p Posture) (Event, error) { return InstructionDropped(a.Reason, p), nil },
	"WebGap": func(a synthArgs, p Posture) (Event, error) {
		return WebGap(a.Reason, a.FromSeq, a.ToSeq, a.KapEpoch, a.NextKapEpoch, p), nil
	},
	"WebUnrecognized": func(_ synthArgs, p Posture) (Event, error) { return WebUnrecognized(p), nil },
	"SessionEnded":    func(a synthArgs, p Posture) (Event, error) { return SessionEnded(a.Reason, p), nil },
	"SessionResumed":  func(_ synthArgs, p Posture) (Event, error) { return SessionResumed(p), nil },
	"SubagentDrained": func(a synthArgs, p Posture) (Event, error) { return SubagentDrained(a.Agent, p), nil },
	"TaskDrained":     func(a synthArgs, p Posture) (Event, error) { return TaskDrained(a.Task, p), nil },
	"Presence":        func(a synthArgs, p Posture) (Event, error) { return Presence(a.State, p), nil },
	"ChannelHealth":   func(a synthArgs, p Posture) (Event, error) { return ChannelHealth(a.State, p), nil },
	"WebEnded":        func(a synthArgs, p Posture) (Event, error) { return WebEnded(a.Reason, p), nil },
	"GateRequest": func(a synthArgs, p Posture) (Event, error) {
		r, err := Hook(a.Hook, p)
		if err != nil {
			return Event{}, err
		}
		return GateRequest(r, p, a.ExpiresAt, a.OnExpiry, a.Options), nil
	},
	"WithDuration": func(a synthArgs, p Posture) (Event, error) {
		return decorated(a, p, func(e Event) Event { return WithDuration(e, a.DurationMs) })
	},
	"WithLatency": func(a synthArgs, p Posture) (Event, error) {
		return decorated(a, p, func(e Event) Event { return WithLatency(e, a.LatencyMs) })
	},
	"WithSessionSummary": func(a synthArgs, p Posture) (Event, error) {
		return decorated(a, p, func(e Event) Event { return WithSessionSummary(e, a.DurationMs, a.Runs) })
	},
	"WithContext": func(a synthArgs, p Posture) (Event, error) {
		return decorated(a, p, func(e Event) Event {
			return WithContext(e, ContextWindow{Tokens: a.ContextTokens, Limit: a.ContextLimit})
		})
	},
	"CancelledByControl": func(a synthArgs, p Posture) (Event, error) {
		return decorated(a, p, CancelledByControl)
	},
	"Offered": func(a synthArgs, p Posture) (Event, error) {
		return decorated(a, p, func(e Event) Event { return Offered(e, a.Options) })
	},
	"DeniedByRule": func(a synthArgs, p Posture) (Event, error) {
		return DeniedByRule(ToolDenied(a.Tool, a.CallID, DeniedByPolicy, p), a.By), nil
	},
	"ToolAsked": func(a synthArgs, p Posture) (Event, error) {
		f, err := ParseFrame(a.Frame)
		if err != nil {
			return Event{}, err
		}
		return decorated(a, p, func(e Event) Event { return ToolAsked(e, f, p) })
	},
	"ViaControl": func(a synthArgs, p Posture) (Event, error) {
		return decorated(a, p, func(e Event) Event { return ViaControl(e, a.Option, a.By) })
	},
	"WithSurface": func(a synthArgs, p Posture) (Event, error) {
		e := AttentionAnsweredByControl(a.Option, a.Text, a.By, p)
		before, _ := json.Marshal(e)
		out := WithSurface(e, a.Surface)
		if after, _ := json.Marshal(e); !bytes.Equal(before, after) {
			return Event{}, fmt.Errorf("WithSurface changed its input")
		}
		return out, nil
	},
	"FeedbackReceived": func(a synthArgs, p Posture) (Event, error) {
		return FeedbackReceived(Rating{Verdict: a.Verdict, Note: a.Text}, a.By, a.Surface, p), nil
	},
	"OfferedQuestion": func(a synthArgs, p Posture) (Event, error) {
		return decorated(a, p, func(e Event) Event { return OfferedQuestion(e, a.Control) })
	},
	"QuestionAnswered": func(a synthArgs, p Posture) (Event, error) {
		f, err := ParseFrame(a.Frame)
		if err != nil {
			return Event{}, err
		}
		return QuestionAnswered(a.Values, WebQuestions(f.Payload), a.Via, p), nil
	},
	"QuestionDismissed": func(a synthArgs, p Posture) (Event, error) { return QuestionDismissed(a.Via, p), nil },
	"WithAnswerOption": func(a synthArgs, p Posture) (Event, error) {
		return decorated(a, p, func(e Event) Event { return WithAnswerOption(e, a.Option) })
	},
}

// synthPostures add full to the two hook postures: some synthesized text
// (an operator's answer, a rejection detail) goes through the pipeline even
// at full, and the golden files pin that.
var synthPostures = append(postures[:len(postures):len(postures)], struct {
	name string
	p    Posture
}{"full", Posture{Capture: aep.CaptureFull, AttentionCapture: aep.CaptureFull, Redactor: aep.NewRedactor(aep.RedactOptions{Home: "/home/dev"})}})

func readCall(t *testing.T, g *golden) (string, synthArgs) {
	t.Helper()
	var call struct {
		Ctor string          `json:"ctor"`
		Args json.RawMessage `json:"args"`
	}
	dec := json.NewDecoder(bytes.NewReader(g.input("call.json")))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&call); err != nil {
		t.Fatalf("call.json: %v", err)
	}
	var a synthArgs
	if len(call.Args) > 0 {
		dec = json.NewDecoder(bytes.NewReader(call.Args))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			t.Fatalf("call.json args: %v", err)
		}
	}
	return call.Ctor, a
}

func TestSynthGolden(t *testing.T) {
	used := map[string]bool{}
	for _, path := range goldenFiles(t, "synth") {
		name := strings.TrimSuffix(filepath.Base(path), ".txtar")
		g := readGolden(t, path)
		ctor, args := readCall(t, g)
		used[ctor] = true
		t.Run(name, func(t *testing.T) {
			build, ok := synthCtors[ctor]
			if !ok {
				t.Fatalf("unknown constructor %q", ctor)
			}
			for _, ps := range synthPostures {
				ev, err := build(args, ps.p)
				if err != nil {
					t.Fatalf("%s: %v", ctor, err)
				}
				g.check(t, ps.name, []Event{ev})
			}
			// An event that fails its envelope check is never recorded.
			if *update && !t.Failed() {
				g.write(t, path)
			}
		})
	}
	for ctor := range synthCtors {
		if !used[ctor] {
			t.Errorf("constructor %s has no golden case in testdata/synth", ctor)
		}
	}
}

// TestEmittersBuildNoEvents keeps every event shape here: the adapter and
// the bridge decide when to emit, never what, so neither builds a
// mapping.Event literal of its own nor writes into an event's data.
func TestEmittersBuildNoEvents(t *testing.T) {
	for _, dir := range []string{"../adapter", "../bridgeweb"} {
		fset := token.NewFileSet()
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s", dir)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if as, ok := n.(*ast.AssignStmt); ok {
					for _, lhs := range as.Lhs {
						if ix, ok := lhs.(*ast.IndexExpr); ok {
							if sel, ok := ix.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "Data" {
								t.Errorf("%s: writes into an event's data; add a decorator to mapping instead", fset.Position(as.Pos()))
							}
						}
					}
					return true
				}
				lit, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				if sel, ok := lit.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Event" {
					if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "mapping" {
						t.Errorf("%s: a mapping.Event literal; add a constructor to mapping instead", fset.Position(lit.Pos()))
					}
				}
				return true
			})
		}
	}
}
