package relay

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aep-kimi/aep-kimi/internal/atomicfile"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/internal/syncmode"
)

// blockExt names the embedded server's message block files.
const blockExt = ".blk"

// storeSync is the embedded store's group commit under --store-sync
// always. NATS's own sync-always flushes each message on its own, one
// fsync per event (about 4,500 events/s on a disk whose fdatasync takes
// 0.2 ms); here the server writes each message to its block file before
// acknowledging it, as it always does, and a batch whose acknowledgements
// arrived waits for one fdatasync of the blocks written since the last
// one, shared by every batch acknowledged meanwhile. A new block's name is
// synced with its directory.
type storeSync struct {
	dir   string // the stream's message blocks
	acked atomic.Uint64
	group syncmode.Group
	// Only the one sync running at a time (group) touches these.
	mu   sync.Mutex
	last int      // the newest block synced
	f    *os.File // that block, kept open
	sync syncmode.Syncer
}

// newStoreSync finds the stream's block directory under the embedded
// store's dir and syncs, once, what the server wrote before (the stream's
// metadata, the directories leading to it, its blocks).
func newStoreSync(storeDir, stream string, syncer syncmode.Syncer) (*storeSync, error) {
	if syncer == nil {
		syncer = syncmode.FileSync
	}
	// The embedded server's clients are users of its global account.
	root := filepath.Join(storeDir, "jetstream")
	dir := filepath.Join(root, "$G", "streams", stream, "msgs")
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("jetstream store: --store-sync always: the stream's blocks are not in %s: %v", dir, err)
	}
	s := &storeSync{dir: dir, sync: syncer}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return atomicfile.SyncDir(path)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if filepath.Dir(path) == dir {
			s.last = max(s.last, blockIndex(d.Name()))
		}
		return s.syncPath(path)
	})
	if err != nil {
		return nil, fmt.Errorf("jetstream store: syncing the store: %w", err)
	}
	return s, nil
}

// wait is called once a batch's acknowledgements have all arrived; it
// returns once a sync that began after them completed.
func (s *storeSync) wait() error {
	n := s.acked.Add(1)
	if err := s.group.Wait(n, s.acked.Load, s.flush); err != nil {
		return fmt.Errorf("store sync: %w", err)
	}
	return nil
}

// flush syncs the newest block and any block created since the last flush,
// and the directory when there was one.
func (s *storeSync) flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	grew := false
	for {
		next := filepath.Join(s.dir, strconv.Itoa(s.last+1)+blockExt)
		if _, err := os.Lstat(next); err != nil {
			break
		}
		// The block being left is complete: sync it before moving on.
		if err := s.syncLast(); err != nil {
			return err
		}
		s.closeLast()
		s.last++
		grew = true
	}
	if err := s.syncLast(); err != nil {
		return err
	}
	if grew {
		return atomicfile.SyncDir(s.dir)
	}
	return nil
}

// syncLast syncs the newest block through the descriptor kept for it; a
// block removed meanwhile (purged whole) has nothing left to sync. Blocks
// open for writing: Windows flushes no handle opened only to read.
func (s *storeSync) syncLast() error {
	if s.last == 0 {
		return nil
	}
	if s.f == nil {
		f, err := safefile.OpenFile(filepath.Join(s.dir, strconv.Itoa(s.last)+blockExt), os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		s.f = f
	}
	return s.sync(s.f)
}

func (s *storeSync) closeLast() {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

func (s *storeSync) syncPath(path string) error {
	f, err := safefile.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return s.sync(f)
}

// reopen drops the kept descriptor and finds the newest block again: the
// server reopened the stream's files (JetStream restarted), and a sync
// must go through the files it now writes.
func (s *storeSync) reopen() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLast()
	s.last = 0
	if ents, err := os.ReadDir(s.dir); err == nil {
		for _, e := range ents {
			s.last = max(s.last, blockIndex(e.Name()))
		}
	}
}

// close releases the kept descriptor.
func (s *storeSync) close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLast()
}

// blockIndex is the index in a block file's name ("12.blk"), or 0.
func blockIndex(name string) int {
	n, err := strconv.Atoi(strings.TrimSuffix(name, blockExt))
	if err != nil || !strings.HasSuffix(name, blockExt) {
		return 0
	}
	return n
}
