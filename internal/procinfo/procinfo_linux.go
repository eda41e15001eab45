package procinfo

import (
	"bytes"
	"fmt"
	"strconv"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// userHZ is the unit of /proc/PID/stat's starttime: clock ticks, which the
// kernel reports at USER_HZ, 100 on every mainstream architecture.
const userHZ = 100

// statMax bounds a stat record: 52 numeric fields and a 64-byte comm fit
// well within it.
const statMax = 2048

// Read reports pid's parent, name and start time from /proc/PID/stat. It
// reads with plain syscalls: in a process as short-lived as kimi-hook, the
// os.File machinery (and the runtime poller it sets up) costs more than the
// read itself.
func Read(pid int) (Info, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return Info{}, fmt.Errorf("procinfo: %s: %w", path, err)
	}
	defer syscall.Close(fd)
	var buf [statMax]byte
	n := 0
	// The kernel hands the whole record to the first read of a buffer this
	// size; reading on to end of file would cost a second read per record.
	for n < len(buf) && (n == 0 || buf[n-1] != '\n') {
		m, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return Info{}, fmt.Errorf("procinfo: %s: %w", path, err)
		}
		if m == 0 {
			break
		}
		n += m
	}
	return parseStat(buf[:n])
}

// parseStat reads "pid (comm) state ppid ... starttime ...": comm may hold
// spaces and parentheses, so the fields are counted after the last ')'.
// starttime is field 22, ppid field 4.
func parseStat(b []byte) (Info, error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return Info{}, fmt.Errorf("procinfo: malformed stat record")
	}
	state, ppidField, startField, ok := statFields(b[end+1:])
	if !ok {
		return Info{}, fmt.Errorf("procinfo: short stat record")
	}
	ppid, err := strconv.Atoi(string(ppidField))
	if err != nil {
		return Info{}, fmt.Errorf("procinfo: ppid: %w", err)
	}
	ticks, err := strconv.ParseUint(string(startField), 10, 64)
	if err != nil {
		return Info{}, fmt.Errorf("procinfo: starttime: %w", err)
	}
	return Info{
		Exited:  len(state) == 1 && (state[0] == 'Z' || state[0] == 'X'),
		PPID:    ppid,
		Comm:    string(b[open+1 : end]),
		Start:   strconv.FormatUint(ticks, 10),
		StartNs: int64(ticks) * (1e9 / userHZ),
	}, nil
}

// statFields picks fields 3 (state), 4 (ppid) and 22 (starttime) from what
// follows comm, split as bytes.Fields splits, without building the list of
// all fifty: kimi-hook reads two or three records per hook, and each list
// was a fresh heap allocation.
func statFields(b []byte) (state, ppid, start []byte, ok bool) {
	const ppidAt, startAt = 4 - 3, 22 - 3 // field 3 (state) is the first
	for _, c := range b {
		if c >= utf8.RuneSelf {
			// Not from the kernel, which writes ASCII here: split as
			// bytes.Fields does, Unicode spaces included.
			f := bytes.Fields(b)
			if len(f) <= startAt {
				return nil, nil, nil, false
			}
			return f[0], f[ppidAt], f[startAt], true
		}
	}
	n := 0
	for i := 0; i < len(b); {
		for i < len(b) && asciiSpace(b[i]) {
			i++
		}
		if i == len(b) {
			break
		}
		j := i
		for j < len(b) && !asciiSpace(b[j]) {
			j++
		}
		switch n {
		case 0:
			state = b[i:j]
		case ppidAt:
			ppid = b[i:j]
		case startAt:
			return state, ppid, b[i:j], true
		}
		n++
		i = j
	}
	return nil, nil, nil, false
}

// asciiSpace is bytes.Fields' set of ASCII separators.
func asciiSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// clockNs is now on the clock of StartNs: CLOCK_BOOTTIME, which the kernel
// measures process start times against.
func clockNs() (int64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0, fmt.Errorf("procinfo: %w", err)
	}
	return ts.Nano(), nil
}
