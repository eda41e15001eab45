package relay

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
)

// SenderAgent is the envelope agent of commands sent from the CLI.
const SenderAgent = "aep-kimi-cli"

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
func SendCommand(ctx context.Context, base, token string, cmd *aep.Event, window time.Duration) (SendResult, error) {
	if window <= 0 {
		window = DefaultAckWindow
	}
	wsURL, _, err := relayEndpoints(base)
	if err != nil {
		return SendResult{}, err
	}
	dctx, cancel := context.WithTimeout(ctx, window+DefaultEmitterTimeout)
	defer cancel()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	c, resp, err := websocket.Dial(dctx, wsURL, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		if resp != nil {
			return SendResult{}, fmt.Errorf("relay refused the socket: HTTP %d", resp.StatusCode)
		}
		return SendResult{}, fmt.Errorf("relay unreachable: %w", err)
	}
	defer c.CloseNow() //nolint:errcheck // best effort
	c.SetReadLimit(DefaultMaxBody)

	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return c.Write(dctx, websocket.MessageText, b)
	}
	host, _ := os.Hostname()
	if err := send(map[string]any{
		"type": "hello", "versions": []string{aep.Version}, "role": roleBoth,
		"identity":     map[string]string{"agent": SenderAgent, "instance": fmt.Sprintf("%s/%d", host, os.Getpid())},
		"capabilities": map[string]any{},
	}); err != nil {
		return SendResult{}, fmt.Errorf("send hello: %w", err)
	}
	subID := "acks-" + cmd.ID
	if err := send(map[string]any{
		"type": "subscribe", "id": subID,
		"filter": map[string]any{"session": cmd.Session, "type": []string{"control.accepted", "control.rejected"}},
	}); err != nil {
		return SendResult{}, fmt.Errorf("subscribe: %w", err)
	}
	raw, err := cmd.Bytes()
	if err != nil {
		return SendResult{}, err
	}
	sent := false
	deadline := time.NewTimer(window + DefaultEmitterTimeout)
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
			var f struct {
				Type   string `json:"type"`
				ID     string `json:"id"`
				Cause  string `json:"cause"`
				Code   string `json:"code"`
				Detail string `json:"detail"`
			}
			if json.Unmarshal(b, &f) != nil {
				continue
			}
			switch {
			case f.Type == "hello" || f.Type == "ping":
				if f.Type == "ping" {
					send(map[string]any{"type": "pong"}) //nolint:errcheck // liveness only
				}
			case f.Type == "subscribed" && f.ID == subID && !sent:
				if err := c.Write(dctx, websocket.MessageText, raw); err != nil {
					return SendResult{}, fmt.Errorf("send command: %w", err)
				}
				sent = true
				deadline.Reset(window)
			case f.Type == "error" && f.ID == subID:
				return SendResult{}, fmt.Errorf("relay refused the ack subscription: %s %s", f.Code, f.Detail)
			case f.Type == "error" && f.Cause == cmd.ID:
				return SendResult{Reason: f.Code, Detail: f.Detail, Refused: true}, nil
			case f.Cause == cmd.ID && (f.Type == "control.accepted" || f.Type == "control.rejected"):
				ack, err := aep.ParseEvent(b)
				if err != nil {
					continue
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
				c.Close(websocket.StatusNormalClosure, "settled") //nolint:errcheck // best effort
				return r, nil
			}
		}
	}
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
