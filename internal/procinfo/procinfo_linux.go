package procinfo

import (
	"bytes"
	"fmt"
	"strconv"
	"syscall"

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
	fields := bytes.Fields(b[end+1:])
	const ppidField, startField = 4 - 3, 22 - 3 // fields[0] is field 3 (state)
	if len(fields) <= startField {
		return Info{}, fmt.Errorf("procinfo: short stat record")
	}
	ppid, err := strconv.Atoi(string(fields[ppidField]))
	if err != nil {
		return Info{}, fmt.Errorf("procinfo: ppid: %w", err)
	}
	ticks, err := strconv.ParseUint(string(fields[startField]), 10, 64)
	if err != nil {
		return Info{}, fmt.Errorf("procinfo: starttime: %w", err)
	}
	state := fields[0]
	return Info{
		Exited:  len(state) == 1 && (state[0] == 'Z' || state[0] == 'X'),
		PPID:    ppid,
		Comm:    string(b[open+1 : end]),
		Start:   strconv.FormatUint(ticks, 10),
		StartNs: int64(ticks) * (1e9 / userHZ),
	}, nil
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
