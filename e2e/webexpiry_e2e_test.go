// A kimi web approval held past the expiry kap-server reports still
// waits for its answer, against the real server.

package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// A kimi web approval past the expires_at kap-server reports still waits in
// Kimi and is still answered: the bridge's request for it has no deadline,
// the fleet keeps it waiting, and an answer sent after that time reaches
// Kimi, which runs the tool. kap-server's clock runs 25 h behind, so the
// approval it creates is an hour past its expires_at the moment it exists.
func TestE2EBridgeWebApprovalPastKapExpiry(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	mock := kimiharness.StartMock(t, kimiharness.WriteScript(t, stacktest.WebScript))
	ws := &stacktest.WebStack{Kimi: kimi, Mode: "primary", Home: t.TempDir(), Khome: t.TempDir(), Work: t.TempDir()}
	kimiharness.WriteWebConfig(t, ws.Khome, mock.Port)
	ws.Web = kimiharness.StartWeb(t, kimi, ws.Khome, ws.Work, kimiharness.ShiftClock(t, -25*time.Hour))
	ws.Stack = stacktest.NewStack(t)
	ws.Addr = fmt.Sprintf("127.0.0.1:%d", netaddr.FreePort(t))
	ws.Env = []string{"AEP_TOKEN=" + ws.Token, "AEP_HOME=" + ws.Home, "KIMI_CODE_HOME=" + ws.Khome, "AEP_KIMI_WEB_CONTROL=1"}
	// The instance record's heartbeat is 25 h old too: discovery would
	// rightly skip it.
	ws.StartBridge(t, "--kap", ws.Web.Base)

	sid := ws.Web.CreateSession(t)
	ws.Web.Prompt(t, sid, "run the probe")
	req := ws.WaitFor(t, sid, "the approval's request", func(e *aep.Event) bool { return e.Type == "attention.requested" })

	var pending struct {
		Items []struct {
			ExpiresAt time.Time `json:"expires_at"`
		} `json:"items"`
	}
	ws.Web.Call(t, http.MethodGet, "/api/v1/sessions/"+sid+"/approvals?status=pending", nil, &pending)
	if len(pending.Items) != 1 || !pending.Items[0].ExpiresAt.Before(time.Now()) {
		t.Fatalf("kap-server's pending approval is not past its expires_at: %+v", pending.Items)
	}
	d := stacktest.DataOf(req)
	if exp, ok := d["expires_at"]; ok {
		t.Errorf("the request carries kap's expires_at %v as its deadline", exp)
	}
	if on, ok := d[mapping.DataOnExpiry]; ok {
		t.Errorf("the request says %v happens at a deadline nothing acts on", on)
	}
	if fmt.Sprint(d["respond_via"]) != "[control]" {
		t.Errorf("respond_via %v", d["respond_via"])
	}

	// The fleet still has it waiting, with no deadline.
	code, out := ws.Cli(t, "pending")
	if code != 0 || !strings.Contains(out, req.ID) || !strings.Contains(out, "no deadline") {
		t.Fatalf("pending does not list the approval as waiting with no deadline: %d\n%s", code, out)
	}

	// Answered past kap's expires_at, Kimi runs the tool.
	if code, out := ws.Cli(t, "respond", "--option", "approved", sid, req.ID); code != 0 {
		t.Fatalf("respond: %d %s", code, out)
	}
	ws.WaitCount(t, sid, "run.finished", 1)
	if !slices.ContainsFunc(mock.Requests(t), func(r string) bool { return strings.Contains(r, `probe-web\n`) }) {
		t.Error("Kimi never sent the model the tool's output")
	}
	_, evs := ws.Events(t, sid)
	stacktest.Want(t, evs, map[string]int{"attention.requested": 1, "attention.answered": 1, "attention.resolved": 1, "attention.timeout": 0, "tool.completed": 1})
}
