package logging

import (
	"io"
	"sync"
)

// maxHeld bounds what a Held keeps before its release: past it, what was
// held is written and everything after goes straight through.
const maxHeld = 64 << 10

// Held is a writer that keeps what is written until Release, then writes
// it and everything after straight through: `aep-kimi up` releases its
// log after the banner, so the banner is the first thing it prints.
type Held struct {
	mu       sync.Mutex
	w        io.Writer
	buf      []byte
	released bool
}

// NewHeld holds what is written for w.
func NewHeld(w io.Writer) *Held { return &Held{w: w} }

func (h *Held) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return h.w.Write(p)
	}
	h.buf = append(h.buf, p...)
	if len(h.buf) > maxHeld {
		h.releaseLocked()
	}
	return len(p), nil
}

// Release writes what was held and lets the rest through; it may be
// called more than once.
func (h *Held) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.releaseLocked()
}

func (h *Held) releaseLocked() {
	if h.released {
		return
	}
	h.released = true
	if len(h.buf) > 0 {
		h.w.Write(h.buf) //nolint:errcheck // the log's writer is gone: nothing to tell
	}
	h.buf = nil
}
