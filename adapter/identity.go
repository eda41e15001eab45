package adapter

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ensureToken returns the hook token, creating it (0600, in a 0700 dir) on
// first start. kimi-hook reads the same file.
func ensureToken(home string) (string, error) {
	path := tokenPath(home)
	if b, err := os.ReadFile(path); err == nil {
		if tok := strings.TrimSpace(string(b)); tok != "" {
			if err := os.Chmod(path, 0o600); err != nil {
				return "", fmt.Errorf("hook token: %w", err)
			}
			return tok, nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("hook token: %w", err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("hook token: %w", err)
	}
	tok := base64.RawURLEncoding.EncodeToString(b[:])
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("hook token: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("hook token: %w", err)
	}
	return tok, nil
}

// nextEpoch returns this adapter run's epoch and records it. An epoch must
// never repeat for a session across restarts (AEP-0001 §7.2): it is the larger
// of the last recorded epoch plus one and the start time in Unix seconds, so
// it grows even if the record is lost (a wiped home) or the clock steps back.
// The record is updated under a file lock, so two adapters starting at once
// still get distinct epochs.
func nextEpoch(home string, now time.Time) (int64, error) {
	dir := kimiDir(home)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("epoch: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "epoch"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return 0, fmt.Errorf("epoch: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return 0, fmt.Errorf("epoch: lock: %w", err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // released on close
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	last, _ := strconv.ParseInt(strings.TrimSpace(string(buf[:n])), 10, 64)
	epoch := max(last+1, now.Unix())
	if err := f.Truncate(0); err != nil {
		return 0, fmt.Errorf("epoch: %w", err)
	}
	if _, err := f.WriteAt([]byte(strconv.FormatInt(epoch, 10)+"\n"), 0); err != nil {
		return 0, fmt.Errorf("epoch: %w", err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("epoch: %w", err)
	}
	return epoch, nil
}

// maxNameBytes keeps log file names well under the usual 255-byte limit.
const maxNameBytes = 200

// LogFileName returns the JSONL file name for a session: the session string
// with every byte outside [A-Za-z0-9_-] and any leading dot percent-encoded,
// so it is reversible, safe for any input (path separators, "..", control
// bytes, unicode) and still says which session it is. Names too long for a
// file system keep a readable prefix plus a hash of the whole string.
func LogFileName(session string) string {
	var b strings.Builder
	for i := 0; i < len(session); i++ {
		c := session[i]
		safe := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' ||
			(c == '.' && i > 0)
		if safe {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	name := b.String()
	if name == "" {
		name = "%00"
	}
	if len(name) > maxNameBytes {
		sum := sha256.Sum256([]byte(session))
		cut := maxNameBytes - 18
		for cut > 0 && name[cut-1] == '%' || cut > 1 && name[cut-2] == '%' {
			cut-- // never split an escape
		}
		name = name[:cut] + "~" + hex.EncodeToString(sum[:8])
	}
	return name + ".jsonl"
}

// logFile appends one event per line with a single write(2) each, so a
// concurrent reader (tail -f) never sees a torn line.
type logFile struct {
	f *os.File
}

func openLog(dir, session string) (*logFile, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	path := filepath.Join(dir, LogFileName(session))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	return &logFile{f: f}, nil
}

func (l *logFile) append(line []byte) error {
	if l == nil || l.f == nil {
		return errors.New("log: closed")
	}
	buf := make([]byte, 0, len(line)+1)
	buf = append(buf, line...)
	buf = append(buf, '\n')
	_, err := l.f.Write(buf)
	return err
}

func (l *logFile) close() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
