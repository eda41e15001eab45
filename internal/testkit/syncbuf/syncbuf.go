// Package syncbuf is a bytes.Buffer safe for concurrent use: what a child
// process or a server's goroutines write while a test reads it.
package syncbuf

import (
	"bytes"
	"io"
	"sync"
)

// Buffer collects writes from any goroutine; the zero value is ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what has been written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Writer serializes writes into W from any goroutine; read W only once the
// writers have stopped.
type Writer struct {
	mu sync.Mutex
	W  io.Writer
}

func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.W.Write(p)
}
