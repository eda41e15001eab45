package syncmode

import (
	"os"
	"syscall"
)

// FileSync makes f's written data durable with fdatasync(2): the data and
// the size, not the times a later read needs no more.
func FileSync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.Fdatasync(int(fd)) }); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}
