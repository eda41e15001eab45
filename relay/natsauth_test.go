package relay_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
	"github.com/aep-kimi/aep-kimi/relay"
)

// A relay reaches an external NATS that demands TLS and a user of its own
// account through --nats-ca and --nats-creds; without either it is refused
// with an error that says so.
func TestExternalNATSWithTLSAndCreds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	caFile, tlsConf := testTLS(t, dir)
	credsFile, operator, resolver, sysAccount := testOperator(t, dir)
	ns := runNATSWith(t, "secured", func(o *server.Options) {
		o.TLSConfig, o.TLSTimeout = tlsConf, 5
		o.TrustedOperators = []*jwt.OperatorClaims{operator}
		o.AccountResolver = resolver
		o.SystemAccount = sysAccount
	})
	url := strings.Replace(ns.ClientURL(), "nats://", "tls://", 1)
	open := func(creds, ca string) (*relay.JetStreamBackend, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return relay.OpenJetStream(ctx, relay.JetStreamConfig{URL: url, CredsFile: creds, CAFile: ca})
	}
	if _, err := open(credsFile, ""); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without the CA: %v", err)
	}
	if _, err := open("", caFile); err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("without credentials: %v", err)
	}
	b, err := open(credsFile, caFile)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if res := b.Ingest([]*relay.Message{msg(t, mkEvent("s-tls", 0)), msg(t, mkEvent("s-tls", 1))}); res.Err != nil || res.Buffered != 2 {
		t.Fatalf("ingest over TLS with credentials: %+v", res)
	}
}

// testTLS writes a CA certificate to dir and returns its path and a server
// TLS configuration for 127.0.0.1 signed by it.
func testTLS(t *testing.T, dir string) (string, *tls.Config) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "nats"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
}

// testOperator sets up decentralized auth: an operator, a system account,
// an account with JetStream, and a user of it whose credentials file it
// writes to dir.
func testOperator(t *testing.T, dir string) (creds string, op *jwt.OperatorClaims, res *server.MemAccResolver, sys string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	okp, err := nkeys.CreateOperator()
	must(err)
	opub, _ := okp.PublicKey()
	op = jwt.NewOperatorClaims(opub)
	res = &server.MemAccResolver{}
	account := func(js bool) (nkeys.KeyPair, string) {
		akp, err := nkeys.CreateAccount()
		must(err)
		apub, _ := akp.PublicKey()
		ac := jwt.NewAccountClaims(apub)
		if js {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		ajwt, err := ac.Encode(okp)
		must(err)
		must(res.Store(apub, ajwt))
		return akp, apub
	}
	_, sys = account(false)
	op.SystemAccount = sys
	akp, _ := account(true)
	ukp, err := nkeys.CreateUser()
	must(err)
	upub, _ := ukp.PublicKey()
	ujwt, err := jwt.NewUserClaims(upub).Encode(akp)
	must(err)
	seed, _ := ukp.Seed()
	cfg, err := jwt.FormatUserConfig(ujwt, seed)
	must(err)
	creds = filepath.Join(dir, "relay.creds")
	must(os.WriteFile(creds, cfg, 0o600))
	return creds, op, res, sys
}

// natsUser makes a NATS user: its seed in a 0600 file in dir, followed by
// its public key as `nk -gen user -pubout` writes them, and the server's
// entry for it (no permissions of its own: the NATS of a user who did not
// restrict them).
func natsUser(t testing.TB, dir, name string) (string, *server.NkeyUser) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	path := filepath.Join(dir, name+".nk")
	if err := os.WriteFile(path, []byte(string(seed)+"\n"+pub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, &server.NkeyUser{Nkey: pub}
}

// listeningStore opens an embedded store whose NATS listens on a free
// loopback port, and returns it with its client URL, directory and logs.
func listeningStore(t *testing.T) (*relay.JetStreamBackend, string, string, *syncbuf.Buffer) {
	t.Helper()
	dir := t.TempDir()
	addr := netaddr.FreeAddr(t)
	logs := &syncbuf.Buffer{}
	b, err := relay.OpenJetStream(context.Background(), relay.JetStreamConfig{Dir: dir, Listen: addr, Logger: newTestLogger(logs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, "nats://" + addr, dir, logs
}

// An embedded NATS that listens takes no client without its credentials:
// INFO asks for them, a bare CONNECT and a key of the client's own are
// refused. The credentials it generated (0600, in the store's directory,
// in no log) let a second relay share the stream and route commands to it.
func TestEmbeddedNATSTakesOnlyItsRelays(t *testing.T) {
	t.Parallel()
	a, natsURL, dir, logs := listeningStore(t)
	creds := filepath.Join(dir, relay.NATSCredsName)
	st, err := os.Lstat(creds)
	if err != nil || st.Mode().Perm() != 0o600 || !st.Mode().IsRegular() {
		t.Fatalf("credentials file: %v %v, want a regular 0600 file", st, err)
	}

	conn, err := net.Dial("tcp", strings.TrimPrefix(natsURL, "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	infoLine, _ := r.ReadString('\n')
	var info struct {
		AuthRequired bool `json:"auth_required"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(infoLine), "INFO ")), &info); err != nil || !info.AuthRequired {
		t.Fatalf("INFO %q (%v): want auth_required", infoLine, err)
	}
	fmt.Fprint(conn, "CONNECT {\"verbose\":false}\r\nPING\r\n")
	if reply, _ := r.ReadString('\n'); !strings.Contains(reply, "Authorization Violation") {
		t.Fatalf("a bare CONNECT got %q, want an authorization violation", reply)
	}

	stranger, _ := nkeys.CreateUser()
	strangerPub, _ := stranger.PublicKey()
	for name, opts := range map[string][]nats.Option{
		"no credentials":      nil,
		"a key of its own":    {nats.Nkey(strangerPub, stranger.Sign)},
		"a user and password": {nats.UserInfo("relay", "guess")},
	} {
		if nc, err := nats.Connect(natsURL, append(opts, nats.Timeout(5*time.Second))...); !errors.Is(err, nats.ErrAuthorization) {
			if nc != nil {
				nc.Close()
			}
			t.Fatalf("%s: connect got %v, want an authorization violation", name, err)
		}
	}
	if _, err := relay.OpenJetStream(context.Background(), relay.JetStreamConfig{URL: natsURL}); err == nil || !strings.Contains(err.Error(), "--nats-creds") {
		t.Fatalf("a relay without credentials: %v, want a refusal naming --nats-creds", err)
	}

	b, err := relay.OpenJetStream(context.Background(), relay.JetStreamConfig{URL: natsURL, CredsFile: creds})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	srvA := relaytest.RunServer(t, relay.Config{Token: testToken, Backend: a})
	srvB := relaytest.RunServer(t, relay.Config{Token: testToken, Backend: b})
	mustPost(t, srvA, mkEvent("s-a", 0))
	mustPost(t, srvB, mkEvent("s-b", 0))
	for name, srv := range map[string]*relaytest.Server{"A": srvA, "B": srvB} {
		eventually(t, name+" holds both relays' events", func() bool {
			return len(sessionReplay(t, srv, "s-a")) == 1 && len(sessionReplay(t, srv, "s-b")) == 1
		})
	}
	// Commands cross both ways.
	for _, c := range []struct {
		name        string
		claim, send *relaytest.Server
	}{{"B to A", srvA, srvB}, {"A to B", srvB, srvA}} {
		session := "s-ctl-" + strings.ReplaceAll(c.name, " ", "")
		tgt := target(t, c.claim, "emitter", "kimi", session, `{"accepts":["control.cancel"]}`)
		other := srvA
		if c.claim == srvA {
			other = srvB
		}
		eventually(t, "the other relay holds the claim", func() bool { return len(sessionReplay(t, other, session)) == 1 })
		sender := helloWS(t, c.send, "consumer", nil, "sender")
		cmd := command("control.cancel", session, `{"scope":"run"}`)
		sender.send(t, cmd)
		if got := tgt.expect(t, func(f wsFrame) bool { return f.str("type") == "control.cancel" }); got.str("id") != cmd.ID {
			t.Fatalf("%s: the claimant got %s", c.name, got.raw)
		}
	}

	seed, err := nkeys.ParseDecoratedUserNKey(mustRead(t, creds))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := seed.Seed()
	if strings.Contains(logs.String(), string(raw)) {
		t.Fatal("the relay logged the NATS seed")
	}
	if !strings.Contains(logs.String(), creds) {
		t.Fatalf("the relay does not say where the credentials are: %s", logs.String())
	}
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// violations collects a NATS client's asynchronous errors (permission
// violations).
type violations chan string

func (v violations) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	select {
	case v <- err.Error():
	default:
	}
}

// expect waits for a permission violation naming subject.
func (v violations) expect(t *testing.T, what, subject string) {
	t.Helper()
	timeout := time.After(waitShort)
	for {
		select {
		case e := <-v:
			if strings.Contains(e, "Permissions Violation") && strings.Contains(e, subject) {
				return
			}
		case <-timeout:
			t.Fatalf("%s: no permissions violation for %s", what, subject)
		}
	}
}

// refused runs call (a publish or a request on subject) until the server
// reports its permission violation, then ends it: it must not have been
// answered by then. The violation is what a refusal looks like on the
// wire; nothing answers a message the server did not deliver.
func (v violations) refused(t *testing.T, what, subject string, call func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- call(ctx) }()
	v.expect(t, what, subject)
	cancel()
	if err := <-errc; err == nil {
		t.Fatalf("%s: %s was answered", what, subject)
	}
}

// The second relays' credentials speak only for themselves: holding them, a
// client cannot publish as the relay that runs the NATS (stored, live or
// routed), nor without an identity, nor read that relay's replies, nor
// delete or purge the stream. What it publishes under its own identity is
// a relay's event like any other.
func TestEmbeddedNATSIdentityEnforced(t *testing.T) {
	t.Parallel()
	a, natsURL, dir, _ := listeningStore(t)
	creds := filepath.Join(dir, relay.NATSCredsName)
	kp, err := nkeys.ParseDecoratedUserNKey(mustRead(t, creds))
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	v := make(violations, 64)
	nc, err := nats.Connect(natsURL, nats.Nkey(pub, kp.Sign), nats.CustomInboxPrefix("_INBOX."+pub), nats.ErrorHandler(v.handler))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString([]byte("s-forged"))
	forged := line(t, mkEvent("s-forged", 0, withType("attention.requested")))
	for _, subject := range []string{"aep.AEP.s." + enc + ".embedded", "aep.AEP.s." + enc} {
		v.refused(t, "stored event", subject, func(ctx context.Context) error {
			_, err := js.Publish(ctx, subject, forged)
			return err
		})
	}
	live := "aep.AEP.live.embedded"
	if err := nc.Publish(live, line(t, agentEvent())); err != nil {
		t.Fatal(err)
	}
	v.expect(t, "live event", live)
	route := "aep.AEP.route." + enc + ".embedded"
	cancelCmd := line(t, command("control.cancel", "s-forged", `{}`))
	v.refused(t, "routed command", route, func(ctx context.Context) error {
		_, err := nc.RequestWithContext(ctx, route, cancelCmd)
		return err
	})
	if _, err := nc.SubscribeSync("_INBOX.embedded.>"); err != nil {
		t.Fatal(err)
	}
	v.expect(t, "the relay's inbox", "_INBOX.embedded.>")
	for _, api := range []string{"$JS.API.STREAM.PURGE.AEP", "$JS.API.STREAM.DELETE.AEP", "$JS.API.STREAM.MSG.DELETE.AEP"} {
		v.refused(t, "stream API", api, func(ctx context.Context) error {
			_, err := nc.RequestWithContext(ctx, api, []byte(`{"seq":1}`))
			return err
		})
	}
	if got := a.Sessions(); len(got) != 0 {
		t.Fatalf("the relay admitted forged events: %v", got)
	}

	// Under its own identity the peer is a relay: its event is admitted,
	// whatever Aep-Relay header it writes.
	own := &nats.Msg{Subject: "aep.AEP.s." + enc + "." + pub, Data: forged, Header: nats.Header{"Aep-Relay": {"whoever"}}}
	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	if _, err := js.PublishMsg(ctx, own); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the relay admits the peer's event", func() bool { return len(a.Sessions()) == 1 })
}

// The credentials the embedded server keeps are refused when a link stands
// in their place or others may read them; a named credentials file others
// may read is refused too.
func TestNATSCredentialsFileRefused(t *testing.T) {
	t.Parallel()
	open := func(dir string) error {
		b, err := relay.OpenJetStream(context.Background(), relay.JetStreamConfig{Dir: dir, Listen: netaddr.FreeAddr(t)})
		if err == nil {
			b.Close()
		}
		return err
	}
	dir := t.TempDir()
	elsewhere := filepath.Join(t.TempDir(), "seed")
	if err := os.WriteFile(elsewhere, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, relay.NATSCredsName)); err != nil {
		t.Fatal(err)
	}
	if err := open(dir); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("a link in place of the credentials: %v", err)
	}
	if b := mustRead(t, elsewhere); string(b) != "x" {
		t.Fatalf("the link's target was written: %q", b)
	}

	dir = t.TempDir()
	if err := open(dir); err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(dir, relay.NATSCredsName)
	first := mustRead(t, creds)
	if err := open(dir); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mustRead(t, creds), first) {
		t.Fatal("a restart generated new credentials")
	}
	if err := os.Chmod(creds, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := open(dir); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Fatalf("credentials others may read: %v", err)
	}
	_, err := relay.OpenJetStream(context.Background(), relay.JetStreamConfig{URL: "nats://127.0.0.1:1", CredsFile: creds})
	if err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Fatalf("--nats-creds others may read: %v", err)
	}
}

// A relay on an external NATS without credentials says what that exposes;
// one whose NATS authenticated it does not.
func TestExternalNATSWithoutCredentialsWarns(t *testing.T) {
	t.Parallel()
	open := func(cfg relay.JetStreamConfig) string {
		logs := &syncbuf.Buffer{}
		cfg.Logger = newTestLogger(logs)
		b, err := relay.OpenJetStream(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		b.Close()
		return logs.String()
	}
	const risk = "anyone who can reach it can read and forge events and answer held calls"
	if got := open(relay.JetStreamConfig{URL: runNATS(t, "open", nil, nil).ClientURL()}); !strings.Contains(got, risk) {
		t.Fatalf("no warning on a NATS without credentials: %s", got)
	}
	creds, user := natsUser(t, t.TempDir(), "relay")
	ns := runNATSWith(t, "closed", func(o *server.Options) { o.Nkeys = []*server.NkeyUser{user} })
	if got := open(relay.JetStreamConfig{URL: ns.ClientURL(), CredsFile: creds}); strings.Contains(got, risk) {
		t.Fatalf("a warning with credentials: %s", got)
	}
}

// A relay its NATS authenticated routes no command from a relay without
// credentials: the sender is the identity the subject names, whatever the
// headers say. From a relay with credentials the command is delivered.
func TestRoutedCommandNeedsAuthenticatedSender(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	credsA, userA := natsUser(t, dir, "a")
	credsB, userB := natsUser(t, dir, "b")
	ns := runNATSWith(t, "closed", func(o *server.Options) { o.Nkeys = []*server.NkeyUser{userA, userB} })
	a, err := relay.OpenJetStream(context.Background(), relay.JetStreamConfig{URL: ns.ClientURL(), CredsFile: credsA})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	delivered := make(chan string, 4)
	a.ServeRoutes(func(m *relay.Message) (string, string, uint64) {
		delivered <- m.ID
		return "", "", 0
	})
	a.Claimed("s-held", true)
	kp, err := nkeys.ParseDecoratedUserNKey(mustRead(t, credsB))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(ns.ClientURL(), nats.Nkey(userB.Nkey, kp.Sign))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	prefix := routePrefix("s-held")
	ask := func(sender string) string {
		t.Helper()
		cmd := command("control.attention.respond", "s-held", `{"answer":{"option":"deny"}}`)
		var resp *nats.Msg
		eventually(t, "the claimant relay subscribes", func() bool {
			resp, err = nc.RequestMsg(&nats.Msg{Subject: prefix + sender, Data: line(t, cmd), Header: nats.Header{"Aep-Relay": {"trusted"}}}, time.Second)
			return !errors.Is(err, nats.ErrNoResponders)
		})
		if err != nil {
			t.Fatal(err)
		}
		return string(resp.Data)
	}
	if got := ask("anonymous"); !strings.Contains(got, `"unauthorized"`) {
		t.Fatalf("a command from a relay without credentials: %s", got)
	}
	select {
	case id := <-delivered:
		t.Fatalf("the command %s was delivered", id)
	default:
	}
	if got := ask(userB.Nkey); strings.Contains(got, "code") {
		t.Fatalf("a command from an authenticated relay: %s", got)
	}
	select {
	case <-delivered:
	case <-time.After(waitShort):
		t.Fatal("the authenticated relay's command was not delivered")
	}
}

// Messages a relay published are skipped by its follower only when their
// subject carries its identity: another relay writing its Aep-Relay header
// does not hide its events from it.
func TestOwnMessagesByIdentityNotHeader(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	credsA, userA := natsUser(t, dir, "a")
	credsB, userB := natsUser(t, dir, "b")
	ns := runNATSWith(t, "closed", func(o *server.Options) { o.Nkeys = []*server.NkeyUser{userA, userB} })
	open := func(creds string) *relay.JetStreamBackend {
		b, err := relay.OpenJetStream(context.Background(), relay.JetStreamConfig{URL: ns.ClientURL(), CredsFile: creds})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	a := open(credsA)
	// The origin a's own messages carry, read off one of them.
	if res := a.Ingest([]*relay.Message{msg(t, mkEvent("s-a", 0))}); res.Err != nil {
		t.Fatal(res.Err)
	}
	kp, _ := nkeys.ParseDecoratedUserNKey(mustRead(t, credsB))
	nc, err := nats.Connect(ns.ClientURL(), nats.Nkey(userB.Nkey, kp.Sign))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	stream, err := js.Stream(ctx, "AEP")
	if err != nil {
		t.Fatal(err)
	}
	stored, err := stream.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(stored.Subject, "."+userA.Nkey) {
		t.Fatalf("a stored %s, want its identity last", stored.Subject)
	}
	origin := stored.Header.Get("Aep-Relay")
	ev := mkEvent("s-b", 0)
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "aep.AEP.s." + base64.RawURLEncoding.EncodeToString([]byte("s-b")) + "." + userB.Nkey,
		Data: line(t, ev), Header: nats.Header{"Aep-Relay": {origin}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "A admits B's event despite A's origin header", func() bool { return len(a.Sessions()) == 2 })
	open(credsB) // and B, sharing the stream, rebuilds both
}

// --nats-listen with port 0 means any free port, as everywhere else: two
// embedded stores asked for 127.0.0.1:0 both listen, each on a port of its
// own that NATSAddr and the log name (nats-server alone reads 0 as 4222,
// where the second would fail to start).
func TestEmbeddedNATSListenPortZero(t *testing.T) {
	t.Parallel()
	addrs := map[string]bool{}
	for i := 0; i < 2; i++ {
		logs := &syncbuf.Buffer{}
		b, err := relay.OpenJetStream(context.Background(), relay.JetStreamConfig{Dir: t.TempDir(), Listen: "127.0.0.1:0", Logger: newTestLogger(logs)})
		if err != nil {
			t.Fatalf("store %d: %v", i, err)
		}
		t.Cleanup(func() { b.Close() })
		addr := b.NATSAddr()
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host != "127.0.0.1" || port == "0" || port == "4222" {
			t.Fatalf("store %d listens on %q (%v), want 127.0.0.1 and a port chosen for it", i, addr, err)
		}
		if addrs[addr] {
			t.Fatalf("both stores on %s", addr)
		}
		addrs[addr] = true
		if !strings.Contains(logs.String(), addr) {
			t.Errorf("store %d's log does not name %s:\n%s", i, addr, logs.String())
		}
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("store %d: %v", i, err)
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if err != nil || !strings.HasPrefix(line, "INFO ") {
			t.Fatalf("store %d at %s said %q (%v), want NATS's INFO", i, addr, line, err)
		}
	}
}
