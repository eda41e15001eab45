package relay

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
)

// authenticate tells the handlers behind it who a request speaks for: the
// owner for the relay's token, a person for theirs; a blank, unknown or
// hash-for-token bearer is refused.
func TestPrincipalOf(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	_, alice, err := access.Store{Home: home}.Add("alice", access.RoleAnswer, "redacted")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(Config{Token: "relay-token-0123456789", People: access.OpenRoster(home, nil)})
	if err != nil {
		t.Fatal(err)
	}
	var got access.Principal
	var ok bool
	probe := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok = PrincipalOf(r)
	})
	h := s.authenticate(probe)
	for _, c := range []struct {
		token string
		code  int
		want  string
	}{
		{"relay-token-0123456789", 200, access.OwnerName},
		{alice, 200, "alice"},
		{"", 401, ""},
		{"   ", 401, ""},
		{"nobody's", 403, ""},
		{access.Hash(alice), 403, ""},
	} {
		got, ok = access.Principal{}, false
		r := httptest.NewRequest(http.MethodGet, "/events", nil)
		if c.token != "" {
			r.Header.Set("Authorization", "Bearer "+c.token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.code || got.Name != c.want || ok != (c.want != "") {
			t.Errorf("token %q: %d %+v %v, want %d %q", c.token, w.Code, got, ok, c.code, c.want)
		}
	}
	if _, ok := PrincipalOf(httptest.NewRequest(http.MethodGet, "/", nil)); ok {
		t.Error("PrincipalOf an unauthenticated request")
	}
}

// A principal at the relay's capture is served the held bytes themselves,
// with no allocation; a lower ceiling's copy is made once per message and
// ceiling, whichever subscriber asks first, and shared by the rest.
func TestCeilingCopiesOncePerCeiling(t *testing.T) {
	ev := &aep.Event{AEP: aep.Version, ID: aep.NewID(), Type: "run.started", Time: aep.FormatTime(time.Now()),
		Source: "aep://h/agent/a/session/s", Agent: "a", Session: "s", Seq: aep.Int64(0), Capture: "full",
		Data: json.RawMessage(`{"prompt":"the secret"}`)}
	m, err := NewMessage(ev, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	owner := &subscription{}
	var p streamParams
	p.capTo(&admission{who: access.Owner()})
	owner.ceiling, owner.capped = p.ceiling, p.capped
	if n := testing.AllocsPerRun(100, func() {
		if b, _ := owner.wire(m); &b[0] != &m.Raw[0] {
			t.Fatal("the owner was not served the held bytes")
		}
	}); n != 0 {
		t.Fatalf("the owner's delivery allocates %v times", n)
	}
	watchers := make([]*subscription, 3)
	var first []byte
	for i := range watchers {
		var p streamParams
		p.capTo(&admission{who: access.Principal{Name: "w", Role: access.RoleWatch, Capture: aep.CaptureMetadata}})
		watchers[i] = &subscription{ceiling: p.ceiling, capped: p.capped}
		b, err := watchers[i].wire(m)
		if err != nil || strings.Contains(string(b), "secret") {
			t.Fatalf("watcher %d got %s %v", i, b, err)
		}
		if first == nil {
			first = b
		} else if &b[0] != &first[0] {
			t.Fatalf("watcher %d got a copy of its own", i)
		}
	}
}
