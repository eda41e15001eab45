package relay

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/aep-kimi/aep-kimi/internal/atomicfile"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
)

// Who may speak on the stream, and as whom.
//
// Every relay has an identity, and each subject it publishes to ends in it:
// stored events go to aep.<stream>.s.<session>.<identity>, live-only events
// to aep.<stream>.live.<identity>, routed commands to
// aep.<stream>.route.<session>.<identity>. The embedded server takes no
// client without credentials, and lets a second relay publish only to
// subjects ending in its own identity (the relay running the server, in
// process, publishes as embeddedIdentity); a receiver reads the sender from
// the subject, which the server checked, never from a header the sender
// wrote. On an external NATS the identity comes from the relay's
// credentials and that NATS's permissions decide who may use it.

const (
	// embeddedIdentity is the relay that runs the embedded server: its
	// in-process connection, whose key never leaves memory.
	embeddedIdentity = "embedded"
	// anonymousIdentity is a relay on an external NATS without credentials:
	// nothing stands behind it, so a relay with credentials routes no
	// command from it.
	anonymousIdentity = "anonymous"
	// tokenIdentity is a relay that authenticates with a bare token in its
	// NATS URL: the token is a secret and never goes into a subject.
	tokenIdentity = "token"
)

// identityRE is what a subject token naming a relay may hold.
var identityRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// peerKey returns the NATS user a second relay connects to the embedded
// server as. Its seed is dir's NATSCredsName, generated on the first start
// that listens: a temporary file created 0600, renamed into place, so it is
// never readable by others. A link in its place, or a file others may read,
// is refused.
func peerKey(dir string) (nkeys.KeyPair, error) {
	path := filepath.Join(dir, NATSCredsName)
	data, err := tokenfile.ReadSecret(path, false, "NATS credentials")
	if errors.Is(err, fs.ErrNotExist) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, fmt.Errorf("jetstream store: NATS credentials: %w", err)
		}
		seed, err := kp.Seed()
		if err != nil {
			return nil, fmt.Errorf("jetstream store: NATS credentials: %w", err)
		}
		if err := atomicfile.Write(path, seedFile(seed), atomicfile.Options{}); err != nil {
			return nil, fmt.Errorf("jetstream store: NATS credentials: %w", err)
		}
		return kp, nil
	}
	if err != nil {
		return nil, fmt.Errorf("jetstream store: %w", err)
	}
	kp, err := nkeys.ParseDecoratedUserNKey(data)
	if err != nil {
		return nil, fmt.Errorf("jetstream store: NATS credentials %s hold no NATS user seed (%v): delete the file to have new ones generated", path, err)
	}
	return kp, nil
}

// seedFile is the text of a generated credentials file: an nkey seed in the
// decorated form NATS tools read.
func seedFile(seed []byte) []byte {
	var b bytes.Buffer
	b.WriteString("# aep-kimi: the NATS user a second relay connects to this relay's embedded NATS as\n")
	b.WriteString("# (aep-kimi relay --store jetstream --nats nats://HOST:PORT --nats-creds THIS_FILE).\n")
	b.WriteString("# Whoever holds it can read and write the relay's stream: keep it private.\n\n")
	b.WriteString("-----BEGIN USER NKEY SEED-----\n")
	b.Write(seed)
	b.WriteString("\n------END USER NKEY SEED------\n")
	return b.Bytes()
}

// credentials reads a credentials file for an external NATS: a NATS creds
// file (user JWT and seed) or an nkey seed file, such as the one the
// embedded server generates. The identity is the user's public key.
func credentials(path string) (nats.Option, string, error) {
	data, err := tokenfile.ReadSecret(path, true, "NATS credentials")
	if err != nil {
		return nil, "", fmt.Errorf("jetstream store: %w", err)
	}
	kp, err := nkeys.ParseDecoratedUserNKey(data)
	if err != nil {
		return nil, "", fmt.Errorf("jetstream store: NATS credentials %s: no NATS user seed (%v)", path, err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, "", fmt.Errorf("jetstream store: NATS credentials %s: %w", path, err)
	}
	if !bytes.Contains(data, []byte("BEGIN NATS USER JWT")) {
		return nkeyAuth(kp, pub), pub, nil
	}
	ujwt, err := nkeys.ParseDecoratedJWT(data)
	if err != nil {
		return nil, "", fmt.Errorf("jetstream store: NATS credentials %s: %w", path, err)
	}
	claims, err := jwt.DecodeUserClaims(ujwt)
	if err != nil {
		return nil, "", fmt.Errorf("jetstream store: NATS credentials %s: user JWT: %w", path, err)
	}
	if claims.Subject != pub {
		return nil, "", fmt.Errorf("jetstream store: NATS credentials %s: the JWT is for user %s, the seed for %s", path, claims.Subject, pub)
	}
	seed, err := kp.Seed()
	if err != nil {
		return nil, "", fmt.Errorf("jetstream store: NATS credentials %s: %w", path, err)
	}
	return nats.UserJWTAndSeed(ujwt, string(seed)), pub, nil
}

// nkeyAuth authenticates as kp's user, signing the server's nonce.
func nkeyAuth(kp nkeys.KeyPair, pub string) nats.Option {
	return nats.Nkey(pub, kp.Sign)
}

// urlIdentity is the identity of a relay whose NATS URLs carry credentials
// (user:password@, or a bare token@); ok is false when none does.
func urlIdentity(urls string) (id string, ok bool) {
	for _, raw := range strings.Split(urls, ",") {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || u.User == nil {
			continue
		}
		if _, hasPassword := u.User.Password(); !hasPassword {
			return tokenIdentity, true
		}
		if name := u.User.Username(); identityRE.MatchString(name) {
			return name, true
		}
		sum := sha256.Sum256([]byte(u.User.Username()))
		return "user-" + hex.EncodeToString(sum[:8]), true
	}
	return "", false
}

// urlHosts is urls with any credentials left out, for logs.
func urlHosts(urls string) string {
	var out []string
	for _, raw := range strings.Split(urls, ",") {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			out = append(out, "(unparseable)")
			continue
		}
		u.User = nil
		out = append(out, u.String())
	}
	return strings.Join(out, ",")
}

// embeddedUsers are the embedded server's users: the relay itself (owner,
// in process) and, when the server listens, the second relays' user (peer).
// The peer may publish only to subjects ending in its own identity, receive
// only its own inbox, and use the JetStream API but not to delete or purge
// the stream or its messages. The owner is this process: it needs no
// limits, and without them the server checks none of its publishes, so
// the store's hot path costs what it did before authentication.
func embeddedUsers(owner, peer nkeys.KeyPair) ([]*server.NkeyUser, error) {
	pub, err := owner.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("jetstream store: NATS user: %w", err)
	}
	users := []*server.NkeyUser{{Nkey: pub}}
	if peer == nil {
		return users, nil
	}
	if pub, err = peer.PublicKey(); err != nil {
		return nil, fmt.Errorf("jetstream store: NATS user: %w", err)
	}
	p := relayPermissions(pub)
	p.Publish.Deny = []string{"$JS.API.STREAM.DELETE.>", "$JS.API.STREAM.PURGE.>", "$JS.API.STREAM.MSG.DELETE.>"}
	return append(users, &server.NkeyUser{Nkey: pub, Permissions: p}), nil
}

// relayPermissions are what a relay with identity needs on a NATS: publish
// its own subjects, the JetStream API and replies to routed commands;
// receive live-only events, routed commands and its own inbox. On a NATS of
// your own, give each relay's user these (the README shows them).
func relayPermissions(identity string) *server.Permissions {
	return &server.Permissions{
		Publish: &server.SubjectPermission{Allow: []string{
			"aep.*.s.*." + identity, "aep.*.live." + identity, "aep.*.route.*." + identity,
			"$JS.API.>", "_INBOX.>",
		}},
		Subscribe: &server.SubjectPermission{Allow: []string{
			"aep.*.live.*", "aep.*.route.*.*", inboxPrefix(identity) + ".>",
		}},
	}
}

// inboxPrefix is the prefix of a relay's reply subjects: its own, so a
// NATS can let each relay receive only its own replies.
func inboxPrefix(identity string) string { return "_INBOX." + identity }

// lastToken is the last token of a subject: the sender's identity on the
// relays' subjects.
func lastToken(subject string) string {
	return subject[strings.LastIndexByte(subject, '.')+1:]
}
