package relay_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/client"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// SendCommand settles on the target's ack (accepted or rejected with its
// reason), on the relay's cause-linked refusal, and reports a hello the
// relay refuses, all against the real relay and a real emitter.
func TestSendCommandSettles(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: testToken})
	e := newPublisher(t, client.PublisherConfig{
		URL: srv.URL, Token: testToken,
		Control: &wire.Control{Accepts: []string{"control.cancel"}},
	})
	runPublisher(t, e, func(_ context.Context, cmd *aep.Event) {
		ack := emitted(cmd.Session, 100, "info")
		ack.Type, ack.Cause, ack.Data = "control.accepted", cmd.ID, json.RawMessage(`{}`)
		if cmd.Session == "s-no" {
			ack.Type, ack.Data = "control.rejected", json.RawMessage(`{"reason":"busy","detail":"not now"}`)
		}
		e.Publish(ack)
	})
	e.Publish(emitted("s-yes", 1, "info"))
	e.Publish(emitted("s-no", 1, "info"))
	watch := helloWS(t, srv, "consumer", nil, "w")
	eventually(t, "both claims in the roster", func() bool {
		watch.send(t, map[string]any{"type": "roster", "id": "r"})
		f := watch.expect(t, func(f wsFrame) bool { return f.str("type") == "roster" })
		return strings.Count(string(f.raw), `"session":`) == 2
	})

	send := func(session string) (client.SendResult, error) {
		cmd, err := client.NewCommand("control.cancel", session, map[string]any{"scope": "session"})
		if err != nil {
			t.Fatal(err)
		}
		return client.SendCommand(context.Background(), srv.URL, testToken, nil, cmd, waitShort)
	}
	if r, err := send("s-yes"); err != nil || !r.Accepted() || r.Refused {
		t.Fatalf("accepted command: %+v %v", r, err)
	}
	if r, err := send("s-no"); err != nil || r.Accepted() || r.Reason != "busy" || r.Detail != "not now" {
		t.Fatalf("rejected command: %+v %v", r, err)
	}
	if r, err := send("s-nobody"); err != nil || !r.Refused || r.Reason != wire.CodeNoRoute {
		t.Fatalf("unroutable command: %+v %v", r, err)
	}
	cmd, _ := client.NewCommand("control.cancel", "s-yes", map[string]any{})
	if _, err := client.SendCommand(context.Background(), srv.URL, "wrong", nil, cmd, waitShort); err == nil {
		t.Fatal("a wrong token settled a command")
	}
}
