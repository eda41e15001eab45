//go:build !linux

package syncmode

import "os"

// FileSync makes f's written data durable with File.Sync: fsync(2), and on
// macOS F_FULLFSYNC, which flushes the drive's own cache too (milliseconds).
func FileSync(f *os.File) error { return f.Sync() }
