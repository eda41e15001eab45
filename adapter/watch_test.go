package adapter

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/procinfo"
)

// child starts a real process that lives until killed, and names it.
func child(t *testing.T) (*exec.Cmd, procRef) {
	t.Helper()
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("no process watcher on " + runtime.GOOS)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start a child: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	info, err := procinfo.Read(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return cmd, procRef{pid: cmd.Process.Pid, start: info.Start}
}

type watcher func(p procRef, exited func()) (func(), error)

func watchers() map[string]watcher {
	return map[string]watcher{
		"native": func(p procRef, exited func()) (func(), error) { return watchProcess(p, time.Second, exited) },
		"poll":   func(p procRef, exited func()) (func(), error) { return pollWatch(p, 50*time.Millisecond, exited) },
	}
}

func TestWatchSeesExit(t *testing.T) {
	t.Parallel()
	for name, watch := range watchers() {
		for _, reaped := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/reaped=%v", name, reaped), func(t *testing.T) {
				cmd, p := child(t)
				exited := make(chan struct{}, 2)
				stop, err := watch(p, func() { exited <- struct{}{} })
				if err != nil {
					t.Fatal(err)
				}
				defer stop()
				select {
				case <-exited:
					t.Fatal("reported an exit while the process runs")
				case <-time.After(200 * time.Millisecond):
				}
				cmd.Process.Kill()
				if reaped {
					cmd.Wait()
				} // else a zombie until cleanup: exited all the same
				select {
				case <-exited:
				case <-time.After(3 * time.Second):
					t.Fatal("the exit was not seen within 3 s")
				}
			})
		}
	}
}

// A pid whose start time differs is another process: never watched as p.
func TestWatchDefeatsPidReuse(t *testing.T) {
	t.Parallel()
	for name, watch := range watchers() {
		t.Run(name, func(t *testing.T) {
			_, p := child(t)
			p.start += "0" // the same pid, started at another time
			if _, err := watch(p, func() {}); !errors.Is(err, errGone) {
				t.Fatalf("watching a reused pid: err %v, want errGone", err)
			}
		})
	}
}

func TestWatchGoneProcess(t *testing.T) {
	t.Parallel()
	for name, watch := range watchers() {
		t.Run(name, func(t *testing.T) {
			cmd, p := child(t)
			cmd.Process.Kill()
			cmd.Wait()
			if _, err := watch(p, func() {}); !errors.Is(err, errGone) {
				t.Fatalf("watching an exited process: err %v, want errGone", err)
			}
		})
	}
}

func TestWatchStopIsSilent(t *testing.T) {
	t.Parallel()
	for name, watch := range watchers() {
		t.Run(name, func(t *testing.T) {
			cmd, p := child(t)
			exited := make(chan struct{}, 1)
			stop, err := watch(p, func() { exited <- struct{}{} })
			if err != nil {
				t.Fatal(err)
			}
			stop()
			stop() // idempotent
			cmd.Process.Kill()
			cmd.Wait()
			select {
			case <-exited:
				t.Fatal("a stopped watch reported the exit")
			case <-time.After(300 * time.Millisecond):
			}
		})
	}
}
