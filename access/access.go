// Package access is who may do what on a relay: people with names, each
// holding a token of their own with a role (watch, answer, admin) and a
// capture ceiling on everything the relay serves them. The relay's own token
// is the owner's, with the admin role.
//
// People's tokens are kept only as hashes, in one file under the AEP home
// (FileName, mode 0600), which `aep-kimi token add|rm` replaces atomically
// and the relay re-reads while it runs (Roster): a removed or changed entry
// ends every connection its token opened. When each token was last used is
// kept beside it (UsesFileName), written by the relay.
package access

import (
	"fmt"
	"regexp"

	"github.com/aep-kimi/aep-kimi/aep"
)

// Role is what a principal may do, each including the ones before it.
type Role string

// The roles, in order.
const (
	// RoleWatch reads: streams, sockets as a consumer, the page, rules.
	RoleWatch Role = "watch"
	// RoleAnswer also answers attention requests and cancels runs.
	RoleAnswer Role = "answer"
	// RoleAdmin also instructs, pauses and resumes, emits events, and
	// manages rules and tokens.
	RoleAdmin Role = "admin"
)

// Roles lists the roles in order, for usage and errors.
var roles = [...]Role{RoleWatch, RoleAnswer, RoleAdmin}

// rank orders roles; an unknown role ranks below watch and can do nothing.
func (r Role) rank() int {
	for i, x := range roles {
		if x == r {
			return i + 1
		}
	}
	return 0
}

// ParseRole reads a role's name.
func ParseRole(s string) (Role, error) {
	if Role(s).rank() == 0 {
		return "", fmt.Errorf("unknown role %q (want watch, answer or admin)", s)
	}
	return Role(s), nil
}

// OwnerName is the principal of the relay's own token.
const OwnerName = "owner"

// Principal is who a request was authenticated as.
type Principal struct {
	// Name is the person's name; the relay's own token is OwnerName.
	Name string
	Role Role
	// Capture is the ceiling on everything the relay serves this person.
	Capture aep.Capture
	// Token names the token the person was admitted with (zero for the
	// owner): whatever acts for them later (a login, an answer link, a
	// subscribed device) acts for that token, and ends with it, though
	// the name be given a new token.
	Token Ref
}

// Can reports whether p's role includes r.
func (p Principal) Can(r Role) bool {
	n := p.Role.rank()
	return n > 0 && n >= r.rank()
}

// Owner is the principal of the relay's own token: admin, at the relay's
// capture (everything it holds).
func Owner() Principal {
	return Principal{Name: OwnerName, Role: RoleAdmin, Capture: aep.CaptureFull}
}

// DefaultCapture is a role's ceiling when none is given: a watcher sees
// the fleet's shape and timings (metadata), the others what the relay
// holds.
func DefaultCapture(r Role) aep.Capture {
	if r == RoleWatch {
		return aep.CaptureMetadata
	}
	return aep.CaptureFull
}

// namePattern is a person's name: it rides in commands (the relay's
// aepkimiby) and in the answers' by, and is shown in terminals.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// CheckName refuses a name that is malformed or reserved.
func CheckName(name string) error {
	switch {
	case !namePattern.MatchString(name):
		return fmt.Errorf("name %q: want 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	case name == OwnerName:
		return fmt.Errorf("name %q is the relay token's own", name)
	}
	return nil
}
