package consumer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/journal"
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
func ReadReplay(ctx context.Context, base, token string, hc *http.Client, filter string) ([]*aep.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, ReplayTimeout)
	defer cancel()
	var evs []*aep.Event
	var unreachable error
	t, err := client.NewTailer(client.TailConfig{
		URL: base, Token: token, Filter: filter, From: wire.From{All: true}, HTTPClient: hc,
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
func LoadPending(ctx context.Context, base, token string, hc *http.Client) (*Fold, error) {
	return loadFold(ctx, base, token, hc, PendingFilter)
}

// loadFold reads a relay's replay of what filter admits and folds it; an
// error names the relay (without credentials).
func loadFold(ctx context.Context, base, token string, hc *http.Client, filter string) (*Fold, error) {
	evs, err := ReadReplay(ctx, base, token, hc, filter)
	if err != nil {
		return nil, fmt.Errorf("relay %s: %w", httpguard.DisplayURL(base), err)
	}
	f := &Fold{}
	for _, ev := range evs {
		f.Add(ev)
	}
	return f, nil
}

// LogsRead is what LoadLogs read: files and events, lines that did not
// parse, and files it could not read (each error names its file).
type LogsRead struct {
	Files, Events, Skipped int
	Unreadable             []error
}

// LoadLogs folds the session logs (JSONL) in dir and in its directories one
// level down (so both $AEP_HOME/logs and $AEP_HOME/logs/kimi-code do): an
// emitter's own record of its sessions, no relay needed. Links are not
// followed. The error is for a dir that cannot be listed.
func LoadLogs(dir string) (*Fold, LogsRead, error) {
	var read LogsRead
	paths, err := logFiles(dir)
	if err != nil {
		return nil, read, err
	}
	f := &Fold{}
	for _, p := range paths {
		skipped, err := journal.Replay(p, math.MaxInt64, func(ev *aep.Event) {
			read.Events++
			f.Add(ev)
		})
		read.Skipped += skipped
		if err != nil {
			read.Unreadable = append(read.Unreadable, err)
			continue
		}
		read.Files++
	}
	return f, read, nil
}

// logFiles lists the .jsonl files in dir and its subdirectories, sorted.
func logFiles(dir string) ([]string, error) {
	top, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}
	var out []string
	for _, e := range top {
		p := filepath.Join(dir, e.Name())
		switch {
		case e.Type().IsRegular() && strings.HasSuffix(e.Name(), journal.LogExt):
			out = append(out, p)
		case e.IsDir():
			sub, err := os.ReadDir(p)
			if err != nil {
				return nil, fmt.Errorf("logs: %w", err)
			}
			for _, s := range sub {
				if s.Type().IsRegular() && strings.HasSuffix(s.Name(), journal.LogExt) {
					out = append(out, filepath.Join(p, s.Name()))
				}
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
