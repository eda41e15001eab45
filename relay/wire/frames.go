// Package wire is the relay protocol both sides speak (AEP-0003): the
// WebSocket frames of §2 and §4 (hello and its capabilities, subscribe,
// unsubscribe, roster, error, replay-exhausted, closing, ping and pong),
// the error codes and HTTP error body, and the resume positions of §7 with
// their SSE and query encodings. The relay server (package relay) and its
// clients (package relay/client) use these types and nothing else to build
// or read what crosses a socket.
//
// Reading is lenient where the protocol asks: unknown frame types parse as
// Unknown and are ignored by both sides, unknown members are ignored, and
// a malformed capability member is dropped rather than failing the hello
// (§4 rule 4). Writing is exact: struct fields are declared in the order
// each frame has always been encoded, so the bytes on the wire are stable.
package wire

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
)

// Frame types (AEP-0003 §2). A message whose type contains a dot is an
// event, not a frame.
const (
	TypeHello           = "hello"
	TypeSubscribe       = "subscribe"
	TypeSubscribed      = "subscribed"
	TypeUnsubscribe     = "unsubscribe"
	TypeUnsubscribed    = "unsubscribed"
	TypeRoster          = "roster"
	TypeError           = "error"
	TypeReplayExhausted = "replay-exhausted"
	TypeClosing         = "closing"
	TypePing            = "ping"
	TypePong            = "pong"
)

// ReplayedComment is the SSE comment a relay of ours writes when a live
// stream's replay is over: consumers that list what still waits (a tail's
// answer commands) wait for it. SSE consumers ignore comments, so others
// see nothing.
const ReplayedComment = "replayed"

// Socket roles (AEP-0003 §4 rule 2). A hello without a role is a consumer's.
const (
	RoleEmitter  = "emitter"
	RoleConsumer = "consumer"
	RoleBoth     = "both"
)

// Frame is one parsed socket message: *Hello, *Subscribe, *Subscribed,
// *Unsubscribe, *Unsubscribed, *Roster, *Error, *ReplayExhausted, *Closing,
// *Ping, *Pong, Event or Unknown. Kind is the message's type member.
type Frame interface{ Kind() string }

// Event is a message carrying an event (its type contains a dot); the
// caller parses the bytes it already holds as an AEP envelope.
type Event struct{ Type string }

// Unknown is a frame of a type this version does not know; both sides
// ignore it (AEP-0003 §2).
type Unknown struct{ Type string }

// Hello opens a socket in each direction (AEP-0003 §4).
type Hello struct {
	// Auth carries credentials a browser cannot put in the upgrade's
	// headers; it is this relay's extension, never sent by the relay.
	Auth         *HelloAuth   `json:"auth,omitempty"`
	Capabilities Capabilities `json:"capabilities"`
	Identity     Identity     `json:"identity"`
	Role         string       `json:"role,omitempty"`
	Type         string       `json:"type"`
	Versions     []string     `json:"versions"`
}

// HelloAuth is a hello's credentials.
type HelloAuth struct {
	// Login is the fleet page login's bound secret: its cookie admitted
	// the upgrade, the secret proves the page holding it is the one that
	// logged in.
	Login string `json:"login,omitempty"`
}

// Identity names the party behind a socket; Agent is required of emitters.
type Identity struct {
	Agent    string `json:"agent"`
	Instance string `json:"instance"`
}

// Capabilities are declarations, never a gate (AEP-0003 §4 rules 4-5). The
// same shape is the discovery document's capabilities (§3.4).
type Capabilities struct {
	Filters []string `json:"filters,omitempty"`
	Replay  *Replay  `json:"replay,omitempty"`
	// Capture lists capture levels: what an emitter captures, or the
	// ceilings a relay lets a subscription ask for.
	Capture []string `json:"capture,omitempty"`
	// Control is the command block (AEP-0004 §7): a relay declares an empty
	// Accepts when it routes commands, an emitter the types it takes.
	Control      *Control        `json:"control,omitempty"`
	Emits        []string        `json:"emits,omitempty"`
	Roster       *struct{}       `json:"roster,omitempty"`
	Experimental json.RawMessage `json:"experimental,omitempty"`

	// RawControl and RawEmits are the control object and emits array
	// exactly as a peer sent them (set by Parse only): a roster relays
	// declarations verbatim (§4.1 rule 4).
	RawControl json.RawMessage `json:"-"`
	RawEmits   json.RawMessage `json:"-"`
}

// Replay declares a replay buffer (AEP-0003 §5).
type Replay struct {
	Buffer int  `json:"buffer"`
	All    bool `json:"all"`
}

// Control is a control declaration (AEP-0004 §7): the command types
// accepted and the ack window.
type Control struct {
	Accepts     []string `json:"accepts"`
	AckWindowMS int      `json:"ack_window_ms,omitempty"`
}

// Subscribe asks for a subscription (AEP-0003 §6.5). Its members stay raw:
// the endpoint must tell a malformed member from an absent one to answer
// with the closed refusal set, and the reply echoes ID byte for byte.
type Subscribe struct {
	Capture json.RawMessage `json:"capture,omitempty"`
	Dialect json.RawMessage `json:"dialect,omitempty"`
	Filter  json.RawMessage `json:"filter,omitempty"`
	From    json.RawMessage `json:"from,omitempty"`
	ID      json.RawMessage `json:"id"`
	Type    string          `json:"type"`
}

// Subscribed accepts a subscription.
type Subscribed struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// Unsubscribe ends a subscription by id.
type Unsubscribe struct {
	ID   json.RawMessage `json:"id"`
	Type string          `json:"type"`
}

// Unsubscribed acknowledges an unsubscribe, echoing its id.
type Unsubscribed struct {
	ID   json.RawMessage `json:"id"`
	Type string          `json:"type"`
}

// Roster is both the request (ID only) and the reply (AEP-0003 §4.1).
type Roster struct {
	Type    string          `json:"type"`
	ID      json.RawMessage `json:"id"`
	Entries []RosterEntry   `json:"entries"`
}

// RosterEntry relays one claim's declarations verbatim (AEP-0003 §4.1
// rule 4).
type RosterEntry struct {
	Session  string          `json:"session"`
	Agent    string          `json:"agent,omitempty"`
	Instance string          `json:"instance,omitempty"`
	Control  json.RawMessage `json:"control,omitempty"`
	Emits    json.RawMessage `json:"emits,omitempty"`
}

// Error is the socket error frame: ID echoes a subscribe or roster
// request, Cause names the command or event refused.
type Error struct {
	Type     string          `json:"type"`
	ID       json.RawMessage `json:"id,omitempty"`
	Cause    string          `json:"cause,omitempty"`
	Code     string          `json:"code"`
	Detail   string          `json:"detail,omitempty"`
	Versions []string        `json:"versions,omitempty"`
}

// ReplayExhausted reports that a resume position predates what a session's
// buffer holds; delivery resumes at Earliest (AEP-0003 §5).
type ReplayExhausted struct {
	Earliest Position `json:"earliest"`
	Session  string   `json:"session"`
	Sub      string   `json:"sub"`
	Type     string   `json:"type"`
}

// Closing announces an orderly close with each subscription's last
// delivered positions (AEP-0003 §3.5.4).
type Closing struct {
	Type      string      `json:"type"`
	Reason    string      `json:"reason"`
	Delivered []Delivered `json:"delivered"`
}

// Delivered is one subscription's last delivered position in a session.
type Delivered struct {
	Sub     string `json:"sub"`
	Session string `json:"session"`
	Epoch   int64  `json:"epoch"`
	Seq     int64  `json:"seq"`
}

// Ping and Pong are liveness frames; a pong echoes the ping's t.
type Ping struct {
	Type string          `json:"type"`
	T    json.RawMessage `json:"t,omitempty"`
}

// Pong answers a Ping.
type Pong struct {
	Type string          `json:"type"`
	T    json.RawMessage `json:"t,omitempty"`
}

func (f Event) Kind() string          { return f.Type }
func (f Unknown) Kind() string        { return f.Type }
func (*Hello) Kind() string           { return TypeHello }
func (*Subscribe) Kind() string       { return TypeSubscribe }
func (*Subscribed) Kind() string      { return TypeSubscribed }
func (*Unsubscribe) Kind() string     { return TypeUnsubscribe }
func (*Unsubscribed) Kind() string    { return TypeUnsubscribed }
func (*Roster) Kind() string          { return TypeRoster }
func (*Error) Kind() string           { return TypeError }
func (*ReplayExhausted) Kind() string { return TypeReplayExhausted }
func (*Closing) Kind() string         { return TypeClosing }
func (*Ping) Kind() string            { return TypePing }
func (*Pong) Kind() string            { return TypePong }

// Parse reads one text message. It fails only when the message is not a
// JSON object with a string type; everything else is for the caller to
// judge or ignore: an event comes back as Event (the caller parses the
// envelope), an unknown type as Unknown, and a mistyped member of a known
// frame is left zero.
func Parse(data []byte) (Frame, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, err
	}
	if strings.Contains(head.Type, ".") {
		return Event{Type: head.Type}, nil
	}
	var f Frame
	switch head.Type {
	case TypeHello:
		return parseHello(data), nil
	case TypeSubscribe:
		f = &Subscribe{}
	case TypeSubscribed:
		f = &Subscribed{}
	case TypeUnsubscribe:
		f = &Unsubscribe{}
	case TypeUnsubscribed:
		f = &Unsubscribed{}
	case TypeRoster:
		f = &Roster{}
	case TypeError:
		f = &Error{}
	case TypeReplayExhausted:
		f = &ReplayExhausted{}
	case TypeClosing:
		f = &Closing{}
	case TypePing:
		f = &Ping{}
	case TypePong:
		f = &Pong{}
	default:
		return Unknown{Type: head.Type}, nil
	}
	_ = json.Unmarshal(data, f) // lenient: a mistyped member stays zero
	return f, nil
}

// parseHello reads a hello member by member, so one malformed member
// never costs the others: an absent role is a consumer's, a role that is
// not a string reads as "", and capabilities keep what parses (§4 rule 4),
// with control and emits also kept verbatim when they are an object and
// an array.
func parseHello(data []byte) *Hello {
	h := &Hello{Type: TypeHello}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(data, &m)
	_ = json.Unmarshal(m["versions"], &h.Versions)
	h.Role = RoleConsumer
	if raw, ok := m["role"]; ok {
		h.Role = String(raw)
	}
	_ = json.Unmarshal(m["identity"], &h.Identity)
	if raw := m["auth"]; len(raw) > 0 && raw[0] == '{' {
		h.Auth = &HelloAuth{}
		_ = json.Unmarshal(raw, h.Auth)
	}
	var caps map[string]json.RawMessage
	_ = json.Unmarshal(m["capabilities"], &caps)
	c := &h.Capabilities
	_ = json.Unmarshal(caps["filters"], &c.Filters)
	_ = json.Unmarshal(caps["capture"], &c.Capture)
	if raw := caps["replay"]; len(raw) > 0 && raw[0] == '{' {
		c.Replay = &Replay{}
		_ = json.Unmarshal(raw, c.Replay)
	}
	if raw := caps["control"]; len(raw) > 0 && raw[0] == '{' {
		c.RawControl = raw
		c.Control = &Control{}
		_ = json.Unmarshal(raw, c.Control)
	}
	if raw := caps["emits"]; len(raw) > 0 && raw[0] == '[' {
		c.RawEmits = raw
		_ = json.Unmarshal(raw, &c.Emits)
	}
	if raw := caps["roster"]; len(raw) > 0 && raw[0] == '{' {
		c.Roster = &struct{}{}
	}
	if raw := caps["experimental"]; len(raw) > 0 && raw[0] == '{' {
		c.Experimental = raw
	}
	return h
}

// Offers reports whether the hello lists version v.
func (h *Hello) Offers(v string) bool {
	for _, x := range h.Versions {
		if x == v {
			return true
		}
	}
	return false
}

// NewHello is the hello this implementation sends: AEP 0.1 only.
func NewHello(role string, id Identity, caps Capabilities) *Hello {
	return &Hello{Type: TypeHello, Versions: []string{aep.Version}, Role: role, Identity: id, Capabilities: caps}
}

// internalError stands in for a frame that cannot be encoded.
const internalError = `{"type":"error","code":"internal","detail":"frame encoding failed"}`

// Encode renders f with its type member set (Encode sets f's Type field).
// A roster is written by hand so each entry's declared control and emits
// go out byte for byte (encoding/json would re-compact them).
func Encode(f Frame) []byte {
	switch f := f.(type) {
	case *Hello:
		f.Type = TypeHello
	case *Subscribe:
		f.Type = TypeSubscribe
	case *Subscribed:
		f.Type = TypeSubscribed
	case *Unsubscribe:
		f.Type = TypeUnsubscribe
	case *Unsubscribed:
		f.Type = TypeUnsubscribed
	case *Roster:
		return encodeRoster(f)
	case *Error:
		f.Type = TypeError
	case *ReplayExhausted:
		f.Type = TypeReplayExhausted
	case *Closing:
		f.Type = TypeClosing
	case *Ping:
		f.Type = TypePing
	case *Pong:
		f.Type = TypePong
	default:
		return []byte(internalError)
	}
	b, err := json.Marshal(f)
	if err != nil {
		return []byte(internalError)
	}
	return b
}

func encodeRoster(r *Roster) []byte {
	var b bytes.Buffer
	b.WriteString(`{"type":"roster","id":`)
	b.Write(marshal(r.ID))
	b.WriteString(`,"entries":[`)
	for i, e := range r.Entries {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"session":`)
		b.Write(marshal(e.Session))
		if e.Agent != "" {
			b.WriteString(`,"agent":`)
			b.Write(marshal(e.Agent))
		}
		if e.Instance != "" {
			b.WriteString(`,"instance":`)
			b.Write(marshal(e.Instance))
		}
		if e.Control != nil {
			b.WriteString(`,"control":`)
			b.Write(e.Control)
		}
		if e.Emits != nil {
			b.WriteString(`,"emits":`)
			b.Write(e.Emits)
		}
		b.WriteByte('}')
	}
	b.WriteString("]}")
	return b.Bytes()
}

func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte("null")
	}
	return b
}

// PingAt is the ping frame for time t, its t member in Unix milliseconds.
func PingAt(t time.Time) []byte {
	return []byte(`{"type":"ping","t":` + strconv.FormatInt(t.UnixMilli(), 10) + `}`)
}

// PongFor answers p, echoing its t.
func PongFor(p *Ping) []byte {
	return Encode(&Pong{T: p.T})
}

// ID renders a request id.
func ID(s string) json.RawMessage { return marshal(s) }

// String returns the JSON string raw holds, or "" when it holds anything
// else.
func String(raw json.RawMessage) string {
	var v string
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	return v
}
