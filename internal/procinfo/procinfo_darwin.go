package procinfo

import (
	"bytes"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Read reports pid's parent, name and start time from sysctl kern.proc.pid.
func Read(pid int) (Info, error) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil {
		return Info{}, fmt.Errorf("procinfo: %w", err)
	}
	if int(kp.Proc.P_pid) != pid {
		return Info{}, fmt.Errorf("procinfo: no process %d", pid)
	}
	comm := kp.Proc.P_comm[:]
	if i := bytes.IndexByte(comm, 0); i >= 0 {
		comm = comm[:i]
	}
	st := kp.Proc.P_starttime
	const zombie = 5 // SZOMB in <sys/proc.h>
	return Info{
		Exited:  kp.Proc.P_stat == zombie,
		PPID:    int(kp.Eproc.Ppid),
		Comm:    string(comm),
		Start:   strconv.FormatInt(int64(st.Sec), 10) + "." + strconv.FormatInt(int64(st.Usec), 10),
		StartNs: int64(st.Sec)*1e9 + int64(st.Usec)*1e3,
	}, nil
}

// clockNs is now on the clock of StartNs: p_starttime is wall-clock time.
func clockNs() (int64, error) { return time.Now().UnixNano(), nil }
