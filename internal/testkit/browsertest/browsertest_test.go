package browsertest

import (
	"context"
	"errors"
	"fmt"
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
