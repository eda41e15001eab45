package notify

import (
	"testing"

	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// A button reads as words: an option's label, or at a ceiling that kept
// only its id, the id in words (Kimi's allow_session was "Allow_session").
func TestOptionLabel(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		o    consumer.Option
		want string
	}{
		{consumer.Option{ID: "allow_session", Label: "Allow for this session"}, "Allow for this session"},
		{consumer.Option{ID: "allow_session"}, "Allow session"},
		{consumer.Option{ID: "deny", Label: "deny"}, "Deny"},
		{consumer.Option{ID: "always-allow"}, "Always allow"},
	} {
		if got := optionLabel(c.o); got != c.want {
			t.Errorf("optionLabel(%+v) = %q, want %q", c.o, got, c.want)
		}
	}
}
