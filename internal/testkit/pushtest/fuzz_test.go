package pushtest

import (
	"crypto/ecdh"
	"testing"
	"time"
)

// Decrypt reads bodies from the code under test: any input gives an error
// or the plaintext, never a panic.
func FuzzDecrypt(f *testing.F) {
	f.Add(mustB64(f, katBody))
	f.Add(mustB64(f, katBody)[:90])
	ua, err := ecdh.P256().NewPrivateKey(mustB64(f, katUAPrivate))
	if err != nil {
		f.Fatal(err)
	}
	auth := mustB64(f, katAuth)
	f.Fuzz(func(t *testing.T, body []byte) {
		plain, err := Decrypt(ua, auth, body)
		if err == nil && len(plain) > len(body) {
			t.Fatalf("plaintext of %d bytes from a body of %d", len(plain), len(body))
		}
	})
}

func FuzzVerifyVAPID(f *testing.F) {
	f.Add("vapid t=eyJ0eXAiOiJKV1QiLCJhbGciOiJFUzI1NiJ9.e30.AAAA, k=" + katUAPublic)
	f.Add("vapid k=,t=")
	f.Add("Bearer x")
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, header string) {
		v, err := VerifyVAPID(header, "http://127.0.0.1:1/push/x", now)
		if err == nil && v.Claims.Aud != "http://127.0.0.1:1" {
			t.Fatalf("accepted aud %q", v.Claims.Aud)
		}
	})
}
