// Package credreg ties every live connection to the credential that
// admitted it, so ending a credential ends what it opened: a logout, an
// expired login, a rotated login key or a replaced token closes each
// stream and socket the credential admitted, at once, instead of leaving
// them to run until the client leaves.
//
// An authority (the relay's bearer token, the fleet page's logins) admits
// a connection through Registry.Admit and changes its state through
// Registry.Update, ending the credentials the change ends (Tx.End). Both
// run under one lock with the authority's own check and state change, so a
// connection is either refused by the new state or registered in time to
// be ended with the old: none slips between.
package credreg

import (
	"context"
	"sync"
	"time"
)

// Reasons a credential's connections end; a socket's closing frame and a
// stream's last comment carry them.
const (
	// ReasonLoggedOut: a browser logged out, which ends every login.
	ReasonLoggedOut = "logged-out"
	// ReasonExpired: the login's lifetime ran out.
	ReasonExpired = "login-expired"
	// ReasonKeyRotated: the key the logins are sealed with was replaced
	// (its file changed under the running server).
	ReasonKeyRotated = "login-key-rotated"
	// ReasonTokenChanged: the bearer token was replaced.
	ReasonTokenChanged = "token-changed"
	// ReasonEvicted: the login was dropped to admit newer ones past the
	// bound on logins held.
	ReasonEvicted = "login-evicted"
	// ReasonRevoked: the person's token was revoked or changed (their
	// entry left the tokens file, or its role or capture changed).
	ReasonRevoked = "token-revoked"
)

// Credential is what admitted a connection.
type Credential struct {
	// ID names the credential: every connection it admitted ends together
	// when it is revoked ("token", "login:...").
	ID string
	// Group names the credentials an authority revokes together (all of a
	// page's logins when its key rotates).
	Group string
	// Expires, when set, ends the credential's connections at that time.
	Expires time.Time
	// Principal names the person the credential speaks for: revoking
	// their token ends their logins too.
	Principal string
}

// ByID matches the credential named id.
func ByID(id string) func(Credential) bool {
	return func(c Credential) bool { return c.ID == id }
}

// ByPrincipal matches every credential of the person named name.
func ByPrincipal(name string) func(Credential) bool {
	return func(c Credential) bool { return c.Principal == name }
}

// InGroup matches every credential of group.
func InGroup(group string) func(Credential) bool {
	return func(c Credential) bool { return c.Group == group }
}

// Registry holds the live connections of each credential. The zero value is
// ready to use.
type Registry struct {
	// Now is the clock expiries are measured on; nil means time.Now.
	Now func() time.Time

	mu   sync.Mutex
	byID map[string]map[*Lease]struct{}
	n    int
}

// Lease is one live connection's hold on its credential. Its owner watches
// Done and, once it is closed, ends the connection with Reason; it calls
// Release when the connection ends on its own.
type Lease struct {
	reg    *Registry
	cred   Credential
	ctx    context.Context // done when the credential ends, not on Release
	end    context.CancelFunc
	reason string // written before ctx is done
	timer  *time.Timer
	gone   bool // released or ended; guarded by reg.mu
}

// Done is closed when the credential is revoked or expires.
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// AfterEnd calls fn in its own goroutine once the lease ends, unless stop
// is called first.
func (l *Lease) AfterEnd(fn func()) (stop func() bool) { return context.AfterFunc(l.ctx, fn) }

// Reason says why Done closed; empty while it has not.
func (l *Lease) Reason() string {
	if l.ctx.Err() == nil {
		return ""
	}
	return l.reason
}

// Ended reports whether Done is closed.
func (l *Lease) Ended() bool { return l.Reason() != "" }

// Credential is the credential the lease holds.
func (l *Lease) Credential() Credential { return l.cred }

// Release detaches the connection from its credential; it is idempotent.
func (l *Lease) Release() {
	l.reg.mu.Lock()
	defer l.reg.mu.Unlock()
	l.reg.dropLocked(l)
}

func (r *Registry) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Tx is the registry under its lock, handed to an authority's check or
// change.
type Tx struct{ r *Registry }

// End ends every live lease whose credential matches, with reason, and
// returns how many it ended.
func (tx *Tx) End(reason string, match func(Credential) bool) int {
	n := 0
	for _, set := range tx.r.byID {
		for l := range set {
			if match(l.cred) {
				tx.r.endLocked(l, reason)
				n++
			}
		}
	}
	return n
}

// Admit runs check and, when it admits a credential that has not expired,
// registers a lease on it. check runs under the registry's lock, as every
// Update does, so it sees the authority's state before or after a change,
// never between.
func (r *Registry) Admit(check func(*Tx) (Credential, bool)) (*Lease, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cred, ok := check(&Tx{r})
	if !ok {
		return nil, false
	}
	var left time.Duration
	if !cred.Expires.IsZero() {
		if left = cred.Expires.Sub(r.now()); left <= 0 {
			return nil, false
		}
	}
	l := &Lease{reg: r, cred: cred}
	l.ctx, l.end = context.WithCancel(context.Background())
	if r.byID == nil {
		r.byID = make(map[string]map[*Lease]struct{})
	}
	set := r.byID[cred.ID]
	if set == nil {
		set = make(map[*Lease]struct{})
		r.byID[cred.ID] = set
	}
	set[l] = struct{}{}
	r.n++
	if left > 0 {
		l.timer = time.AfterFunc(left, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.endLocked(l, ReasonExpired)
		})
	}
	return l, true
}

// Update runs fn under the registry's lock: an authority changes its state
// there and ends what the change ends (tx.End).
func (r *Registry) Update(fn func(*Tx)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fn(&Tx{r})
}

// Revoke ends every lease whose credential matches, with reason.
func (r *Registry) Revoke(reason string, match func(Credential) bool) int {
	var n int
	r.Update(func(tx *Tx) { n = tx.End(reason, match) })
	return n
}

// Len is the number of live leases.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// endLocked ends a live lease with reason. r.mu is held.
func (r *Registry) endLocked(l *Lease, reason string) {
	if l.gone {
		return
	}
	r.dropLocked(l)
	l.reason = reason
	l.end()
}

// dropLocked forgets a lease. r.mu is held.
func (r *Registry) dropLocked(l *Lease) {
	if l.gone {
		return
	}
	l.gone = true
	if l.timer != nil {
		l.timer.Stop()
	}
	set := r.byID[l.cred.ID]
	delete(set, l)
	if len(set) == 0 {
		delete(r.byID, l.cred.ID)
	}
	r.n--
}
