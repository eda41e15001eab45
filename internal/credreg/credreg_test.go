package credreg

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
)

func admit(t *testing.T, r *Registry, c Credential) *Lease {
	t.Helper()
	l, ok := r.Admit(func(*Tx) (Credential, bool) { return c, true })
	if !ok {
		t.Fatalf("admit %+v refused", c)
	}
	return l
}

func ended(l *Lease) bool {
	select {
	case <-l.Done():
		return true
	default:
		return false
	}
}

func TestRevokeEndsWhatTheCredentialAdmitted(t *testing.T) {
	var r Registry // the zero value is ready
	a1 := admit(t, &r, Credential{ID: "login:a", Group: "page"})
	a2 := admit(t, &r, Credential{ID: "login:a", Group: "page"})
	b := admit(t, &r, Credential{ID: "login:b", Group: "page"})
	tok := admit(t, &r, Credential{ID: "token", Group: "token"})
	gone := admit(t, &r, Credential{ID: "login:a", Group: "page"})
	gone.Release()
	gone.Release() // idempotent
	if n := r.Len(); n != 4 {
		t.Fatalf("Len %d, want 4", n)
	}
	if n := r.Revoke(ReasonLoggedOut, ByID("login:a")); n != 2 {
		t.Errorf("revoking login:a ended %d, want its 2 live leases", n)
	}
	if !ended(a1) || !ended(a2) || a1.Reason() != ReasonLoggedOut || !a2.Ended() {
		t.Errorf("login:a's leases: ended %v %v, reason %q", ended(a1), ended(a2), a1.Reason())
	}
	if ended(b) || ended(tok) || ended(gone) || b.Reason() != "" || gone.Ended() {
		t.Error("revoking one credential ended others, or a released lease")
	}
	if n := r.Revoke(ReasonKeyRotated, InGroup("page")); n != 1 || !ended(b) || b.Reason() != ReasonKeyRotated {
		t.Errorf("group revoke ended %d (b %v %q)", n, ended(b), b.Reason())
	}
	if n := r.Revoke(ReasonLoggedOut, InGroup("page")); n != 0 {
		t.Errorf("a second revoke ended %d again", n)
	}
	if r.Len() != 1 || ended(tok) {
		t.Errorf("Len %d, token ended %v", r.Len(), ended(tok))
	}
	tok.Release()
	if r.Len() != 0 {
		t.Errorf("Len %d after every lease ended or was released", r.Len())
	}
}

func TestExpiry(t *testing.T) {
	var r Registry
	if _, ok := r.Admit(func(*Tx) (Credential, bool) {
		return Credential{ID: "old", Expires: time.Now().Add(-time.Second)}, true
	}); ok {
		t.Error("an expired credential was admitted")
	}
	start := time.Now()
	l := admit(t, &r, Credential{ID: "soon", Expires: start.Add(100 * time.Millisecond)})
	kept := admit(t, &r, Credential{ID: "later", Expires: start.Add(time.Hour)})
	released := admit(t, &r, Credential{ID: "soon", Expires: start.Add(100 * time.Millisecond)})
	released.Release()
	select {
	case <-l.Done():
		if l.Reason() != ReasonExpired || time.Since(start) < 100*time.Millisecond {
			t.Errorf("ended after %v with %q", time.Since(start), l.Reason())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an expired lease did not end")
	}
	if ended(kept) || ended(released) {
		t.Error("expiry ended another credential's lease, or a released one")
	}
	if r.Len() != 1 {
		t.Errorf("Len %d, want 1", r.Len())
	}
}

func TestAfterEnd(t *testing.T) {
	var r Registry
	l := admit(t, &r, Credential{ID: "x"})
	fired := make(chan struct{})
	l.AfterEnd(func() { close(fired) })
	other := admit(t, &r, Credential{ID: "y"})
	stop := other.AfterEnd(func() { t.Error("a stopped AfterEnd ran") })
	stop()
	other.Release() // releasing does not end
	r.Revoke(ReasonTokenChanged, func(Credential) bool { return true })
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("AfterEnd never ran")
	}
	if ended(other) {
		t.Error("a released lease ended")
	}
}

// An admission racing a revocation is refused by the new state or ended
// with the old: no lease admitted under the old state outlives the change.
func TestAdmitAtomicWithUpdate(t *testing.T) {
	var r Registry
	valid := true // the authority's state, guarded by the registry's lock
	var mu sync.Mutex
	var leases []*Lease
	var wg sync.WaitGroup
	var tries, admitted atomic.Int64
	stop := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				l, ok := r.Admit(func(*Tx) (Credential, bool) { return Credential{ID: "login", Group: "page"}, valid })
				tries.Add(1)
				if ok {
					admitted.Add(1)
					mu.Lock()
					leases = append(leases, l)
					mu.Unlock()
				}
			}
		}()
	}
	// The change lands amid admissions: some before it, many tried after.
	poll.Must(t, 5*time.Second, "admissions under the old state", func() bool { return admitted.Load() >= 100 })
	r.Update(func(tx *Tx) {
		valid = false
		tx.End(ReasonLoggedOut, InGroup("page"))
	})
	after := tries.Load()
	poll.Must(t, 5*time.Second, "admissions tried after the change", func() bool { return tries.Load() >= after+100 })
	close(stop)
	wg.Wait()
	if len(leases) == 0 {
		t.Fatal("nothing was admitted before the change: the race was not run")
	}
	for _, l := range leases {
		if !ended(l) {
			t.Fatal("a lease admitted under the old state outlived the change")
		}
	}
}
