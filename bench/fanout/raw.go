package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// raw is the floor: what any relay must do at the least to forward a
// posted batch to every open stream as SSE, and nothing else. A POST's
// lines are framed once, as the relay frames them (id session:epoch:seq,
// event type, data the line as sent), into one piece every stream shares;
// the piece goes into each stream's channel without blocking (a stream
// whose channel is full misses it, which its subscriber counts, and is
// never waited on); each stream's
// goroutine writes whatever its channel holds in one write and one flush,
// unchunked. No parsing beyond byte scans, no validation, no store.
type raw struct {
	mu      sync.RWMutex
	streams map[chan []byte]struct{}
}

// rawQueue is each stream's channel, in pieces (batches).
const rawQueue = 4096

func newRaw() http.Handler {
	f := &raw{streams: map[chan []byte]struct{}{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /events", f.events)
	mux.HandleFunc("GET /stream", f.stream)
	return mux
}

func (f *raw) events(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	piece := make([]byte, 0, len(body)+len(body)/3)
	for rest := body; len(rest) > 0; {
		var l []byte
		l, rest, _ = bytes.Cut(rest, []byte{'\n'})
		if len(l) == 0 {
			continue
		}
		piece = append(piece, "id: "...)
		piece = append(piece, strAfter(l, `"session":"`)...)
		piece = append(piece, ':')
		piece = strconv.AppendInt(piece, intAfter(l, `"epoch":`), 10)
		piece = append(piece, ':')
		piece = strconv.AppendInt(piece, intAfter(l, `"seq":`), 10)
		piece = append(piece, "\nevent: "...)
		piece = append(piece, strAfter(l, `"type":"`)...)
		piece = append(piece, "\ndata: "...)
		piece = append(piece, l...)
		piece = append(piece, "\n\n"...)
	}
	f.mu.RLock()
	for ch := range f.streams {
		select {
		case ch <- piece:
		default:
		}
	}
	f.mu.RUnlock()
	w.WriteHeader(http.StatusAccepted)
}

func (f *raw) stream(w http.ResponseWriter, r *http.Request) {
	ch := make(chan []byte, rawQueue)
	f.mu.Lock()
	f.streams[ch] = struct{}{}
	f.mu.Unlock()
	defer func() { f.mu.Lock(); delete(f.streams, ch); f.mu.Unlock() }()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Transfer-Encoding", "identity")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	out := bufio.NewWriterSize(w, 64<<10)
	for {
		select {
		case <-r.Context().Done():
			return
		case p := <-ch:
			_, _ = out.Write(p)
		more:
			for {
				select {
				case p := <-ch:
					_, _ = out.Write(p)
				default:
					break more
				}
			}
			if out.Flush() != nil || rc.Flush() != nil {
				return
			}
		}
	}
}

// strAfter reads the string after the first key (ending in a quote) in l
// up to its closing quote; empty when none.
func strAfter(l []byte, key string) []byte {
	i := bytes.Index(l, []byte(key))
	if i < 0 {
		return nil
	}
	rest := l[i+len(key):]
	if j := bytes.IndexByte(rest, '"'); j >= 0 {
		return rest[:j]
	}
	return nil
}
