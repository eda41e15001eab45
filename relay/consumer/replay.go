package consumer

import (
	"context"
	"errors"
	"fmt"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay/client"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// ReplayTimeout bounds one read of a relay's replay.
const ReplayTimeout = 15 * time.Second

// ErrUnreachable is returned by ReadReplay when the relay cannot be
// reached: unlike a tail, a one-pass read does not wait for it.
var ErrUnreachable = errors.New("unreachable")

// ReadReplay reads one replay pass of everything a relay holds (from=all,
// live=0) matching filter. The first failed connect is the answer
// (ErrUnreachable).
func ReadReplay(ctx context.Context, base, token, filter string) ([]*aep.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, ReplayTimeout)
	defer cancel()
	var evs []*aep.Event
	var unreachable error
	t, err := client.NewTailer(client.TailConfig{
		URL: base, Token: token, Filter: filter, From: wire.From{All: true},
		OnEvent: func(ev *aep.Event) { evs = append(evs, ev) },
		OnStatus: func(st client.TailStatus) {
			if st.Kind == client.TailUnreachable {
				unreachable = st.Err
				cancel()
			}
		},
	})
	if err != nil {
		return nil, err
	}
	if err := t.Run(ctx); err != nil {
		return nil, err
	}
	switch {
	case unreachable != nil:
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, unreachable)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("no complete replay within %s", ReplayTimeout)
	}
	return evs, nil
}

// LoadPending reads a relay's replay of the attention lifecycle
// (PendingFilter) and folds it; an error names the relay (without
// credentials).
func LoadPending(ctx context.Context, base, token string) (*Fold, error) {
	evs, err := ReadReplay(ctx, base, token, PendingFilter)
	if err != nil {
		return nil, fmt.Errorf("relay %s: %w", httpguard.DisplayURL(base), err)
	}
	f := &Fold{}
	for _, ev := range evs {
		f.Add(ev)
	}
	return f, nil
}
