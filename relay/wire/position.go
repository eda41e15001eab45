package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Position is a place in one session's order (AEP-0001 §7): events are
// totally ordered by (Epoch, Seq), lexicographically.
type Position struct {
	Epoch int64 `json:"epoch"`
	Seq   int64 `json:"seq"`
}

// Less reports whether p comes strictly before q.
func (p Position) Less(q Position) bool {
	return p.Epoch < q.Epoch || p.Epoch == q.Epoch && p.Seq < q.Seq
}

// String renders p as "epoch:seq", the form of the replay-exhausted comment.
func (p Position) String() string {
	return strconv.FormatInt(p.Epoch, 10) + ":" + strconv.FormatInt(p.Seq, 10)
}

// Resume is one resume token: deliver what follows Pos in Session.
type Resume struct {
	Session string `json:"session"`
	Position
}

// From is a parsed resume request: either All (replay every held session from
// its earliest held event) or a list of positions, at most one per session.
type From struct {
	All       bool
	Positions []Resume
}

// Empty reports whether f asks for no replay at all.
func (f From) Empty() bool { return !f.All && len(f.Positions) == 0 }

// ErrInvalidFrom wraps every malformed resume request. It maps onto the
// closed invalid-filter refusal (AEP-0003 §6.5: a malformed from member).
var ErrInvalidFrom = errors.New("invalid from")

// ParseFrom parses the SSE from parameter or the WS subscribe.from member: the
// literal all (bare, or as the JSON string "all"), or a JSON array of
// {session, epoch, seq} objects. Session is a non-empty string, seq an
// integer >= 0, epoch an integer >= 0 that defaults to 0. A session named
// twice keeps its last position. Empty input means no replay.
func ParseFrom(b []byte) (From, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return From{}, nil
	}
	if string(b) == "all" || string(b) == `"all"` {
		return From{All: true}, nil
	}
	if b[0] != '[' {
		return From{}, fmt.Errorf(`%w: want the string "all" or an array of {session, epoch, seq}`, ErrInvalidFrom)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return From{}, fmt.Errorf("%w: %v", ErrInvalidFrom, err)
	}
	out := From{Positions: make([]Resume, 0, len(raw))}
	index := make(map[string]int, len(raw))
	for i, item := range raw {
		r, err := parseResume(item)
		if err != nil {
			return From{}, fmt.Errorf("%w: position %d: %v", ErrInvalidFrom, i, err)
		}
		if j, dup := index[r.Session]; dup {
			out.Positions[j] = r
			continue
		}
		index[r.Session] = len(out.Positions)
		out.Positions = append(out.Positions, r)
	}
	return out, nil
}

func parseResume(item json.RawMessage) (Resume, error) {
	var m map[string]json.RawMessage
	if len(item) == 0 || item[0] != '{' || json.Unmarshal(item, &m) != nil {
		return Resume{}, errors.New("not an object")
	}
	var r Resume
	sess, ok := m["session"]
	if !ok || json.Unmarshal(sess, &r.Session) != nil || r.Session == "" {
		return Resume{}, errors.New("session must be a non-empty string")
	}
	seq, ok := m["seq"]
	if !ok {
		return Resume{}, errors.New("seq is required")
	}
	var err error
	if r.Seq, err = jsonNonNegInt(seq); err != nil {
		return Resume{}, fmt.Errorf("seq %v", err)
	}
	if ep, ok := m["epoch"]; ok {
		if r.Epoch, err = jsonNonNegInt(ep); err != nil {
			return Resume{}, fmt.Errorf("epoch %v", err)
		}
	}
	return r, nil
}

// jsonNonNegInt reads a JSON integer >= 0 (3.0 counts, as in JSON Schema).
func jsonNonNegInt(v json.RawMessage) (int64, error) {
	s := string(bytes.TrimSpace(v))
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != float64(int64(f)) {
			return 0, errors.New("must be an integer")
		}
		n = int64(f)
	}
	if n < 0 {
		return 0, errors.New("must be >= 0")
	}
	return n, nil
}

// ParseEventID parses an SSE id (and so a Last-Event-ID header) of the form
// session:epoch:seq. The session may itself contain colons: the last two
// fields are the position.
func ParseEventID(id string) (Resume, error) {
	j := strings.LastIndexByte(id, ':')
	if j <= 0 {
		return Resume{}, fmt.Errorf("%w: Last-Event-ID %q is not session:epoch:seq", ErrInvalidFrom, id)
	}
	i := strings.LastIndexByte(id[:j], ':')
	if i <= 0 {
		return Resume{}, fmt.Errorf("%w: Last-Event-ID %q is not session:epoch:seq", ErrInvalidFrom, id)
	}
	epoch, err1 := strconv.ParseInt(id[i+1:j], 10, 64)
	seq, err2 := strconv.ParseInt(id[j+1:], 10, 64)
	if err1 != nil || err2 != nil || epoch < 0 || seq < 0 {
		return Resume{}, fmt.Errorf("%w: Last-Event-ID %q has no integer epoch:seq", ErrInvalidFrom, id)
	}
	return Resume{Session: id[:i], Position: Position{Epoch: epoch, Seq: seq}}, nil
}

// EventID formats the SSE id of a positioned event.
func EventID(session string, p Position) string {
	return session + ":" + p.String()
}
