// Package fulldisk makes a real full disk for a test: a small tmpfs of its
// own (mounting needs root on Linux; elsewhere the test skips), filled to
// the last byte and freed again when the test says.
package fulldisk

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
)

// fillerName is the file Fill grows to take the free space.
const fillerName = ".fulldisk-filler"

// Disk is a tmpfs mounted for one test.
type Disk struct {
	// Dir is its mount point.
	Dir string
	t   testing.TB
}

// Mount mounts a tmpfs of size bytes on a new directory and unmounts it
// when the test ends. It skips the test when this is not Linux, not root,
// or the mount is refused (a container without the capability).
func Mount(t testing.TB, size int64) *Disk {
	t.Helper()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("a real full disk needs a tmpfs: Linux and root")
	}
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.FormatInt(size, 10)+",mode=0700", "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return &Disk{Dir: dir, t: t}
}

// Fill takes every free byte of the disk, so the next write that needs a
// new page fails with ENOSPC.
func (d *Disk) Fill() {
	d.t.Helper()
	f, err := os.OpenFile(filepath.Join(d.Dir, fillerName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		d.t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for _, chunk := range []int{4096, 1} {
		for {
			if _, err := f.Write(buf[:chunk]); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					d.t.Fatalf("fill %s: %v", d.Dir, err)
				}
				break
			}
		}
	}
}

// FillBut takes all but keep bytes of the disk's free space: room for a
// little more, so a test sees the disk fill under its own writes.
func (d *Disk) FillBut(keep int64) {
	d.t.Helper()
	d.Fill()
	p := filepath.Join(d.Dir, fillerName)
	st, err := os.Stat(p)
	if err != nil {
		d.t.Fatal(err)
	}
	if err := os.Truncate(p, max(st.Size()-keep, 0)); err != nil {
		d.t.Fatal(err)
	}
}

// Free gives back what Fill took.
func (d *Disk) Free() {
	d.t.Helper()
	if err := os.Remove(filepath.Join(d.Dir, fillerName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		d.t.Fatal(err)
	}
}

// ReadOnly makes dir refuse every write, to root too, while it stays
// readable, as a file system does that the kernel remounted read-only
// after an error: a bind mount of dir on itself, remounted ro. The
// returned function (also run when the test ends) makes it writable
// again. It skips the test where it cannot (not Linux, not root).
func ReadOnly(t testing.TB, dir string) (restore func()) {
	t.Helper()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("a read-only directory for root needs a bind mount: Linux and root")
	}
	for _, args := range [][]string{{"--bind", dir, dir}, {"-o", "remount,bind,ro", dir}} {
		if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
			t.Skipf("cannot make %s read-only: %v: %s", dir, err, out)
		}
	}
	mounted := true
	restore = func() {
		t.Helper()
		if !mounted {
			return
		}
		mounted = false
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	}
	t.Cleanup(restore)
	return restore
}
