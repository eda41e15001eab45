package tokenfile

import (
	"bytes"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"
)

// Create never writes under the token's own name: the bytes go to a
// temporary file, and the name appears only when it is put in place, whole
// (inotify sees the name created, never modified), so no reader and no
// power cut ever meets the file empty or half written.
func TestCreateNeverWritesInPlace(t *testing.T) {
	dir := t.TempDir()
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		t.Skip(err)
	}
	defer syscall.Close(fd)
	if _, err := syscall.InotifyAddWatch(fd, dir, syscall.IN_CREATE|syscall.IN_MODIFY|syscall.IN_CLOSE_WRITE|syscall.IN_MOVED_TO); err != nil {
		t.Fatal(err)
	}
	if err := Create(filepath.Join(dir, "token")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	n, err := syscall.Read(fd, buf)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for off := 0; off+syscall.SizeofInotifyEvent <= n; {
		ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
		name := string(bytes.TrimRight(buf[off+syscall.SizeofInotifyEvent:off+syscall.SizeofInotifyEvent+int(ev.Len)], "\x00"))
		off += syscall.SizeofInotifyEvent + int(ev.Len)
		if name != "token" {
			continue
		}
		switch {
		case ev.Mask&(syscall.IN_MODIFY|syscall.IN_CLOSE_WRITE) != 0:
			seen = append(seen, "written in place")
		case ev.Mask&(syscall.IN_CREATE|syscall.IN_MOVED_TO) != 0:
			seen = append(seen, "put in place")
		}
	}
	if len(seen) != 1 || seen[0] != "put in place" {
		t.Fatalf("the token's name saw %v, want it only put in place", seen)
	}
}
