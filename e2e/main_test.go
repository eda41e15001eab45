// Package e2e holds the end-to-end tests: the built binaries, the real relay
// and adapter on loopback sockets and the real Kimi CLI, one file per area.
// They are one package so that `go test -short ./...`, which skips them,
// links them once.
package e2e

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// TestMain runs twice as many tests at a time as there are cores unless
// -parallel says otherwise: an end-to-end test spends most of its time
// waiting on Kimi, the daemons and their timeouts, so one per core leaves
// the cores idle.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(2*runtime.GOMAXPROCS(0))); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}
