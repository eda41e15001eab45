package emitter

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/syncmode"
	"github.com/aep-kimi/aep-kimi/internal/testkit/emittertest"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// onDiskCheck publishes through to a Recorder, first checking that every
// control ack it is handed is in what the injected syncer last made durable.
type onDiskCheck struct {
	mu      sync.Mutex
	durable string
	syncs   int
	early   []string
	rec     emittertest.Recorder
}

func (c *onDiskCheck) sync(f *os.File) error {
	b, err := os.ReadFile(f.Name())
	c.mu.Lock()
	c.durable, c.syncs = string(b), c.syncs+1
	c.mu.Unlock()
	return err
}

func (c *onDiskCheck) Publish(ev *aep.Event) {
	c.mu.Lock()
	if strings.HasPrefix(ev.Type, "control.") && !strings.Contains(c.durable, ev.ID) {
		c.early = append(c.early, ev.Type+" "+ev.ID)
	}
	c.mu.Unlock()
	c.rec.Publish(ev)
}

// A command's ack (an answer's, a rule's decision's) is on the disk before
// it is published, in every sync mode, none included.
func TestAckSyncedBeforePublishedInEveryMode(t *testing.T) {
	for _, mode := range []syncmode.Mode{syncmode.None, syncmode.Interval, syncmode.Always} {
		t.Run(string(mode), func(t *testing.T) {
			home := t.TempDir()
			chk := &onDiskCheck{}
			src := &source{refuse: map[string]bool{}, keep: map[string]bool{}, verdict: Accept(nil)}
			spec := Spec{Name: "test", LogDir: filepath.Join(home, "logs", "test"), EpochFile: filepath.Join(home, "kimi", "test-epoch"),
				Commands: []string{cmdPoke}, Accepts: []string{cmdPoke}, Authenticated: true}
			core, err := New(Config{Home: home, Host: "h", Publisher: chk, Posture: mapping.DefaultPosture(),
				Logger: slog.New(slog.DiscardHandler), Sync: mode, Syncer: chk.sync}, spec, Source[*session](src))
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"a", "b"} {
				cmd := emittertest.Command(t, cmdPoke, "s-"+id, "x", map[string]any{"answer": map[string]any{"option": "allow"}})
				core.HandleCommand(context.Background(), cmd)
			}
			if len(chk.rec.Find("control.accepted")) != 2 {
				t.Fatalf("acks published: %d", len(chk.rec.Find("control.accepted")))
			}
			if len(chk.early) > 0 {
				t.Fatalf("acks published before they were on the disk: %v", chk.early)
			}
		})
	}
}
