package relaytest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// Forwarder is the floor the relay benchmarks are measured against: lines
// POSTed to /events and frames sent on /socket (after a hello) go to every
// open /stream through blocking channels, framed as SSE the way the relay
// frames them. No parsing, validation, buffer or filter. The benchmark in
// relay/ and the load tool in bench/relay share it so their baselines agree.
func Forwarder() http.Handler {
	f := &forwarder{subs: map[chan []byte]struct{}{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /events", f.events)
	mux.HandleFunc("GET /socket", f.socket)
	mux.HandleFunc("GET /stream", f.stream)
	return mux
}

type forwarder struct {
	mu   sync.Mutex
	subs map[chan []byte]struct{}
}

func (f *forwarder) fanout(msg []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs {
		ch <- msg
	}
}

func (f *forwarder) events(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	for rest := body; len(rest) > 0; {
		var l []byte
		l, rest, _ = bytes.Cut(rest, []byte{'\n'})
		if len(l) > 0 {
			f.fanout(l)
		}
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
		f.fanout(msg)
	}
}

func (f *forwarder) stream(w http.ResponseWriter, r *http.Request) {
	ch := make(chan []byte, 4096)
	f.mu.Lock()
	f.subs[ch] = struct{}{}
	f.mu.Unlock()
	defer func() { f.mu.Lock(); delete(f.subs, ch); f.mu.Unlock() }()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	out := bufio.NewWriterSize(w, 64<<10)
	for {
		select {
		case <-r.Context().Done():
			return
		case msg := <-ch:
			for {
				fmt.Fprintf(out, "id: s:0:%d\nevent: tool.completed\ndata: ", seqOf(msg))
				_, _ = out.Write(msg)
				_, _ = out.WriteString("\n\n")
				if len(ch) == 0 {
					break
				}
				msg = <-ch
			}
			if out.Flush() != nil || rc.Flush() != nil {
				return
			}
		}
	}
}

// seqOf reads the digits after the first "seq": without decoding JSON.
func seqOf(msg []byte) int64 {
	i := bytes.Index(msg, []byte(`"seq":`))
	if i < 0 {
		return 0
	}
	var n int64
	for _, c := range msg[i+6:] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int64(c-'0')
	}
	return n
}
