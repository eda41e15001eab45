package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// SenderAgent is the envelope agent of commands sent from the CLI.
const SenderAgent = mapping.AgentCLI

// DefaultAckWindow is AEP-0004 §3's default ack window.
const DefaultAckWindow = 10 * time.Second

// SendResult is how a command was settled.
type SendResult struct {
	// Ack is the target's control.accepted or control.rejected, when one
	// came back.
	Ack *aep.Event
	// Reason is the rejection reason (from the ack, or the relay's refusal
	// code); empty when accepted.
	Reason string
	// Detail is the rejection detail, when given.
	Detail string
	// Refused is set when the relay refused the command on the target's
	// behalf (a cause-linked error frame: no-route, unsupported, ambiguous,
	// unauthorized) and nothing reached a target.
	Refused bool
}

// Accepted reports an accepted command.
func (r SendResult) Accepted() bool { return r.Ack != nil && r.Ack.Type == "control.accepted" }

// ErrNoAck is returned when no decision arrived within the ack window; the
// sender treats it as a timeout nack (AEP-0004 §3).
var ErrNoAck = errors.New("no ack within the window")

// SendCommand delivers one command through a relay's socket and waits for its
// settlement: the target's ack (cause = the command id) or the relay's
// cause-linked refusal. It subscribes to the session's acks before sending, so
// a fast ack is never missed. window bounds the wait (0: the AEP default).
// hc reaches the relay (nil: a default client, the system's roots).
func SendCommand(ctx context.Context, base, token string, hc *http.Client, cmd *aep.Event, window time.Duration) (SendResult, error) {
	if window <= 0 {
		window = DefaultAckWindow
	}
	wsURL, _, err := relayEndpoints(base)
	if err != nil {
		return SendResult{}, err
	}
	raw, err := cmd.Bytes()
	if err != nil {
		return SendResult{}, err
	}
	dctx, cancel := context.WithTimeout(ctx, window+DefaultPublisherTimeout)
	defer cancel()
	c, err := dial(dctx, wsURL, token, hc, senderHello())
	if err != nil {
		return SendResult{}, err
	}
	defer c.CloseNow() //nolint:errcheck // best effort
	subID := "acks-" + cmd.ID
	if err := subscribeAcks(dctx, c, subID, cmd.Session); err != nil {
		return SendResult{}, err
	}
	return settle(ctx, dctx, c, subID, cmd.ID, raw, window)
}

// senderHello is the CLI sender's hello: role both, since it sends a
// command and watches for its ack.
func senderHello() *wire.Hello {
	host, _ := os.Hostname()
	return wire.NewHello(wire.RoleBoth, wire.Identity{Agent: SenderAgent, Instance: fmt.Sprintf("%s/%d", host, os.Getpid())}, wire.Capabilities{})
}

// subscribeAcks asks for the session's acks under subID.
func subscribeAcks(ctx context.Context, c *websocket.Conn, subID, session string) error {
	filter, err := json.Marshal(map[string]any{"session": session, "type": []string{"control.accepted", "control.rejected"}})
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	if err := c.Write(ctx, websocket.MessageText, wire.Encode(&wire.Subscribe{ID: wire.ID(subID), Filter: filter})); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	return nil
}

// settle sends the command once the ack subscription is confirmed, then
// reads until the command is settled: the target's ack, the relay's
// cause-linked refusal, or the window's end (ErrNoAck). The window starts
// when the command is sent; before that the dial's budget applies.
func settle(ctx, dctx context.Context, c *websocket.Conn, subID, cmdID string, raw []byte, window time.Duration) (SendResult, error) {
	sent := false
	deadline := time.NewTimer(window + DefaultPublisherTimeout)
	defer deadline.Stop()
	frames := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		for {
			_, b, err := c.Read(dctx)
			if err != nil {
				readErr <- err
				return
			}
			select {
			case frames <- b:
			case <-dctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return SendResult{}, ctx.Err()
		case <-deadline.C:
			return SendResult{}, ErrNoAck
		case err := <-readErr:
			return SendResult{}, fmt.Errorf("relay connection lost: %w", err)
		case b := <-frames:
			f, err := wire.Parse(b)
			if err != nil {
				continue
			}
			switch f := f.(type) {
			case *wire.Ping:
				c.Write(dctx, websocket.MessageText, wire.PongFor(f)) //nolint:errcheck // liveness only
			case *wire.Subscribed:
				if f.ID != subID || sent {
					continue
				}
				if err := c.Write(dctx, websocket.MessageText, raw); err != nil {
					return SendResult{}, fmt.Errorf("send command: %w", err)
				}
				sent = true
				deadline.Reset(window)
			case *wire.Error:
				switch {
				case wire.String(f.ID) == subID:
					return SendResult{}, fmt.Errorf("relay refused the ack subscription: %s %s", f.Code, f.Detail)
				case f.Cause == cmdID:
					return SendResult{Reason: f.Code, Detail: f.Detail, Refused: true}, nil
				}
			case wire.Event:
				if r, ok := ackResult(b, f.Type, cmdID); ok {
					c.Close(websocket.StatusNormalClosure, "settled") //nolint:errcheck // best effort
					return r, nil
				}
			}
		}
	}
}

// ackResult reads b as the target's ack of command cmdID.
func ackResult(b []byte, typ, cmdID string) (SendResult, bool) {
	if typ != "control.accepted" && typ != "control.rejected" {
		return SendResult{}, false
	}
	ack, err := aep.ParseEvent(b)
	if err != nil || ack.Cause != cmdID {
		return SendResult{}, false
	}
	r := SendResult{Ack: ack}
	if ack.Type == "control.rejected" {
		var d struct {
			Reason string `json:"reason"`
			Detail string `json:"detail"`
		}
		json.Unmarshal(ack.Data, &d) //nolint:errcheck // the reason may be absent
		r.Reason, r.Detail = d.Reason, d.Detail
	}
	return r, true
}

// NewCommand builds a command event from the CLI sender: no seq (the sender
// does not own the session's order), capture redacted when it carries free
// text the sender authored.
func NewCommand(typ, session string, data map[string]any) (*aep.Event, error) {
	host, _ := os.Hostname()
	e := &aep.Event{
		AEP: aep.Version, ID: aep.NewID(), Type: typ, Time: aep.FormatTime(time.Now()),
		Source: aep.SourceURI(host, SenderAgent, session), Agent: SenderAgent, Session: session,
	}
	if err := e.SetData(data); err != nil {
		return nil, err
	}
	return e, nil
}
