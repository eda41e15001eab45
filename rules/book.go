package rules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/atomicfile"
	"github.com/aep-kimi/aep-kimi/internal/defaults"
	"github.com/aep-kimi/aep-kimi/internal/periodic"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
)

// FileName is the rules file's name in the relay's home.
const FileName = "rules.json"

// DefaultPoll is how often a Book looks at its file for a change.
const DefaultPoll = time.Second

// Errors of Book's changes.
var (
	// ErrNotFound: no rule has that id.
	ErrNotFound = errors.New("no rule with that id")
	// ErrInvalid: the rule given is not valid (the wrapped error says why).
	ErrInvalid = errors.New("invalid rule")
	// ErrFile: the file on disk cannot be read or parsed, so it cannot be
	// changed without losing what is in it; fix it first.
	ErrFile = errors.New("the rules file cannot be used")
)

// Config configures a Book.
type Config struct {
	// Path is the rules file (FileName under the relay's home). Empty: no
	// file, no rules.
	Path string
	// Logger receives loads and load failures; nil discards them.
	Logger *slog.Logger
	// Poll is how often the file is checked for a change (Watch).
	Poll time.Duration
	// Now is the clock of use times; nil is time.Now.
	Now func() time.Time
}

// Book is the fleet's rules: the file, the last good set parsed from it,
// and each rule's use counts. A change on disk is picked up by Watch; a
// file that stops parsing keeps the last good set in force, and Status
// says why. Add and Remove change the file itself (0600, replaced
// atomically), never through a symbolic link. Safe for concurrent use.
type Book struct {
	cfg Config

	// mu serializes loads and changes; live is read without it.
	mu   sync.Mutex
	live atomic.Pointer[snapshot]

	usesMu    sync.Mutex
	uses      map[string]*Use
	usesDirty bool // uses changed since they were last written
}

// snapshot is what the last look at the file found.
type snapshot struct {
	set    *Set
	err    error       // why the file on disk is not in force (nil: it is)
	info   fs.FileInfo // the file as last read (nil: absent)
	loaded time.Time   // when set was read
	// pending is the file as the last look saw it, when that differs from
	// info: a change waiting to hold still for one look.
	pending fs.FileInfo
}

// Use is one rule's record of use.
type Use struct {
	// Uses counts the requests the rule decided (allow, deny) or kept for
	// a person (ask).
	Uses uint64 `json:"uses"`
	// LastUse is the latest of them (zero: never).
	LastUse time.Time `json:"last_use,omitzero"`
	// Unknowable counts requests the rule could not be checked against (a
	// fact it needs was not on the stream) while it mattered.
	Unknowable uint64 `json:"unknowable,omitempty"`
}

// Open loads the rules file at cfg.Path. It never fails: a missing file
// holds no rules, and a bad one leaves none in force with the reason in
// Status and the log.
func Open(cfg Config) *Book {
	defaults.Set(&cfg.Logger, slog.New(slog.DiscardHandler))
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	defaults.SetPositive(&cfg.Poll, DefaultPoll)
	b := &Book{cfg: cfg, uses: map[string]*Use{}}
	b.live.Store(&snapshot{set: &Set{}})
	b.mu.Lock()
	b.reloadLocked(true)
	b.mu.Unlock()
	b.readUses()
	return b
}

// UsesPath is where a Book keeps its rules' use counts: beside the rules
// file, so a relay restart keeps them.
func (b *Book) UsesPath() string {
	if b.cfg.Path == "" {
		return ""
	}
	return strings.TrimSuffix(b.cfg.Path, filepath.Ext(b.cfg.Path)) + ".uses.json"
}

// readUses loads the use counts written before; a missing or unreadable
// file starts them at zero (said in the log when it is unreadable).
func (b *Book) readUses() {
	path := b.UsesPath()
	if path == "" {
		return
	}
	data, err := safefile.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	uses := map[string]*Use{}
	if err == nil {
		err = json.Unmarshal(data, &uses)
	}
	if err != nil {
		b.cfg.Logger.Warn("rule use counts not read; they start again at zero", "path", path, "err", err)
		return
	}
	b.usesMu.Lock()
	defer b.usesMu.Unlock()
	for id, u := range uses {
		if u != nil {
			b.uses[id] = u
		}
	}
}

// writeUses writes the use counts of the rules in force when they changed.
func (b *Book) writeUses() {
	path := b.UsesPath()
	if path == "" {
		return
	}
	b.usesMu.Lock()
	if !b.usesDirty {
		b.usesMu.Unlock()
		return
	}
	keep := map[string]Use{}
	for _, r := range b.Set().Rules() {
		if u := b.uses[r.ID]; u != nil {
			keep[r.ID] = *u
		}
	}
	b.usesDirty = false
	b.usesMu.Unlock()
	data, _ := json.Marshal(keep) // numbers and times: cannot fail
	if err := atomicfile.Write(path, data, atomicfile.Options{NoSync: true}); err != nil {
		b.cfg.Logger.Warn("rule use counts not written", "path", path, "err", err)
		b.usesMu.Lock()
		b.usesDirty = true
		b.usesMu.Unlock()
	}
}

// Path is the rules file.
func (b *Book) Path() string { return b.cfg.Path }

// Set is the rules in force.
func (b *Book) Set() *Set { return b.live.Load().set }

// Watch reloads the file whenever it changes and writes the use counts
// when they changed, until ctx ends (then it writes them a last time).
func (b *Book) Watch(ctx context.Context) {
	periodic.Every(ctx, b.cfg.Poll, func() { b.Reload(); b.writeUses() })
	b.writeUses()
}

// Reload reads the file if it changed since the last look and has stayed
// as it is since the look before: a file being written in place is read
// once it is whole, not half-written (which could look like no rules).
func (b *Book) Reload() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reloadLocked(false)
}

// reloadLocked looks at the file; now loads a change at once (the Book's
// own atomic write) instead of waiting for it to settle.
func (b *Book) reloadLocked(now bool) {
	prev := b.live.Load()
	info, err := b.stat()
	if err == nil && sameFile(prev.info, info) {
		if prev.err == nil || info != nil {
			return // unchanged
		}
	}
	if !now && err == nil && !sameFile(prev.pending, info) {
		next := *prev
		next.pending = info
		b.live.Store(&next)
		return // changed: read it once it holds still
	}
	var set *Set
	if err == nil {
		set, err = b.read(info)
	}
	next := &snapshot{set: prev.set, err: err, info: info, pending: info, loaded: prev.loaded}
	if err == nil {
		next.set, next.loaded = set, b.cfg.Now()
		b.cfg.Logger.Info("rules loaded", "path", b.cfg.Path, "rules", set.Len())
	} else if prev.err == nil || prev.err.Error() != err.Error() {
		b.cfg.Logger.Warn("rules file refused; the last good rules stay in force",
			"path", b.cfg.Path, "rules_in_force", prev.set.Len(), "err", err)
	}
	b.live.Store(next)
}

// stat looks at the file without following a link: nil info when absent.
func (b *Book) stat() (fs.FileInfo, error) {
	if b.cfg.Path == "" {
		return nil, nil
	}
	info, err := os.Lstat(b.cfg.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("rules file %s: %w", b.cfg.Path, err)
	case info.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("rules file %s is a symbolic link: refused (a rule decides what agents may run; keep a regular file there)", b.cfg.Path)
	case !info.Mode().IsRegular():
		return nil, fmt.Errorf("rules file %s is not a regular file", b.cfg.Path)
	case runtime.GOOS != "windows" && info.Mode().Perm()&0o022 != 0:
		return nil, fmt.Errorf("rules file %s is writable by others (mode %04o): refused; chmod 600 it", b.cfg.Path, info.Mode().Perm())
	}
	return info, nil
}

// read parses the file info describes (nil: absent, no rules).
func (b *Book) read(info fs.FileInfo) (*Set, error) {
	if info == nil {
		return &Set{}, nil
	}
	if info.Size() > MaxFileBytes {
		return nil, fmt.Errorf("rules file %s: larger than %d bytes", b.cfg.Path, MaxFileBytes)
	}
	data, err := safefile.ReadFile(b.cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("rules file %s: %w", b.cfg.Path, err)
	}
	set, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("rules file %s: %w", b.cfg.Path, err)
	}
	return set, nil
}

// sameFile reports whether two looks saw one unchanged file.
func sameFile(a, b fs.FileInfo) bool {
	if a == nil || b == nil {
		return a == b
	}
	return os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
}

// Status is the rules file's state for /healthz and `rules list`.
type Status struct {
	Path string `json:"path"`
	// Rules is the number of rules in force.
	Rules int `json:"rules"`
	// OK is false when the file on disk is refused; Error says why, and
	// the last good rules (loaded at Loaded) stay in force.
	OK     bool      `json:"ok"`
	Error  string    `json:"error,omitempty"`
	Loaded time.Time `json:"loaded,omitzero"`
}

// Status reports the file's state.
func (b *Book) Status() Status {
	s := b.live.Load()
	st := Status{Path: b.cfg.Path, Rules: s.set.Len(), OK: s.err == nil, Loaded: s.loaded}
	if s.err != nil {
		st.Error = s.err.Error()
	}
	return st
}

// Evaluate applies the rules in force to req and records the outcome
// against the rule that decided (or kept it for a person, or could not be
// checked). trace fills Verdict.Trace.
func (b *Book) Evaluate(req Request, trace bool) Verdict {
	return b.Set().Evaluate(req, trace)
}

// Record counts a verdict the caller acted on at at: a use of its deciding
// rule, or an unknowable check of the rule that held it for a person.
func (b *Book) Record(v Verdict, at time.Time) {
	b.usesMu.Lock()
	defer b.usesMu.Unlock()
	if v.Rule != nil {
		u := b.useLocked(v.Rule.ID)
		u.Uses++
		u.LastUse = at
		b.usesDirty = true
	}
	if v.Held != nil {
		b.useLocked(v.Held.ID).Unknowable++
		b.usesDirty = true
	}
}

func (b *Book) useLocked(id string) *Use {
	u := b.uses[id]
	if u == nil {
		u = &Use{}
		b.uses[id] = u
	}
	return u
}

// Listed is one rule in force with its record of use.
type Listed struct {
	Rule
	Use
	// Hidden says Args and Project were blanked for a reader below the
	// redacted capture ceiling (API.Hide): the rule has its own, unread.
	Hidden bool `json:"hidden,omitempty"`
}

// hide blanks what a rule quotes of commands and directories.
func (l *Listed) hide() {
	if l.Args != "" || l.Project != "" {
		l.Args, l.Project, l.Hidden = "", "", true
	}
}

// List returns the rules in force, in file order, with their use.
func (b *Book) List() []Listed {
	rules := b.Set().Rules()
	b.usesMu.Lock()
	defer b.usesMu.Unlock()
	out := make([]Listed, len(rules))
	for i, r := range rules {
		out[i].Rule = r
		if u := b.uses[r.ID]; u != nil {
			out[i].Use = *u
		}
	}
	return out
}

// Add appends r to the file and returns it as stored: a fresh id when it
// has none, Created set. It fails with ErrInvalid (r is not a valid rule,
// or its id is taken) or ErrFile (the file on disk cannot be used).
func (b *Book) Add(r Rule) (Rule, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rules, err := b.current()
	if err != nil {
		return Rule{}, err
	}
	taken := map[string]bool{}
	for _, x := range rules {
		taken[x.ID] = true
	}
	if r.ID == "" {
		for r.ID = NewID(); taken[r.ID]; r.ID = NewID() {
		}
	} else if taken[r.ID] {
		return Rule{}, fmt.Errorf("%w: id %q is already used", ErrInvalid, r.ID)
	}
	if r.Created == "" {
		r.Created = b.cfg.Now().UTC().Format(time.RFC3339)
	}
	if _, err := check(r, len(rules)); err != nil {
		var pe *ParseError
		if errors.As(err, &pe) {
			pe.Rule, pe.ID = 0, ""
		}
		return Rule{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := b.write(append(rules, r)); err != nil {
		return Rule{}, err
	}
	return r, nil
}

// Remove deletes the rule with id from the file (ErrNotFound when none
// has it; ErrFile when the file on disk cannot be used).
func (b *Book) Remove(id string) (Rule, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rules, err := b.current()
	if err != nil {
		return Rule{}, err
	}
	i := slices.IndexFunc(rules, func(r Rule) bool { return r.ID == id })
	if i < 0 {
		return Rule{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	gone := rules[i]
	if err := b.write(append(rules[:i:i], rules[i+1:]...)); err != nil {
		return Rule{}, err
	}
	b.usesMu.Lock()
	delete(b.uses, id)
	b.usesDirty = true
	b.usesMu.Unlock()
	return gone, nil
}

// current reads the file as it is on disk now, for a change: the change
// must start from what is there, and must not overwrite a file that does
// not parse (a hand edit in progress would be lost).
func (b *Book) current() ([]Rule, error) {
	if b.cfg.Path == "" {
		return nil, fmt.Errorf("%w: this relay has no rules file", ErrFile)
	}
	info, err := b.stat()
	if err == nil {
		var set *Set
		if set, err = b.read(info); err == nil {
			return set.Rules(), nil
		}
	}
	return nil, fmt.Errorf("%w: %w; fix or remove it first", ErrFile, err)
}

// write replaces the file with rules and puts them in force.
func (b *Book) write(rules []Rule) error {
	if err := safefile.PrivateDir(filepath.Dir(b.cfg.Path)); err != nil {
		return fmt.Errorf("%w: %w", ErrFile, err)
	}
	if err := atomicfile.Write(b.cfg.Path, Encode(rules), atomicfile.Options{}); err != nil && !errors.Is(err, atomicfile.ErrDirSync) {
		return fmt.Errorf("%w: write %s: %w", ErrFile, b.cfg.Path, err)
	}
	b.reloadLocked(true)
	if s := b.live.Load(); s.err != nil {
		return fmt.Errorf("%w: %w", ErrFile, s.err)
	}
	return nil
}
