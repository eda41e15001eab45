//go:build !linux && !darwin

package procinfo

// Read is not available on this platform: hooks carry no Kimi process and
// the adapter falls back to silence for their sessions.
func Read(int) (Info, error) { return Info{}, ErrUnsupported }

func clockNs() (int64, error) { return 0, ErrUnsupported }
