package relay

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/aep-kimi/aep-kimi/internal/atomicfile"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
)

// The index snapshot. A private embedded store writes its index to
// snapshotName when it closes: every held entry with its stream sequence,
// position and bytes, session by session in eviction order (each session's
// types and sources once, in a table the entries refer to), and the
// highest stream sequence the index reflects. The next start reads it back
// (a sequential read, no stream round trips) and replays only the stream
// after that sequence, which is what a full rebuild would replay last: the
// index comes back as the rebuild would make it. A snapshot that does not
// match the stream (another stream of the same name, a stream that lost
// its tail, other limits) or does not read back whole is ignored: the
// stream is the truth, and the rebuild reads all of it.
const (
	snapshotName  = "index.snap"
	snapshotMagic = "aep-kimi relay index v2\n"
)

// snapshotHeader says which stream, in which state, a snapshot was taken
// of. The index's limits follow it, written and checked by the index
// (MemoryBackend.writeIndex).
type snapshotHeader struct {
	stream  string
	created int64 // the stream's creation time, Unix nanoseconds
	// The stream's messages, first and last sequence when the snapshot was
	// taken: any change since (a message deleted behind the relay's back,
	// one published after the snapshot) shows in one of them.
	msgs, first, last uint64
	lastSeq           uint64 // the highest stream sequence the index reflects
}

var snapshotTable = crc32.MakeTable(crc32.Castagnoli)

// writeSnapshot writes idx to path, atomically but not synced: it is a
// cache, checked whole (its checksum) and against the stream when read, so
// one a power loss left torn or empty costs a full rebuild only.
func writeSnapshot(idx *MemoryBackend, path string, h snapshotHeader) error {
	var werr error
	err := atomicfile.Write(path, nil, atomicfile.Options{NoSync: true, Prepare: func(tmp *os.File) error {
		sum := crc32.New(snapshotTable)
		w := bufio.NewWriterSize(io.MultiWriter(tmp, sum), 1<<20)
		e := snapEncoder{w: w}
		e.str(snapshotMagic)
		e.str(h.stream)
		e.int(h.created)
		e.uint(h.msgs)
		e.uint(h.first)
		e.uint(h.last)
		e.uint(h.lastSeq)
		idx.writeIndex(&e)
		if e.err == nil {
			e.err = w.Flush()
		}
		if e.err == nil {
			e.err = binary.Write(tmp, binary.BigEndian, sum.Sum32())
		}
		werr = e.err
		return e.err
	}})
	if werr != nil {
		return fmt.Errorf("index snapshot: %w", werr)
	}
	if err != nil && !errors.Is(err, atomicfile.ErrDirSync) {
		return fmt.Errorf("index snapshot: %w", err)
	}
	return nil
}

// readSnapshot restores into idx, which must be empty, the index in path,
// provided it was taken of want's stream in want's state (and with idx's
// limits, which idx checks); it returns the highest stream sequence the
// index reflects. On any error idx is left empty again.
func readSnapshot(idx *MemoryBackend, path string, want snapshotHeader) (uint64, error) {
	f, err := safefile.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if st.Size() < 4 {
		return 0, fmt.Errorf("%w: %d bytes", errSnapshot, st.Size())
	}
	sum := crc32.New(snapshotTable)
	d := snapDecoder{r: bufio.NewReaderSize(io.TeeReader(io.LimitReader(f, st.Size()-4), sum), 1<<20)}
	if d.str() != snapshotMagic {
		return 0, fmt.Errorf("%w: not a snapshot of this version", errSnapshot)
	}
	got := snapshotHeader{stream: d.str(), created: d.int(), msgs: d.uint(), first: d.uint(), last: d.uint(), lastSeq: d.uint()}
	if d.err != nil {
		return 0, d.err
	}
	if got.stream != want.stream || got.created != want.created || got.msgs != want.msgs || got.first != want.first || got.last != want.last ||
		got.lastSeq > got.last {
		return 0, fmt.Errorf("%w: taken of stream %s (created %d; %d messages, %d to %d); the store is %s (created %d; %d messages, %d to %d)",
			errSnapshot, got.stream, got.created, got.msgs, got.first, got.last, want.stream, want.created, want.msgs, want.first, want.last)
	}
	err = idx.readIndex(&d, func() error {
		var tail [4]byte
		if _, err := io.ReadFull(f, tail[:]); err != nil {
			return err
		}
		if binary.BigEndian.Uint32(tail[:]) != sum.Sum32() {
			return fmt.Errorf("%w: checksum", errSnapshot)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return got.lastSeq, nil
}

// removeSnapshotTemps removes what a write of the snapshot interrupted by
// a crash left behind.
func removeSnapshotTemps(dir string) {
	matches, _ := filepath.Glob(filepath.Join(dir, "."+snapshotName+".tmp-*"))
	for _, m := range matches {
		if strings.HasPrefix(filepath.Base(m), "."+snapshotName+".tmp-") {
			os.Remove(m) //nolint:errcheck // best effort: a leftover is only disk
		}
	}
}
