// A full disk under the adapter while hooks keep coming: nothing
// acknowledged that is not on disk, on a real small filesystem.

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/internal/testkit/fulldisk"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
)

// The adapter's home on a real disk that fills while hooks keep coming
// (a 2 MiB tmpfs, root only), then is freed: every hook answered 200 is in
// its session's log exactly once, every log is valid by `aep-kimi
// validate` (no line torn or glued), /healthz says 503 with the reason
// while the disk is full and ok again by itself once space is freed, and
// the adapter logs one line for each change.
func TestE2EAdapterFullDisk(t *testing.T) {
	t.Parallel()
	stacktest.Binaries(t)
	d := fulldisk.Mount(t, 2<<20)
	home := d.Dir
	addr := fmt.Sprintf("127.0.0.1:%d", netaddr.FreePort(t))
	base := "http://" + addr
	proc := stacktest.StartDaemon(t, base, stacktest.CleanEnv(home), "adapter", "--listen", addr, "--relay", "none", "--home", home)
	tok, err := os.ReadFile(adapter.TokenPath(home))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))
	const sessions = 4
	acked := map[string]string{} // delivery -> session
	n := 0
	post := func(session, payload string) int {
		n++
		delivery := fmt.Sprintf("fd-%d", n)
		req, _ := http.NewRequest(http.MethodPost, base+"/hook", strings.NewReader(payload))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Kimi-Hook-Delivery", delivery)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body) //nolint:errcheck // the status is the answer
		resp.Body.Close()
		if resp.StatusCode == 200 {
			acked[delivery] = session
		}
		return resp.StatusCode
	}
	// A round is a turn in every session: a prompt (a few hundred bytes of
	// text, so lines straddle pages) and its Stop.
	round := func(r int) (ok, refused int) {
		for s := range sessions {
			session := fmt.Sprintf("disk-%d", s)
			for _, p := range []string{
				fmt.Sprintf(`{"hook_event_name":"UserPromptSubmit","session_id":%q,"prompt":[{"type":"text","text":"round %d %s"}],"is_steer":false}`, session, r, strings.Repeat("y", 300+97*s)),
				fmt.Sprintf(`{"hook_event_name":"Stop","session_id":%q}`, session),
			} {
				switch post(session, p) {
				case 200:
					ok++
				case http.StatusServiceUnavailable:
					refused++
				default:
					t.Fatalf("hook answered neither 200 nor 503")
				}
			}
		}
		return ok, refused
	}
	health := func() (int, map[string]any) {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var h map[string]any
		json.NewDecoder(resp.Body).Decode(&h) //nolint:errcheck // checked through its fields
		return resp.StatusCode, h
	}
	for s := range sessions {
		post("", fmt.Sprintf(`{"hook_event_name":"SessionStart","session_id":"disk-%d","source":"startup"}`, s))
	}
	for r := range 5 {
		if _, refused := round(r); refused != 0 {
			t.Fatalf("%d hooks refused before the disk filled", refused)
		}
	}
	d.Fill()
	tookFull, refusedFull := 0, 0
	for r := 5; r < 25; r++ {
		ok, refused := round(r)
		tookFull, refusedFull = tookFull+ok, refusedFull+refused
	}
	if refusedFull == 0 {
		t.Fatal("the full disk refused no hook")
	}
	if code, h := health(); code != http.StatusServiceUnavailable || h["ok"] != false || !strings.Contains(fmt.Sprint(h["reason"]), "no space left on device") {
		t.Fatalf("healthz on a full disk: %d %v", code, h)
	}
	d.Free()
	for r := 25; r < 30; r++ {
		if _, refused := round(r); refused != 0 {
			t.Fatalf("%d hooks refused after space was freed", refused)
		}
	}
	if code, h := health(); code != 200 || h["ok"] != true {
		t.Fatalf("healthz after space was freed: %d %v", code, h)
	}
	for s := range sessions {
		post("", fmt.Sprintf(`{"hook_event_name":"SessionEnd","session_id":"disk-%d","reason":"exit"}`, s))
	}
	proc.Stop(t)
	logs := proc.Logs.String()
	if a, b := strings.Count(logs, "session logs are not reaching the disk"), strings.Count(logs, "session logs reach the disk again"); a != 1 || b != 1 {
		t.Errorf("%d lines for the disk filling and %d for it freed, want 1 and 1:\n%s", a, b, stacktest.Tail(logs))
	}
	found := map[string]int{}
	for s := range sessions {
		path := filepath.Join(home, "logs", "kimi-code", adapter.LogFileName(fmt.Sprintf("disk-%d", s)))
		stacktest.ValidateWithCLI(t, path)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range stacktest.ParseLines(t, b) {
			if d, ok := ev.ExtString(adapter.ExtDelivery); ok {
				found[d]++
			}
		}
	}
	lost, twice := 0, 0
	for delivery := range acked {
		switch found[delivery] {
		case 0:
			lost++
		case 1:
		default:
			twice++
		}
	}
	t.Logf("%d hooks acknowledged (%d while the disk was full), %d refused while full", len(acked), tookFull, refusedFull)
	if lost != 0 || twice != 0 {
		t.Fatalf("of %d acknowledged hooks, %d are not in the logs and %d are there more than once", len(acked), lost, twice)
	}
}
