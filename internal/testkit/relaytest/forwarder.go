package relaytest

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// Forwarder is the floor the relay benchmarks are measured against: lines
// POSTed to /events and frames sent on /socket (after a hello) go to every
// open /stream, framed as SSE the way the relay frames them. No parsing,
// validation, buffer or filter: each posted batch is framed once (the id
// line's seq read by a byte scan) and handed to every stream as one piece,
// and each stream writes everything handed to it since its last wake-up in
// one coalesced write and one flush. The benchmark in relay/ and the load
// tool in bench/relay share it so their baselines agree.
func Forwarder() http.Handler {
	f := &forwarder{subs: map[*mailbox]struct{}{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /events", f.events)
	mux.HandleFunc("GET /socket", f.socket)
	mux.HandleFunc("GET /stream", f.stream)
	return mux
}

type forwarder struct {
	mu   sync.Mutex
	subs map[*mailbox]struct{}
}

// mailbox is one stream's pending pieces and its wake-up.
type mailbox struct {
	mu      sync.Mutex
	pending [][]byte
	wake    chan struct{}
}

func (f *forwarder) fanout(piece []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for mb := range f.subs {
		mb.mu.Lock()
		mb.pending = append(mb.pending, piece)
		mb.mu.Unlock()
		select {
		case mb.wake <- struct{}{}:
		default:
		}
	}
}

// frame appends line framed as one SSE message, byte for byte as the relay
// frames a session event (TestForwarderFramesAsTheRelay): its id line names
// the event's session, epoch and seq, read by byte scans.
func frame(dst, line []byte) []byte {
	dst = append(dst, "id: "...)
	dst = append(dst, stringOf(line, `"session":"`)...)
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, intOf(line, `"epoch":`), 10)
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, intOf(line, `"seq":`), 10)
	dst = append(dst, "\nevent: tool.completed\ndata: "...)
	dst = append(dst, line...)
	return append(dst, "\n\n"...)
}

func (f *forwarder) events(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	piece := make([]byte, 0, len(body)+len(body)/4)
	for rest := body; len(rest) > 0; {
		var l []byte
		l, rest, _ = bytes.Cut(rest, []byte{'\n'})
		if len(l) > 0 {
			piece = frame(piece, l)
		}
	}
	if len(piece) > 0 {
		f.fanout(piece)
	}
	w.WriteHeader(http.StatusAccepted)
}

func (f *forwarder) socket(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx := r.Context()
	if _, _, err := c.Read(ctx); err != nil {
		return
	}
	if c.Write(ctx, websocket.MessageText, wire.Encode(wire.NewHello(wire.RoleBoth, wire.Identity{Agent: "forwarder"}, wire.Capabilities{}))) != nil {
		return
	}
	for {
		_, msg, err := c.Read(ctx)
		if err != nil {
			return
		}
		f.fanout(frame(nil, msg))
	}
}

func (f *forwarder) stream(w http.ResponseWriter, r *http.Request) {
	mb := &mailbox{wake: make(chan struct{}, 1)}
	f.mu.Lock()
	f.subs[mb] = struct{}{}
	f.mu.Unlock()
	defer func() { f.mu.Lock(); delete(f.subs, mb); f.mu.Unlock() }()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Transfer-Encoding", "identity") // unchunked, as the relay streams
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	out := bufio.NewWriterSize(w, 64<<10)
	var taken [][]byte
	for {
		select {
		case <-r.Context().Done():
			return
		case <-mb.wake:
			mb.mu.Lock()
			taken, mb.pending = mb.pending, taken[:0]
			mb.mu.Unlock()
			for i, p := range taken {
				_, _ = out.Write(p)
				taken[i] = nil
			}
			if out.Flush() != nil || rc.Flush() != nil {
				return
			}
		}
	}
}

// intOf reads the digits after the first key (such as "seq":) without
// decoding JSON; 0 when there is none.
func intOf(msg []byte, key string) int64 {
	i := bytes.Index(msg, []byte(key))
	if i < 0 {
		return 0
	}
	var n int64
	for _, c := range msg[i+len(key):] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// stringOf reads the unescaped string after the first key (such as
// "session":") up to its closing quote; empty when there is none.
func stringOf(msg []byte, key string) []byte {
	i := bytes.Index(msg, []byte(key))
	if i < 0 {
		return nil
	}
	rest := msg[i+len(key):]
	if j := bytes.IndexByte(rest, '"'); j >= 0 {
		return rest[:j]
	}
	return nil
}
