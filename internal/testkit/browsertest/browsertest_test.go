package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto"
)

// Only Chromium's lost-context answer, however wrapped, makes Within poll
// again; any other failure, a timeout included, ends the wait.
func TestLostContext(t *testing.T) {
	lost := &cdproto.Error{Code: -32000, Message: "Cannot find context with specified id"}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{lost, true},
		{fmt.Errorf("poll: %w", lost), true},
		{&cdproto.Error{Code: -32000, Message: "Object reference chain is too long"}, false},
		{errors.New("Cannot find context with specified id"), false},
		{context.DeadlineExceeded, false},
	} {
		if got := lostContext(c.err); got != c.want {
			t.Errorf("lostContext(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// A Chromium that fails to start is tried startAttempts times, and the
// error says so; each try's profile is removed.
func TestStartRetriesAFailedStart(t *testing.T) {
	dir := t.TempDir()
	count := filepath.Join(dir, "starts")
	bin := filepath.Join(dir, "chromium")
	script := "#!/bin/sh\necho x >> " + count + "\necho 'crashed' >&2\nexit 1\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, _, err := start(bin, 0, 0)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d starts", startAttempts)) {
		t.Fatalf("start of a browser that always fails: %v, want an error naming %d starts", err, startAttempts)
	}
	b, rerr := os.ReadFile(count)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if n := strings.Count(string(b), "x"); n != startAttempts {
		t.Fatalf("the browser was started %d times, want %d", n, startAttempts)
	}
}
