package relay

import (
	"fmt"
	"net/http"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay/wire"
	"github.com/aep-kimi/aep-kimi/rules"
)

// Who may do what, binding by binding: reading (streams, a consumer's
// socket, discovery, metrics, the rules' view) is every principal's;
// answering a request, cancelling a run and rating one need answer (a
// rating goes on the record under the person's name, which a watcher, who
// may only look, does not write into); every other
// command (instruct, pause, resume), emitting events (POST /events, an
// emitter's socket: the adapter and the bridge use the relay's own token)
// and changing rules need admin.

// commandRole is the role a command needs.
func commandRole(typ string) access.Role {
	switch typ {
	case rules.CommandType, "control.cancel", mapping.TypeRate:
		return access.RoleAnswer
	}
	return access.RoleAdmin
}

// can reports whether what a admitted may act in role r. The nil admission
// is a watch-only relay's, whose posture decides on its own (it refuses
// every command and takes events from anyone).
func (a *admission) can(r access.Role) bool { return a == nil || a.who.Can(r) }

// ceiling is the capture ceiling the admitted principal is served at, and
// whether it is below what the relay holds.
func (a *admission) ceiling() (aep.Capture, bool) {
	if a == nil || a.who.Capture >= aep.CaptureFull {
		return aep.CaptureFull, false
	}
	return a.who.Capture, true
}

// capTo lowers p's ceiling to the principal's.
func (p *streamParams) capTo(a *admission) {
	if c, capped := a.ceiling(); capped && (!p.capped || c < p.ceiling) {
		p.ceiling, p.capped = c, true
	}
}

// refusal says why a principal may not do what, for the error frame or
// the 403 body.
func refusal(a *admission, r access.Role, what string) string {
	return fmt.Sprintf("%s needs the %s role; %s holds %s", what, r, a.who.Name, a.who.Role)
}

// allow answers 403 unless r's principal may act in role.
func allow(w http.ResponseWriter, r *http.Request, role access.Role, what string) bool {
	a := admissionOf(r)
	if a.can(role) {
		return true
	}
	httpguard.WriteError(w, http.StatusForbidden, wire.CodeForbidden, refusal(a, role, what))
	return false
}

// rulesRole is the role a request to the rules API needs: reading them
// and asking what they would decide is watching; changing them is admin,
// and so is proposing the rule an answer would make, the first half of
// saving it (it reads the held request, which a watcher has no use for).
func rulesRole(r *http.Request) access.Role {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return access.RoleWatch
	}
	if r.URL.Path == rules.APIPath+"/test" {
		return access.RoleWatch
	}
	return access.RoleAdmin
}
