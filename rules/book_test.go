package rules

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
)

func openBook(t *testing.T) (*Book, string, *syncbuf.Buffer) {
	t.Helper()
	var logs syncbuf.Buffer
	path := filepath.Join(t.TempDir(), "home", FileName)
	b := Open(Config{Path: path, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Poll: 10 * time.Millisecond})
	return b, path, &logs
}

func TestBookAddRemove(t *testing.T) {
	b, path, _ := openBook(t)
	if st := b.Status(); !st.OK || st.Rules != 0 {
		t.Fatalf("no file: %+v", st)
	}
	r, err := b.Add(Rule{Effect: Allow, Tool: "Bash", Args: "echo *", Note: "harmless"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.ID, "r-") || r.Created == "" {
		t.Fatalf("added %+v", r)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && info.Mode().Perm() != 0o600 {
		t.Fatalf("rules file mode %04o, want 0600", info.Mode().Perm())
	}
	if _, err := b.Add(Rule{ID: r.ID, Effect: Deny, Tool: "Bash"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a taken id: %v", err)
	}
	if _, err := b.Add(Rule{Effect: "maybe", Tool: "Bash"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `effect "maybe"`) {
		t.Fatalf("a bad rule: %v", err)
	}
	if _, err := b.Add(Rule{ID: "rmrf", Effect: Deny, Tool: "Bash", Args: "rm -rf *"}); err != nil {
		t.Fatal(err)
	}
	if v := b.Evaluate(bash("rm -rf ./build"), false); v.Effect != Deny {
		t.Fatalf("the added rule is not in force: %+v", v)
	}
	b.Record(b.Evaluate(bash("rm -rf ./build"), false), time.Unix(100, 0))
	list := b.List()
	if len(list) != 2 || list[1].ID != "rmrf" || list[1].Uses != 1 || !list[1].LastUse.Equal(time.Unix(100, 0)) || list[0].Uses != 0 {
		t.Fatalf("list: %+v", list)
	}
	if gone, err := b.Remove("rmrf"); err != nil || gone.ID != "rmrf" {
		t.Fatalf("remove: %v", err)
	}
	if _, err := b.Remove("rmrf"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("remove twice: %v", err)
	}
	set, err := Parse(mustRead(t, path))
	if err != nil || set.Len() != 1 || set.Rules()[0].ID != r.ID {
		t.Fatalf("file after remove: %v %+v", err, set.Rules())
	}
}

// A file that stops parsing keeps the last good rules in force and says
// why, in the log and the status; a fixed file is taken again.
func TestBookBadFileKeepsLastGood(t *testing.T) {
	b, path, logs := openBook(t)
	if _, err := b.Add(Rule{ID: "deny-rm", Effect: Deny, Tool: "Bash", Args: "rm *"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go b.Watch(ctx)
	bad := []byte(`{"version":1,"rules":[{"id":"x","effect":"alow","tool":"Bash"}]}`)
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return !b.Status().OK })
	st := b.Status()
	if st.Rules != 1 || !strings.Contains(st.Error, `effect "alow"`) {
		t.Fatalf("status: %+v", st)
	}
	if v := b.Evaluate(bash("rm x"), false); v.Effect != Deny {
		t.Fatal("the last good rules are not in force")
	}
	if !strings.Contains(logs.String(), "rules file refused") || !strings.Contains(logs.String(), "alow") {
		t.Fatalf("log: %s", logs.String())
	}
	// A change through the API must not overwrite a hand edit it cannot read.
	if _, err := b.Add(Rule{Effect: Allow, Tool: "Read"}); !errors.Is(err, ErrFile) {
		t.Fatalf("Add over a bad file: %v", err)
	}
	if !bytes.Equal(mustRead(t, path), bad) {
		t.Fatal("Add rewrote a file it could not read")
	}
	if err := os.WriteFile(path, Encode([]Rule{{ID: "fixed", Effect: Allow, Tool: "Bash"}}), 0o600); err != nil {
		t.Fatal(err)
	}
	// A file written in place may be read half-written: what counts is
	// that the fixed file is taken once it is whole.
	waitFor(t, func() bool { v := b.Evaluate(bash("rm x"), false); return v.Effect == Allow && v.Rule.ID == "fixed" })
	if !b.Status().OK {
		t.Fatalf("status: %+v", b.Status())
	}
	// Deleting the file is a change like any other: no rules.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return b.Set().Len() == 0 })
}

// A symbolic link at the rules file's place is refused, for reading and
// for writing: a rule decides what agents may run.
func TestBookRefusesSymlink(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	b, path, _ := openBook(t)
	elsewhere := filepath.Join(t.TempDir(), "planted.json")
	planted := Encode([]Rule{{ID: "all", Effect: Allow, Tool: "*"}})
	if err := os.WriteFile(elsewhere, planted, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, path); err != nil {
		t.Fatal(err)
	}
	b.Reload()
	b.Reload() // a change is taken once it holds still
	st := b.Status()
	if st.OK || st.Rules != 0 || !strings.Contains(st.Error, "symbolic link") {
		t.Fatalf("a linked rules file was taken: %+v", st)
	}
	if v := b.Evaluate(bash("anything"), false); v.Effect != "" {
		t.Fatalf("the planted rule decides: %+v", v)
	}
	if _, err := b.Add(Rule{Effect: Deny, Tool: "Bash"}); !errors.Is(err, ErrFile) {
		t.Fatalf("Add through a link: %v", err)
	}
	if !bytes.Equal(mustRead(t, elsewhere), planted) {
		t.Fatal("the link's target was written")
	}
}

func TestBookRefusesWritableByOthers(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix modes")
	}
	b, path, _ := openBook(t)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, Encode([]Rule{{ID: "all", Effect: Allow, Tool: "*"}}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	b.Reload()
	b.Reload() // a change is taken once it holds still
	if st := b.Status(); st.OK || !strings.Contains(st.Error, "writable by others") || st.Rules != 0 {
		t.Fatalf("a world-writable rules file was taken: %+v", st)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	poll.Must(t, 5*time.Second, "the condition", ok)
}

// Use counts are kept beside the rules file, so a relay restart keeps
// them; a removed rule's go with it.
func TestBookUsesSurviveRestart(t *testing.T) {
	b, path, _ := openBook(t)
	for _, r := range []Rule{{ID: "rmrf", Effect: Deny, Tool: "Bash", Args: "rm -rf *"}, {ID: "gone", Effect: Allow, Tool: "Read"}} {
		if _, err := b.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Unix(1800000000, 0).UTC()
	b.Record(b.Evaluate(bash("rm -rf ./build"), false), at)
	b.Record(b.Evaluate(Request{Tool: "Read"}, false), at)
	if _, err := b.Remove("gone"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); b.Watch(ctx) }()
	waitFor(t, func() bool { _, err := os.Stat(b.UsesPath()); return err == nil })
	cancel()
	<-done
	again := Open(Config{Path: path})
	list := again.List()
	if len(list) != 1 || list[0].ID != "rmrf" || list[0].Uses != 1 || !list[0].LastUse.Equal(at) {
		t.Fatalf("after a restart: %+v", list)
	}
	raw := string(mustRead(t, again.UsesPath()))
	if strings.Contains(raw, "gone") {
		t.Fatalf("a removed rule's counts were kept: %s", raw)
	}
	if info, err := os.Stat(again.UsesPath()); err != nil || (runtime.GOOS != "windows" && info.Mode().Perm() != 0o600) {
		t.Fatalf("uses file: %v %v", info, err)
	}
}
