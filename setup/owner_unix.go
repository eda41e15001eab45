//go:build unix

package setup

import (
	"io/fs"
	"os"
	"syscall"
)

// keepOwner gives the replacement file the original's owner and group, so
// running aep-setup as root on a user's config does not hand the file to
// root. Best effort: an unprivileged user cannot chown and needs not.
func keepOwner(f *os.File, orig fs.FileInfo) {
	st, ok := orig.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	if int(st.Uid) == os.Getuid() && int(st.Gid) == os.Getgid() {
		return
	}
	_ = f.Chown(int(st.Uid), int(st.Gid))
}
