//go:build unix

package consumer

import (
	"os"

	"golang.org/x/sys/unix"
)

// terminalWidth asks the terminal behind f for its columns (0: unknown).
func terminalWidth(f *os.File) int {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}
