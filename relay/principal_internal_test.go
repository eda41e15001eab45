package relay

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aep-kimi/aep-kimi/access"
)

// authenticate tells the handlers behind it who a request speaks for: the
// owner for the relay's token, a person for theirs; a blank, unknown or
// hash-for-token bearer is refused.
func TestPrincipalOf(t *testing.T) {
	home := t.TempDir()
	_, alice, err := access.Store{Home: home}.Add("alice", access.RoleAnswer, "redacted")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(Config{Token: "relay-token-0123456789", People: access.OpenBook(home, nil)})
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
