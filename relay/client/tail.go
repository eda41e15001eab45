package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/atomicfile"
	"github.com/aep-kimi/aep-kimi/internal/backoff"
	"github.com/aep-kimi/aep-kimi/internal/credreg"
	"github.com/aep-kimi/aep-kimi/internal/defaults"
	"github.com/aep-kimi/aep-kimi/internal/tlsconf"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// Tail defaults.
const (
	// DefaultTailDedupe is how many (source, id) keys a Tailer remembers.
	DefaultTailDedupe = 1 << 16
	// DefaultTailSessions is how many session positions a TailState keeps.
	DefaultTailSessions = 256
)

// TailConfig configures a Tailer.
type TailConfig struct {
	// URL is the relay's base URL; Token its bearer token.
	URL, Token string
	// Filter is attr-match JSON; Capture a ceiling name. Both optional.
	Filter, Capture string
	// From is the first connection's replay request. When empty, the
	// Tailer resumes from State's positions; From.All replays everything,
	// whatever State has seen. Every later connection asks for all, State
	// skipping what was shown.
	From wire.From
	// State holds the last position per session; the Tailer resumes from
	// it after every reconnect and skips events at or before it. Nil means
	// a fresh state.
	State *TailState
	// ReplayAll makes the first connection too ask for from=all, State
	// skipping what was already seen: a consumer that must not miss
	// sessions begun while it was away (a position list names only known
	// sessions) pays a full replay for it.
	ReplayAll bool
	// Live false makes one replay pass (live=0) and returns.
	Live bool
	// OnEvent receives each new event once: deduplicated on (source, id)
	// and never at or before a position already in State.
	OnEvent func(ev *aep.Event)
	// OnStatus receives connection news (see TailStatus).
	OnStatus func(TailStatus)

	HTTPClient *http.Client
	// BackoffMin and BackoffMax bound the reconnect delay; a stream that
	// stayed open for BackoffMax resets it (see internal/backoff).
	BackoffMin, BackoffMax time.Duration
	Dedupe                 int
}

// TailStatusKind names a connection event.
type TailStatusKind string

// Tail statuses: Connected once per successful connect; Unreachable when a
// connect fails (Attempt counts consecutive failures, 1 on the first);
// Exhausted for each replay-exhausted marker; Replayed when a live stream's
// replay is over (our relay's wire.ReplayedComment); Ended when the relay ends the
// stream (Detail says why: shutting-down, slow-consumer, or "").
const (
	TailConnected   TailStatusKind = "connected"
	TailUnreachable TailStatusKind = "unreachable"
	TailExhausted   TailStatusKind = "replay-exhausted"
	// TailReplayed: the connection's replay is over; live events follow.
	TailReplayed TailStatusKind = "replayed"
	TailEnded    TailStatusKind = "ended"
)

// TailStatus is one connection event.
type TailStatus struct {
	Kind    TailStatusKind
	Detail  string
	Attempt int
	Err     error
}

// TailError is a refusal no retry can fix (bad filter, bad token).
type TailError struct {
	Status int
	Code   string
	Detail string
}

func (e *TailError) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("relay refused the stream: HTTP %d %s: %s", e.Status, e.Code, e.Detail)
	}
	return fmt.Sprintf("relay refused the stream: HTTP %d %s", e.Status, e.Code)
}

// Tailer follows a relay's SSE stream and resumes exactly after every
// disconnect, from the last position it saw in each session.
type Tailer struct {
	cfg  TailConfig
	seen map[[2]string]struct{}
	fifo [][2]string
	// credentialEnded: the last stream ended because its token was revoked
	// or replaced. The next connection is tried at once, not after the
	// backoff, so a revoked token's refusal ends the tail within the
	// relay's 2 s (and a token whose role changed resumes at its new one).
	credentialEnded bool
	// floor: on a reconnection's replay of all, an event of a session
	// not shown before and older than this is history the tail was never
	// asked for (it began live, or from positions), and is skipped. Zero
	// when the first connection asked for all.
	floor time.Time
}

// tailClockSkew is how far an emitter's clock may lag this one's before a
// session it began just after the tail connected reads as older.
const tailClockSkew = 5 * time.Second

// NewTailer validates cfg.
func NewTailer(cfg TailConfig) (*Tailer, error) {
	u, err := url.Parse(cfg.URL)
	var base string
	if err == nil && u.Host != "" {
		// A socket URL names the same relay: its stream is the http(s) one.
		base, err = httpBase(u)
	}
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("relay URL %q is not an http(s) URL (nor ws(s)), e.g. %s", cfg.URL, DefaultURL)
	}
	cfg.URL = base
	if _, err := aep.ParseFilter([]byte(cfg.Filter)); err != nil {
		return nil, fmt.Errorf("tail: %w", err)
	}
	if cfg.Capture != "" {
		if _, err := aep.ParseCapture(cfg.Capture); err != nil {
			return nil, fmt.Errorf("tail: %w", err)
		}
	}
	if cfg.State == nil {
		cfg.State = NewTailState()
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	defaults.SetPositive(&cfg.BackoffMin, DefaultBackoffMin)
	defaults.SetPositive(&cfg.BackoffMax, DefaultBackoffMax)
	defaults.SetPositive(&cfg.Dedupe, DefaultTailDedupe)
	if cfg.OnEvent == nil {
		cfg.OnEvent = func(*aep.Event) {}
	}
	if cfg.OnStatus == nil {
		cfg.OnStatus = func(TailStatus) {}
	}
	return &Tailer{cfg: cfg, seen: make(map[[2]string]struct{})}, nil
}

// Run follows the stream until ctx ends (nil), a TailError, a relay
// certificate that does not verify, or, when not Live, the end of the
// replay.
func (t *Tailer) Run(ctx context.Context) error {
	bo := backoff.Backoff{Min: t.cfg.BackoffMin, Max: t.cfg.BackoffMax}
	first := true
	attempt, retriedAtOnce := 0, false
	for ctx.Err() == nil {
		from, shown := t.cfg.State.From(), t.cfg.State.shown()
		if first && !t.cfg.From.Empty() {
			from = t.cfg.From
			if from.All {
				shown = nil // all means all: what an earlier run showed too
			}
		}
		if t.cfg.ReplayAll || !first {
			// After a gap every held session is asked for, State skipping
			// what was shown: a position list names only the sessions
			// known, and one begun meanwhile (spooled while the relay was
			// down) would never be shown.
			from = wire.From{All: true}
		}
		start := time.Now()
		if first && !from.All {
			t.floor = start.Add(-tailClockSkew)
		}
		floor := time.Time{}
		if !first {
			floor = t.floor
		}
		connected, err := t.stream(ctx, from, shown, floor)
		var te *TailError
		switch {
		case errors.As(err, &te):
			return err
		case ctx.Err() != nil:
			return nil
		case connected:
			first = false
			attempt = 0
			bo.Up(time.Since(start))
			if !t.cfg.Live {
				return nil
			}
			if t.credentialEnded && !retriedAtOnce {
				retriedAtOnce = true // once: a relay ending every stream so still backs off
				continue
			}
			retriedAtOnce = false
		case tlsconf.CertError(err) != nil:
			// The same certificate fails the same way on every retry.
			return tlsconf.CertError(err)
		default:
			attempt++
			t.cfg.OnStatus(TailStatus{Kind: TailUnreachable, Attempt: attempt, Err: err})
		}
		if !backoff.Sleep(ctx, bo.NextAtLeast(backoff.Asked(err))) {
			return nil
		}
	}
	return nil
}

// stream runs one connection; connected reports whether the stream opened.
// shown holds the positions shown before it: the connection skips events at
// or before them (a replay's overlap with an earlier run) and shows every
// other event once, a late arrival below one it showed included.
func (t *Tailer) stream(ctx context.Context, from wire.From, shown map[string]wire.Position, floor time.Time) (connected bool, err error) {
	u, _ := url.Parse(strings.TrimSuffix(t.cfg.URL, "/") + "/stream")
	q := u.Query()
	if t.cfg.Filter != "" {
		q.Set("filter", t.cfg.Filter)
	}
	if t.cfg.Capture != "" {
		q.Set("capture", t.cfg.Capture)
	}
	switch {
	case from.All:
		q.Set("from", "all")
	case len(from.Positions) > 0:
		b, _ := json.Marshal(from.Positions)
		q.Set("from", string(b))
	}
	if !t.cfg.Live {
		q.Set("live", "0")
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if t.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+t.cfg.Token)
	}
	resp, err := t.cfg.HTTPClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is noise; the cause is what helps
		}
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var body wire.HTTPError
		_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body)
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			if body.Error == "" {
				// Not the relay's JSON refusal: most often a TLS server asked
				// in plain HTTP, whose own answer is a bare 400.
				body.Error = http.StatusText(resp.StatusCode)
				if resp.StatusCode == http.StatusBadRequest && u.Scheme == "http" {
					body.Detail = "not the relay's answer: if it serves TLS, use an https:// URL"
				}
			}
			return false, &TailError{Status: resp.StatusCode, Code: body.Error, Detail: body.Detail}
		}
		return false, backoff.Later(fmt.Errorf("HTTP %d %s", resp.StatusCode, body.Error), resp.Header)
	}
	t.cfg.OnStatus(TailStatus{Kind: TailConnected})
	r := NewSSEReader(resp.Body, 0)
	ended := ""
	for {
		it, err := r.Next()
		if err != nil {
			if ctx.Err() == nil {
				t.cfg.OnStatus(TailStatus{Kind: TailEnded, Detail: ended})
			}
			t.credentialEnded = ended == credreg.ReasonRevoked || ended == credreg.ReasonTokenChanged
			return true, nil
		}
		if it.IsComment {
			switch word, rest, _ := strings.Cut(it.Comment, " "); word {
			case "replay-exhausted":
				t.cfg.OnStatus(TailStatus{Kind: TailExhausted, Detail: rest})
			case wire.ReplayedComment:
				t.cfg.OnStatus(TailStatus{Kind: TailReplayed})
			case "shutting-down":
				ended = "shutting-down"
			case "slow-consumer:":
				ended = "slow-consumer"
			case credreg.ReasonRevoked, credreg.ReasonTokenChanged:
				ended = word
			}
			continue
		}
		t.handle(it, shown, floor)
	}
}

func (t *Tailer) handle(it SSEItem, shown map[string]wire.Position, floor time.Time) {
	ev, err := aep.ParseEvent([]byte(it.Data))
	if err != nil {
		return
	}
	if !floor.IsZero() {
		if _, known := shown[ev.Session]; !known {
			if at, err := time.Parse(time.RFC3339Nano, ev.Time); err == nil && at.Before(floor) {
				return // history from before the tail began, never asked for
			}
		}
	}
	key := [2]string{ev.Source, ev.ID}
	if _, dup := t.seen[key]; dup {
		return
	}
	t.seen[key] = struct{}{}
	t.fifo = append(t.fifo, key)
	if len(t.fifo) > t.cfg.Dedupe {
		delete(t.seen, t.fifo[0])
		t.fifo = t.fifo[1:]
	}
	if ev.Session != "" && ev.Seq != nil && aep.ScopeOf(ev.Type) == aep.ScopeSession {
		p := wire.Position{Epoch: ev.EpochOrZero(), Seq: *ev.Seq}
		if before, ok := shown[ev.Session]; ok && !before.Less(p) {
			return // at or before what an earlier connection or run showed
		}
		t.cfg.State.Advance(ev.Session, p)
	}
	t.cfg.OnEvent(ev)
}

// TailState is the last position seen per session, kept across runs in a
// JSON file. It is safe for concurrent use.
type TailState struct {
	mu        sync.Mutex
	max       int
	positions map[string]tailPos
	serial    uint64
	dirty     bool
}

type tailPos struct {
	wire.Position
	Updated time.Time `json:"updated"`
	// serial orders updates within this process (wall times can tie).
	serial uint64
}

type tailStateFile struct {
	Version   int                `json:"version"`
	Positions map[string]tailPos `json:"positions"`
}

// NewTailState returns an empty state keeping DefaultTailSessions sessions.
func NewTailState() *TailState {
	return &TailState{max: DefaultTailSessions, positions: make(map[string]tailPos)}
}

// LoadTailState reads a state file; a missing file is an empty state.
func LoadTailState(path string) (*TailState, error) {
	s := NewTailState()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("tail state: %w", err)
	}
	var f tailStateFile
	if err := json.Unmarshal(b, &f); err != nil {
		return s, fmt.Errorf("tail state %s is not valid JSON: %w", path, err)
	}
	names := make([]string, 0, len(f.Positions))
	for k, v := range f.Positions {
		if k != "" && v.Epoch >= 0 && v.Seq >= 0 {
			names = append(names, k)
		}
	}
	sort.Slice(names, func(i, j int) bool { return f.Positions[names[i]].Updated.Before(f.Positions[names[j]].Updated) })
	for _, k := range names {
		v := f.Positions[k]
		s.serial++
		v.serial = s.serial
		s.positions[k] = v
	}
	s.prune()
	return s, nil
}

// Advance records p for session unless it is at or before the held
// position; it reports whether p was new.
func (s *TailState) Advance(session string, p wire.Position) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.positions[session]; ok && !cur.Less(p) {
		return false
	}
	s.serial++
	s.positions[session] = tailPos{Position: p, Updated: time.Now().UTC(), serial: s.serial}
	s.dirty = true
	if len(s.positions) > s.max {
		s.prune()
	}
	return true
}

// shown returns a copy of the held positions.
func (s *TailState) shown() map[string]wire.Position {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]wire.Position, len(s.positions))
	for k, v := range s.positions {
		out[k] = v.Position
	}
	return out
}

// From returns the positions as a resume request, most recent first.
func (s *TailState) From() wire.From {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := wire.From{}
	for k, v := range s.positions {
		out.Positions = append(out.Positions, wire.Resume{Session: k, Position: v.Position})
	}
	sort.Slice(out.Positions, func(i, j int) bool {
		return s.positions[out.Positions[i].Session].serial > s.positions[out.Positions[j].Session].serial
	})
	return out
}

// prune keeps the max most recently updated sessions. The caller holds mu
// (or owns s exclusively).
func (s *TailState) prune() {
	if len(s.positions) <= s.max {
		return
	}
	names := make([]string, 0, len(s.positions))
	for k := range s.positions {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return s.positions[names[i]].serial > s.positions[names[j]].serial })
	for _, k := range names[s.max:] {
		delete(s.positions, k)
	}
}

// Save writes the state atomically (temp file, fsync, rename) when it
// changed since the last save.
func (s *TailState) Save(path string) error {
	s.mu.Lock()
	if !s.dirty {
		s.mu.Unlock()
		return nil
	}
	b, err := json.MarshalIndent(tailStateFile{Version: 1, Positions: s.positions}, "", "  ")
	s.dirty = false
	s.mu.Unlock()
	if err == nil {
		err = os.MkdirAll(filepath.Dir(path), 0o700)
	}
	if err == nil {
		err = atomicfile.Write(path, append(b, '\n'), atomicfile.Options{})
	}
	if errors.Is(err, atomicfile.ErrDirSync) {
		err = nil // the state is in place; only its survival of a power loss is unsure
	}
	if err != nil {
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
		return fmt.Errorf("tail state: %w", err)
	}
	return nil
}
