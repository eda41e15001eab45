package spool

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRead feeds arbitrary record files to Read: a record is either whole
// (version 1 header, the rest verbatim as payload) or ErrCorrupt, and the
// payload is never altered.
func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"v":1,"seq":7,"delivery":"d1","at":"2026-11-29T00:00:00Z","reason":"unreachable"}` + "\n" + `{"hook_event_name":"Stop"}`))
	f.Add([]byte(`{"v":2}` + "\n{}"))
	f.Add([]byte("no header"))
	f.Add([]byte("\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "r"+Ext)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := Read(path)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Read of an existing file failed with %v, want ErrCorrupt", err)
			}
			return
		}
		if r.V != 1 {
			t.Fatalf("accepted header version %d", r.V)
		}
		i := bytes.IndexByte(b, '\n')
		if !bytes.Equal(r.Payload, b[i+1:]) {
			t.Fatalf("payload %q, want the bytes after the header %q", r.Payload, b[i+1:])
		}
	})
}
