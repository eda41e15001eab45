package relay

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
)

// The identity a NATS URL's credentials give: the user, or a name derived
// from it when it is no subject token; never a bare token, which is a
// secret.
func TestURLIdentity(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		urls, id string
		ok       bool
	}{
		{"nats://127.0.0.1:4222", "", false},
		{"nats://a:4222,nats://relay-1:pw@b:4222", "relay-1", true},
		{"nats://s3cret-token@a:4222", tokenIdentity, true},
		{"nats://us.er:pw@a:4222", "user-", true},
		{"nats://%zz@a", "", false},
	} {
		id, ok := urlIdentity(c.urls)
		if ok != c.ok || (c.id != "user-" && id != c.id) || (c.id == "user-" && (len(id) != 21 || !identityRE.MatchString(id))) {
			t.Errorf("urlIdentity(%q) = %q, %v; want %q, %v", c.urls, id, ok, c.id, c.ok)
		}
	}
	if got := urlHosts("nats://relay:pw@a:4222, nats://tok@b:4222"); got != "nats://a:4222,nats://b:4222" {
		t.Errorf("urlHosts left credentials in: %q", got)
	}
}

// A store that listened holds messages whose subjects name their
// publisher; reopened private, it purges those too as it trims.
func TestJetStreamPrivatePurgesWhatItWroteListening(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := func(listen string) *JetStreamBackend {
		js, err := OpenJetStream(context.Background(), JetStreamConfig{Dir: dir, Listen: listen, Buffer: 20})
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	ingest := func(js *JetStreamBackend, from, to int) {
		for i := from; i < to; i += 8 {
			var batch []*Message
			for j := i; j < min(i+8, to); j++ {
				batch = append(batch, benchEvent(t, "s", int64(j)))
			}
			if res := js.Ingest(batch); res.Err != nil {
				t.Fatal(res.Err)
			}
		}
	}
	js := open(netaddr.FreeAddr(t))
	ingest(js, 0, 20)
	js.Close()
	js = open("")
	defer js.Close()
	if !js.mixed {
		t.Fatal("the rebuild did not notice subjects naming their publisher")
	}
	ingest(js, 20, 20+2*floorEvery)
	poll.Until(10*time.Second, func() bool { return js.purged.Load() >= 2 })
	js.stateTime = time.Time{}
	if st := js.streamState(); st.Msgs != 20 {
		t.Fatalf("stream holds %d messages of one session with depth 20, want 20", st.Msgs)
	}
}

// A stream subject reads back as the session and publisher it was written
// for, and nothing else parses as a session subject by accident; no input
// panics.
func FuzzStreamSubject(f *testing.F) {
	f.Add("s-1", "embedded", "aep.AEP.s.cy0x.embedded")
	f.Add("a.b c", "UABC", "aep.AEP.s.cy0x")
	f.Add("", "anonymous", "aep.AEP.s..x")
	f.Add("\x00é", "relay-1", "aep.AEP.route.cy0x.")
	b := &JetStreamBackend{subject: "aep.AEP.s."}
	f.Fuzz(func(t *testing.T, session, identity, subject string) {
		_, _, _ = b.subjectSession(subject)
		_ = lastToken(subject)
		if session == "" || !identityRE.MatchString(identity) {
			return
		}
		b.identity = identity
		s, sender, ok := b.subjectSession(b.storedSubject(session))
		if !ok || s != session || sender != identity || lastToken(b.storedSubject(session)) != identity {
			t.Fatalf("%q as %q: read back %q from %q (%v)", session, identity, s, sender, ok)
		}
	})
}

// The identity a URL's credentials give is always a subject token, and
// never carries the URL's password or token.
func FuzzURLIdentity(f *testing.F) {
	f.Add("nats://relay:pw@127.0.0.1:4222")
	f.Add("nats://tok@a:1,nats://b:2")
	f.Add("nats://a%2Eb:p%40ss@h")
	f.Fuzz(func(t *testing.T, urls string) {
		id, ok := urlIdentity(urls)
		if !ok {
			return
		}
		if !identityRE.MatchString(id) {
			t.Fatalf("identity %q of %q is not a subject token", id, urls)
		}
		for _, raw := range strings.Split(urls, ",") {
			u, err := url.Parse(strings.TrimSpace(raw))
			if err != nil || u.User == nil {
				continue
			}
			secret, hasPassword := u.User.Password()
			if !hasPassword {
				secret = u.User.Username()
			} else if strings.Contains(u.User.Username(), secret) {
				return // the user name, which is the identity, holds it
			}
			if len(secret) >= 4 && strings.Contains(id, secret) {
				t.Fatalf("identity %q of %q carries its secret", id, urls)
			}
			return
		}
	})
}
