package fleetpage_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
)

// A page login made with a person's token speaks for that person (the
// relay's PrincipalOf, the page's /app/auth), and ends with their token:
// its socket closes, its cookie opens nothing more, and a new token for
// the same name does not bring it back.
func TestPersonLoginCarriesPrincipalAndEndsWithToken(t *testing.T) {
	t.Parallel()
	store, alice, base := peopleRelay(t, "alice", access.RoleWatch, 20*time.Millisecond)
	login := func(tok string) (*login, map[string]any) { return tryLogin(t, base, tok) }
	if l, _ := login("not-a-token-of-anyone"); l != nil {
		t.Fatal("an unknown token logged in")
	}
	a, body := login(alice)
	if a == nil || body["name"] != "alice" || body["role"] != "watch" || body["capture"] != "metadata" {
		t.Fatalf("alice's login: %v", body)
	}
	res := do(t, base, req{path: "/app/auth", login: a, origin: base})
	var auth map[string]any
	_ = json.NewDecoder(res.Body).Decode(&auth)
	if auth["logged_in"] != true || auth["name"] != "alice" {
		t.Fatalf("/app/auth: %v", auth)
	}
	o, body := login(testToken)
	if o == nil || body["name"] != access.OwnerName || body["role"] != "admin" {
		t.Fatalf("the owner's login: %v", body)
	}
	closed := openSocket(t, base, a)
	owners := openSocket(t, base, o)
	if _, err := store.Remove("alice"); err != nil {
		t.Fatal(err)
	}
	closedWith(t, "alice's token removed", closed, "token-revoked")
	if code := status(t, base, req{login: a, origin: base}); code != http.StatusUnauthorized {
		t.Errorf("a login of a revoked token: %d", code)
	}
	_, again, err := store.Add("alice", access.RoleAdmin, "")
	if err != nil {
		t.Fatal(err)
	}
	poll.Must(t, 5*time.Second, "the relay to admit alice's new token", func() bool { l, _ := login(again); return l != nil })
	if code := status(t, base, req{login: a, origin: base}); code != http.StatusUnauthorized {
		t.Errorf("a new token for alice revived her old login: %d", code)
	}
	select {
	case r := <-owners:
		t.Fatalf("the owner's socket closed (%q) with alice's token", r)
	default:
	}
}

// A person who is not an admin logs out their own browser; only an admin's
// (the owner's) logout ends every login.
func TestPersonLogoutEndsOnlyTheirs(t *testing.T) {
	t.Parallel()
	_, walt, base := peopleRelay(t, "walt", access.RoleWatch, 0)
	login := func(tok string) *login {
		l, body := tryLogin(t, base, tok)
		if l == nil {
			t.Fatalf("login: %v", body)
		}
		return l
	}
	owner, w := login(testToken), login(walt)
	ownerSock, waltSock := openSocket(t, base, owner), openSocket(t, base, w)
	do(t, base, req{method: http.MethodPost, path: "/app/logout", login: w, origin: base})
	closedWith(t, "walt's logout", waltSock, "logged-out")
	if code := status(t, base, req{login: w, origin: base}); code != http.StatusUnauthorized {
		t.Errorf("walt's login after his logout: %d", code)
	}
	if code := status(t, base, req{login: owner, origin: base}); code != http.StatusOK {
		t.Errorf("the owner's login after walt's logout: %d", code)
	}
	select {
	case r := <-ownerSock:
		t.Fatalf("walt's logout closed the owner's socket (%q)", r)
	case <-time.After(200 * time.Millisecond):
	}
	do(t, base, req{method: http.MethodPost, path: "/app/logout", login: owner, origin: base})
	closedWith(t, "the owner's logout", ownerSock, "logged-out")
}

// peopleRelay serves the page on a relay whose tokens file holds one
// person, name with role: the file's store, their token and the base URL
// (poll: how often the relay re-reads the file; 0 its default).
func peopleRelay(t *testing.T, name string, role access.Role, poll time.Duration) (access.Store, string, string) {
	t.Helper()
	home := t.TempDir()
	store := access.Store{Home: home}
	_, tok, err := store.Add(name, role, "")
	if err != nil {
		t.Fatal(err)
	}
	roster := access.OpenRoster(home, nil)
	page, err := fleetpage.New(fleetpage.Config{Token: testToken, People: roster})
	if err != nil {
		t.Fatal(err)
	}
	return store, tok, relaytest.RunServer(t, relay.Config{Token: testToken, Page: page, People: roster, TokenPoll: poll}).URL
}
