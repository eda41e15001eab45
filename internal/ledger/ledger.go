// Package ledger remembers control command decisions for a target
// (AEP-0004 §3): one ack decision per deduplicated command, and the recorded
// ack re-emitted byte-identically when the command is redelivered.
package ledger

import (
	"slices"
	"sync"

	"github.com/aep-kimi/aep-kimi/aep"
)

// Size bounds the remembered commands: the recorded ack lives as long as the
// command's dedupe state, and the oldest state goes first.
const Size = 10000

// Key is a command's dedupe key, (source, id).
type Key struct{ Source, ID string }

// KeyOf is a command's key.
func KeyOf(cmd *aep.Event) Key { return Key{cmd.Source, cmd.ID} }

// Ledger maps commands to their recorded ack. A nil ack marks a command whose
// decision is pending. The zero value is ready to use.
type Ledger struct {
	mu    sync.Mutex
	acks  map[Key]*aep.Event
	order []Key
}

// Get returns the recorded ack (nil while pending) and whether the command
// is known at all.
func (l *Ledger) Get(k Key) (*aep.Event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ev, ok := l.acks[k]
	return ev, ok
}

// Claim records k as pending unless it is already known; it reports whether
// the caller now owns the decision.
func (l *Ledger) Claim(k Key) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.acks[k]; ok {
		return false
	}
	l.putLocked(k, nil)
	return true
}

// Release forgets k while its decision is still pending: a claim its owner
// will not decide (the command named no session of this target) must not
// leave every later delivery waiting on an ack that never comes. A recorded
// ack stays.
func (l *Ledger) Release(k Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ack, ok := l.acks[k]; !ok || ack != nil {
		return
	}
	delete(l.acks, k)
	// A claim being released is among the newest.
	for i := len(l.order) - 1; i >= 0; i-- {
		if l.order[i] == k {
			l.order = slices.Delete(l.order, i, i+1)
			break
		}
	}
}

// Put records the ack decided for k.
func (l *Ledger) Put(k Key, ack *aep.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.putLocked(k, ack)
}

func (l *Ledger) putLocked(k Key, ack *aep.Event) {
	if l.acks == nil {
		l.acks = map[Key]*aep.Event{}
	}
	if _, ok := l.acks[k]; !ok {
		if len(l.order) >= Size {
			delete(l.acks, l.order[0])
			l.order = l.order[1:]
		}
		l.order = append(l.order, k)
	}
	l.acks[k] = ack
}
