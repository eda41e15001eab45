package notify

import (
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// An answer link's command settles on its ack in either order: the relay
// hands a command to its emitter before it holds it, so a quick emitter's
// ack can reach the notifier's stream first. Another command's ack in the
// same session never settles it.
func TestSettleEitherOrder(t *testing.T) {
	t.Parallel()
	c := Claims{Session: "s1", Request: "r1", Surface: mapping.AgentLink, By: "owner"}
	cmd := &aep.Event{ID: "cmd-1", Type: typeRespond, Session: "s1", Subject: "r1", Agent: mapping.AgentLink}
	if err := cmd.SetExt(mapping.ExtBy, "owner"); err != nil {
		t.Fatal(err)
	}
	other := &aep.Event{ID: "a0", Type: typeRejected, Session: "s1", Cause: "cmd-0"}
	ack := &aep.Event{ID: "a1", Type: typeAccepted, Session: "s1", Cause: "cmd-1"}
	for name, order := range map[string][]*aep.Event{
		"command first": {cmd, other, ack},
		"ack first":     {other, ack, cmd},
	} {
		t.Run(name, func(t *testing.T) {
			var f feed
			w := f.await(c)
			for _, ev := range order {
				f.settle(ev)
			}
			select {
			case got := <-w.done:
				if got != ack {
					t.Fatalf("settled on %s (%s), want the command's ack", got.ID, got.Type)
				}
			default:
				t.Fatal("the answer did not settle")
			}
		})
	}
}
