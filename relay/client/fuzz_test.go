package client_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/relay/client"
)

func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("id: s:0:1\nevent: progress.status\ndata: {}\n\n: ping\n\n"))
	f.Add([]byte("data: a\r\ndata: b\r\n\r\nretry: 3000\n\n:c\n"))
	f.Add([]byte("data\n\nid\x00: x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := client.NewSSEReader(bytes.NewReader(b), 1024)
		for range len(b) + 1 {
			it, err := r.Next()
			if err != nil {
				return
			}
			if it.IsComment && (it.Data != "" || it.Event != "") {
				t.Fatalf("comment with fields: %+v", it)
			}
			if strings.ContainsAny(it.Event, "\n") || strings.ContainsAny(it.ID, "\n\x00") {
				t.Fatalf("field spans lines: %+v", it)
			}
		}
		t.Fatal("more items than input bytes")
	})
}
