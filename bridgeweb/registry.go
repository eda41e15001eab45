package bridgeweb

import (
	"sort"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/procinfo"
)

// registry follows the live kap-servers of one instance registry across
// polls. kimi web rewrites its record every heartbeat, so a record that does
// not parse while it still exists is taken as caught mid-write: the server
// it named stays live as long as its process does.
type registry struct {
	kimiHome   string
	staleAfter time.Duration
	// pidAlive tests a pid; nil means the real checks: kill(pid, 0), not a
	// zombie, and the same process as when the server appeared.
	pidAlive func(int) bool
	// allowRemote lets records naming a non-loopback host through.
	allowRemote bool
	live        map[string]Instance // by Instance.key
	// starts is the start time (procinfo's token) of each server's process
	// when it was first seen: a later reading that differs is another
	// process holding a reused pid.
	starts map[string]string
}

// alive is a server's liveness for the registry.
func (r *registry) alive(in Instance) bool {
	if r.pidAlive != nil {
		return r.pidAlive(in.PID)
	}
	if !serverAlive(in) {
		return false
	}
	info, err := procinfo.Read(in.PID)
	if err != nil {
		return true // no reader on this platform: kill(pid, 0) decides
	}
	want, seen := r.starts[in.key()]
	if !seen {
		r.starts[in.key()] = info.Start
		return true
	}
	return info.Start == want
}

// registryChange is one poll's news.
type registryChange struct {
	appeared, gone []Instance
	skipped        []Skipped
}

// poll scans the registry once and reports the servers that appeared and the
// ones gone (record removed, process dead, heartbeat stopped) since the last
// poll. On a read error of the registry itself nothing is reported gone.
func (r *registry) poll(now time.Time) (registryChange, error) {
	if r.live == nil {
		r.live, r.starts = map[string]Instance{}, map[string]string{}
	}
	found, skipped, err := Scan(r.kimiHome, now, r.staleAfter, r.alive, r.allowRemote)
	if err != nil {
		return registryChange{skipped: skipped}, err
	}
	next := make(map[string]Instance, len(found))
	for _, in := range found {
		next[in.key()] = in
	}
	torn := map[string]bool{}
	for _, s := range skipped {
		if s.Reason == SkipUnreadable {
			torn[s.Path] = true
		}
	}
	for k, in := range r.live {
		if _, ok := next[k]; !ok && torn[in.Path] && r.alive(in) {
			next[k] = in
		}
	}
	var ch registryChange
	ch.skipped = skipped
	for k, in := range r.live {
		if _, ok := next[k]; !ok {
			ch.gone = append(ch.gone, in)
		}
	}
	for k := range r.starts {
		if _, ok := next[k]; !ok {
			delete(r.starts, k) // a server gone, or a record never followed
		}
	}
	for _, in := range found {
		if _, ok := r.live[in.key()]; !ok {
			ch.appeared = append(ch.appeared, in)
		}
	}
	sort.Slice(ch.gone, func(i, j int) bool { return ch.gone[i].key() < ch.gone[j].key() })
	r.live = next
	return ch, nil
}
