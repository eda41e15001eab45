package stacktest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/adapter"
)

// FloodFileLimit is the open-file limit the flooded adapter runs under: far
// fewer descriptors than sessions.
const FloodFileLimit = 256

// EnvCount reads a test size from the environment (to replay the attack at
// full scale by hand), else def.
func EnvCount(key string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(key)); err == nil && n > 0 {
		return n
	}
	return def
}

// FdCount is the number of open descriptors of a process (Linux).
func FdCount(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

// Missing counts the wanted fragments absent from a session's log and
// checks its seqs run 0, 1, ... with one epoch.
func Missing(t *testing.T, home, session string, want []string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, "logs", "kimi-code", adapter.LogFileName(session)))
	if err != nil {
		return len(want)
	}
	n := 0
	for _, w := range want {
		if c := bytes.Count(b, []byte(w)); c != 1 {
			t.Errorf("%s: %q appears %d times", session, w, c)
			if c == 0 {
				n++
			}
		}
	}
	for i, e := range ParseLines(t, b) {
		if *e.Seq != int64(i) || *e.Epoch != *ParseLines(t, b)[0].Epoch {
			t.Errorf("%s: event %d has seq %d", session, i, *e.Seq)
		}
	}
	return n
}

func Scrape(t *testing.T, client *http.Client, base string) string {
	t.Helper()
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// MetricValue is the value of an unlabelled sample in a scrape, or -1.
func MetricValue(scrape, name string) float64 {
	for _, l := range strings.Split(scrape, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

func Tail(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}
