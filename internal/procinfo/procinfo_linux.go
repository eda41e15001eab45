package procinfo

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// userHZ is the unit of /proc/PID/stat's starttime: clock ticks, which the
// kernel reports at USER_HZ, 100 on every mainstream architecture.
const userHZ = 100

// Read reports pid's parent, name and start time from /proc/PID/stat.
func Read(pid int) (Info, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Info{}, fmt.Errorf("procinfo: %w", err)
	}
	return parseStat(b)
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
