package consumer

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay/client"
)

// DefaultSaveEvery bounds how stale a Follower's saved position can be
// while it runs.
const DefaultSaveEvery = time.Second

// FollowConfig configures a Follower.
type FollowConfig struct {
	// Tail configures the stream; its OnEvent and OnStatus are the
	// Follower's own.
	Tail    client.TailConfig
	Printer *Printer
	// Relay names the relay in reports (without credentials).
	Relay string
	// Save persists the resume position (nil: not kept), at most every
	// SaveEvery (0: DefaultSaveEvery) and when the stream ends.
	Save      func() error
	SaveEvery time.Duration
	// Report receives one line per change worth telling a person: the
	// relay unreachable (once until it is back), back, ending the stream,
	// a failed save. Nil drops them.
	Report func(msg string)
}

// Follower prints a relay's stream as a timeline: each event through the
// Printer as it arrives, connection news through Report, and the resume
// position through Save.
type Follower struct {
	cfg         FollowConfig
	tailer      *client.Tailer
	lastSave    time.Time
	unreachable bool
	// A one-pass run (not Tail.Live) does not wait for a relay it cannot
	// reach: the first failed connect stops it (stop) and is its answer
	// (gone), as it is for pending and audit.
	stop context.CancelFunc
	gone error
}

// NewFollower checks cfg (the relay URL, filter and capture) and returns a
// Follower ready to run.
func NewFollower(cfg FollowConfig) (*Follower, error) {
	if cfg.SaveEvery <= 0 {
		cfg.SaveEvery = DefaultSaveEvery
	}
	if cfg.Report == nil {
		cfg.Report = func(string) {}
	}
	f := &Follower{cfg: cfg}
	// A replay shows requests long answered: their answer lines wait
	// until it ends (TailReplayed) and then only for those still open.
	cfg.Printer.Hold()
	tc := cfg.Tail
	tc.OnEvent, tc.OnStatus = f.onEvent, f.onStatus
	t, err := client.NewTailer(tc)
	if err != nil {
		return nil, err
	}
	f.tailer = t
	return f, nil
}

// Run follows until ctx ends or, without Tail.Live, the replay is done.
func (f *Follower) Run(ctx context.Context) error {
	ctx, f.stop = context.WithCancel(ctx)
	defer f.stop()
	err := f.tailer.Run(ctx)
	f.cfg.Printer.Live()
	f.save(true)
	if err == nil && f.gone != nil {
		return fmt.Errorf("relay %s unreachable: %w", f.cfg.Relay, f.gone)
	}
	return err
}

func (f *Follower) save(force bool) {
	if f.cfg.Save == nil || (!force && time.Since(f.lastSave) < f.cfg.SaveEvery) {
		return
	}
	f.lastSave = time.Now()
	if err := f.cfg.Save(); err != nil {
		f.cfg.Report(err.Error())
	}
}

func (f *Follower) onEvent(ev *aep.Event) {
	f.cfg.Printer.Print(ev)
	f.save(false)
}

func (f *Follower) onStatus(st client.TailStatus) {
	switch st.Kind {
	case client.TailUnreachable:
		if !f.cfg.Tail.Live {
			f.gone = st.Err
			f.stop()
			return
		}
		if !f.unreachable {
			f.unreachable = true
			f.cfg.Report(fmt.Sprintf("relay %s unreachable (%v); retrying with backoff", f.cfg.Relay, st.Err))
		}
	case client.TailConnected:
		if f.unreachable {
			f.unreachable = false
			f.cfg.Report("connected to " + f.cfg.Relay)
		}
	case client.TailReplayed:
		f.cfg.Printer.Live()
	case client.TailExhausted:
		f.cfg.Printer.Notice("replay exhausted: " + f.cfg.Printer.describeExhausted(st.Detail))
	case client.TailEnded:
		f.save(true)
		if f.cfg.Tail.Live {
			why := "stream ended"
			if st.Detail != "" {
				why = "relay ended the stream (" + st.Detail + ")"
			}
			f.cfg.Report(why + "; resuming")
		}
	}
}

// describeExhausted says which session's replay fell short, by its label's
// short id.
func (p *Printer) describeExhausted(detail string) string {
	session, earliest, ok := strings.Cut(detail, " ")
	if !ok {
		return detail
	}
	return fmt.Sprintf("session %s holds nothing older than %s; earlier events are gone from the relay", p.label(session).ID, earliest)
}
