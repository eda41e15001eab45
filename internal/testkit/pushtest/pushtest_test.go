package pushtest

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// RFC 8291 §5's worked example (base64url, as the RFC prints it).
const (
	katPlaintext = "When I grow up, I want to be a watermelon"
	katASPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
	katUAPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
	katUAPublic  = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
	katAuth      = "BTBZMqHH6r4Tts7J_aSIgg"
	katSalt      = "DGv6ra1nlYgDCS1FRnbzlw"
	katBody      = "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
)

func mustB64(t testing.TB, s string) []byte {
	t.Helper()
	b, err := b64(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecryptRFC8291Example(t *testing.T) {
	ua, err := ecdh.P256().NewPrivateKey(mustB64(t, katUAPrivate))
	if err != nil {
		t.Fatal(err)
	}
	if got := base64.RawURLEncoding.EncodeToString(ua.PublicKey().Bytes()); got != katUAPublic {
		t.Fatalf("ua public key %s, want %s", got, katUAPublic)
	}
	plain, err := Decrypt(ua, mustB64(t, katAuth), mustB64(t, katBody))
	if err != nil {
		t.Fatal(err)
	}
	if string(plain) != katPlaintext {
		t.Fatalf("plaintext %q, want %q", plain, katPlaintext)
	}

	// The test's own sender reproduces the RFC's body byte for byte, so the
	// round trips below exercise the same derivation the RFC fixes.
	as, err := ecdh.P256().NewPrivateKey(mustB64(t, katASPrivate))
	if err != nil {
		t.Fatal(err)
	}
	body := encrypt(t, as, mustB64(t, katSalt), ua.PublicKey(), mustB64(t, katAuth), []byte(katPlaintext), 4096, innerRecord, lastRecord)
	if got := base64.RawURLEncoding.EncodeToString(body); got != katBody {
		t.Fatalf("encrypted body\n%s\nwant\n%s", got, katBody)
	}
}

func TestDecryptRefuses(t *testing.T) {
	ua, _ := ecdh.P256().NewPrivateKey(mustB64(t, katUAPrivate))
	auth := mustB64(t, katAuth)
	body := mustB64(t, katBody)
	as, _ := ecdh.P256().NewPrivateKey(mustB64(t, katASPrivate))
	salt := mustB64(t, katSalt)
	flip := func(i int) []byte {
		b := bytes.Clone(body)
		b[i] ^= 1
		return b
	}
	cases := map[string]struct {
		auth, body []byte
		want       string
	}{
		"short auth":     {auth[:8], body, "auth secret"},
		"short header":   {auth, body[:10], "shorter than"},
		"tiny rs":        {auth, append(append(bytes.Clone(body[:16]), 0, 0, 0, 5), body[20:]...), "record size"},
		"cut key id":     {auth, body[:40], "inside the key id"},
		"bad key id":     {auth, flip(30), "P-256"},
		"no records":     {auth, body[:86], "no records"},
		"tampered":       {auth, flip(100), "record 0"},
		"wrong auth":     {bytes.Repeat([]byte{1}, 16), body, "record 0"},
		"inner as last":  {auth, encrypt(t, as, salt, ua.PublicKey(), auth, []byte("x"), 4096, innerRecord, innerRecord), "without the last-record"},
		"two lasts":      {auth, encrypt(t, as, salt, ua.PublicKey(), auth, bytes.Repeat([]byte("y"), 40), 30, lastRecord, lastRecord), "marked last"},
		"all padding":    {auth, encrypt(t, as, salt, ua.PublicKey(), auth, nil, 4096, innerRecord, 0x00), "no delimiter"},
		"truncated body": {auth, body[:len(body)-1], "record 0"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Decrypt(ua, c.auth, c.body)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestDecryptRecords(t *testing.T) {
	ua, _ := ecdh.P256().GenerateKey(rand.Reader)
	as, _ := ecdh.P256().GenerateKey(rand.Reader)
	auth := bytes.Repeat([]byte{7}, 16)
	salt := bytes.Repeat([]byte{9}, 16)
	plain := bytes.Repeat([]byte("0123456789"), 30)
	body := encrypt(t, as, salt, ua.PublicKey(), auth, plain, 64, innerRecord, lastRecord)
	got, err := Decrypt(ua, auth, body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, plain) {
		t.Fatalf("multi-record plaintext %q", got)
	}
	// Dropping a whole inner record must not go unnoticed.
	cut := append(bytes.Clone(body[:86]), body[86+64:]...)
	if _, err := Decrypt(ua, auth, cut); err == nil {
		t.Fatal("a body missing its first record decrypted")
	}
}

func TestServer(t *testing.T) {
	srv := New(t)
	vapid, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	vapidKey := pubB64(vapid)
	sub, err := srv.Subscribe(vapidKey)
	if err != nil {
		t.Fatal(err)
	}
	var js struct {
		Endpoint string
		Keys     struct{ P256dh, Auth string }
	}
	if err := json.Unmarshal(sub.JSON(), &js); err != nil || js.Endpoint != sub.Endpoint || js.Keys.P256dh != sub.P256dh || js.Keys.Auth != sub.Auth {
		t.Fatalf("subscription JSON %s (%v)", sub.JSON(), err)
	}
	good := func() *http.Request { return pushRequest(t, sub, vapid, srv.URL, `{"v":1}`, time.Now().Add(time.Hour)) }

	if res := do(t, good()); res.StatusCode != http.StatusCreated || res.Header.Get("Location") == "" {
		t.Fatalf("push: %d, location %q", res.StatusCode, res.Header.Get("Location"))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	m, err := srv.Next(ctx, sub, 0)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Plaintext) != `{"v":1}` || m.TTL != 60 || m.Urgency != "high" || m.VAPID.Key != vapidKey || m.VAPID.Claims.Sub != "mailto:ops@example.com" {
		t.Fatalf("message %+v", m)
	}

	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	refusals := map[string]struct {
		req    *http.Request
		status int
	}{
		"no ttl":      {with(good(), "TTL", ""), http.StatusBadRequest},
		"bad urgency": {with(good(), "Urgency", "now"), http.StatusBadRequest},
		"no vapid":    {with(good(), "Authorization", ""), http.StatusUnauthorized},
		"bearer":      {with(good(), "Authorization", "Bearer x"), http.StatusUnauthorized},
		"expired":     {pushRequest(t, sub, vapid, srv.URL, "x", time.Now().Add(-time.Minute)), http.StatusUnauthorized},
		"too far":     {pushRequest(t, sub, vapid, srv.URL, "x", time.Now().Add(25*time.Hour)), http.StatusUnauthorized},
		"wrong aud":   {pushRequest(t, sub, vapid, "https://elsewhere.example", "x", time.Now().Add(time.Hour)), http.StatusUnauthorized},
		"other key":   {pushRequest(t, sub, other, srv.URL, "x", time.Now().Add(time.Hour)), http.StatusForbidden},
		"forged sig":  {with(good(), "Authorization", forge(good().Header.Get("Authorization"), pubB64(other))), http.StatusUnauthorized},
		"plain body":  {with(good(), "Content-Encoding", ""), http.StatusUnsupportedMediaType},
		"too big":     {pushRequest(t, sub, vapid, srv.URL, strings.Repeat("z", 5000), time.Now().Add(time.Hour)), http.StatusRequestEntityTooLarge},
	}
	for name, c := range refusals {
		if res := do(t, c.req); res.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d", name, res.StatusCode, c.status)
		}
	}
	if n := len(srv.Refusals()); n != len(refusals) {
		t.Errorf("%d refusals recorded, want %d: %+v", n, len(refusals), srv.Refusals())
	}
	if n := len(srv.Messages(sub)); n != 1 {
		t.Errorf("%d messages accepted, want 1", n)
	}

	srv.Answer(sub, http.StatusGone)
	if res := do(t, good()); res.StatusCode != http.StatusGone {
		t.Errorf("gone subscription answered %d", res.StatusCode)
	}
	srv.Answer(sub, 0)
	srv.Stall(sub, true)
	stalled := good()
	sctx, scancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer scancel()
	if res, err := http.DefaultClient.Do(stalled.WithContext(sctx)); err == nil {
		res.Body.Close()
		t.Fatalf("stalled push answered %d", res.StatusCode)
	}
	srv.Stall(sub, false)
	if res := do(t, good()); res.StatusCode != http.StatusCreated {
		t.Errorf("after the stall: %d", res.StatusCode)
	}
	if got := srv.Requests(sub); got != len(refusals)+4 {
		t.Errorf("%d requests counted, want %d", got, len(refusals)+4)
	}
	unknown := good()
	unknown.URL.Path = "/push/nobody"
	if res := do(t, unknown); res.StatusCode != http.StatusNotFound {
		t.Errorf("unknown subscription answered %d", res.StatusCode)
	}
}

// The test's sender: RFC 8291 encryption into records of rs octets, each
// record but the last ending in innerMark, the last in lastMark (RFC 8188
// wants 0x01 and 0x02; other marks make broken bodies).
func encrypt(t testing.TB, as *ecdh.PrivateKey, salt []byte, ua *ecdh.PublicKey, auth, plain []byte, rs int, innerMark, lastMark byte) []byte {
	t.Helper()
	secret, err := as.ECDH(ua)
	if err != nil {
		t.Fatal(err)
	}
	info := append([]byte("WebPush: info\x00"), ua.Bytes()...)
	info = append(info, as.PublicKey().Bytes()...)
	ikm, _ := hkdf.Key(sha256.New, secret, auth, string(info), 32)
	cek, _ := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: aes128gcm\x00", 16)
	nonce, _ := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: nonce\x00", 12)
	block, _ := aes.NewCipher(cek)
	gcm, _ := cipher.NewGCM(block)

	out := append([]byte(nil), salt...)
	out = binary.BigEndian.AppendUint32(out, uint32(rs))
	out = append(out, byte(len(as.PublicKey().Bytes())))
	out = append(out, as.PublicKey().Bytes()...)
	chunk := rs - tagLen - 1
	for seq := uint64(0); ; seq++ {
		n := min(chunk, len(plain))
		rec := append([]byte(nil), plain[:n]...)
		plain = plain[n:]
		last := len(plain) == 0
		if last {
			rec = append(rec, lastMark)
		} else {
			rec = append(rec, innerMark)
		}
		out = append(out, gcm.Seal(nil, recordNonce(nonce, seq), rec, nil)...)
		if last {
			return out
		}
	}
}

func pubB64(k *ecdsa.PrivateKey) string {
	b, _ := k.PublicKey.Bytes()
	return base64.RawURLEncoding.EncodeToString(b)
}

// pushRequest builds what an application server sends: a VAPID token for
// aud signed by key, and plain encrypted for sub.
func pushRequest(t testing.TB, sub *Subscription, key *ecdsa.PrivateKey, aud, plain string, exp time.Time) *http.Request {
	t.Helper()
	as, _ := ecdh.P256().GenerateKey(rand.Reader)
	salt := make([]byte, 16)
	rand.Read(salt)
	ua, _ := ecdh.P256().NewPublicKey(mustB64(t, sub.P256dh))
	body := encrypt(t, as, salt, ua, mustB64(t, sub.Auth), []byte(plain), 4096, innerRecord, lastRecord)
	req, err := http.NewRequest(http.MethodPost, sub.Endpoint, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("TTL", "60")
	req.Header.Set("Urgency", "high")
	req.Header.Set("Content-Encoding", "aes128gcm")
	req.Header.Set("Authorization", "vapid t="+signJWT(t, key, aud, exp)+", k="+pubB64(key))
	return req
}

func signJWT(t testing.TB, key *ecdsa.PrivateKey, aud string, exp time.Time) string {
	t.Helper()
	enc := base64.RawURLEncoding.EncodeToString
	claims, _ := json.Marshal(Claims{Aud: aud, Exp: exp.Unix(), Sub: "mailto:ops@example.com"})
	signing := enc([]byte(`{"typ":"JWT","alg":"ES256"}`)) + "." + enc(claims)
	digest := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signing + "." + enc(sig)
}

// forge keeps a header's token and names another key as its signer.
func forge(header, key string) string {
	t, _, _ := strings.Cut(header, ", k=")
	return t + ", k=" + key
}

func with(r *http.Request, name, value string) *http.Request {
	if value == "" {
		r.Header.Del(name)
	} else {
		r.Header.Set(name, value)
	}
	return r
}

func do(t testing.TB, r *http.Request) *http.Response {
	t.Helper()
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}
