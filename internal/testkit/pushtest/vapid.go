package pushtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"time"
)

// maxVAPIDLife is how far in the future a token's exp may lie (RFC 8292 §2).
const maxVAPIDLife = 24 * time.Hour

// Claims are the VAPID token's claims a push service checks.
type Claims struct {
	Aud string `json:"aud"`
	Exp int64  `json:"exp"`
	Sub string `json:"sub"`
}

// VAPID is a verified "vapid" Authorization: the token's claims and the
// application server's public key (k, base64url) that signed it.
type VAPID struct {
	Claims Claims
	Key    string
}

// VerifyVAPID checks an Authorization header of the "vapid" scheme (RFC 8292
// §3): `vapid t=<JWT>, k=<key>`, the JWT signed with ES256 by k, its aud the
// origin of endpoint, its exp in the future and at most 24 hours away, its
// sub a mailto: or https: contact.
func VerifyVAPID(header, endpoint string, now time.Time) (VAPID, error) {
	scheme, params, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "vapid") {
		return VAPID{}, errors.New(`authorization scheme is not "vapid"`)
	}
	var tok, key string
	for p := range strings.SplitSeq(params, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok {
			return VAPID{}, fmt.Errorf("vapid parameter %q has no value", p)
		}
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "t":
			tok = strings.TrimSpace(value)
		case "k":
			key = strings.TrimSpace(value)
		}
	}
	if tok == "" || key == "" {
		return VAPID{}, errors.New("vapid authorization lacks t= or k=")
	}
	pub, err := b64(key)
	if err != nil {
		return VAPID{}, fmt.Errorf("k: %w", err)
	}
	ec, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), pub)
	if err != nil {
		return VAPID{}, fmt.Errorf("k is not an uncompressed P-256 point: %w", err)
	}

	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return VAPID{}, fmt.Errorf("token has %d parts, want 3", len(parts))
	}
	var head struct {
		Alg string `json:"alg"`
		Typ string `json:"typ"`
	}
	if err := decodePart(parts[0], &head); err != nil {
		return VAPID{}, fmt.Errorf("token header: %w", err)
	}
	if head.Alg != "ES256" {
		return VAPID{}, fmt.Errorf("token alg %q, want ES256", head.Alg)
	}
	sig, err := b64(parts[2])
	if err != nil || len(sig) != 64 {
		return VAPID{}, errors.New("token signature is not 64 bytes of base64url (r||s)")
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	if !ecdsa.Verify(ec, digest[:], r, s) {
		return VAPID{}, errors.New("token signature does not verify with k")
	}
	var c Claims
	if err := decodePart(parts[1], &c); err != nil {
		return VAPID{}, fmt.Errorf("token claims: %w", err)
	}
	if want := origin(endpoint); c.Aud != want {
		return VAPID{}, fmt.Errorf("aud %q, want the push service's origin %q", c.Aud, want)
	}
	exp := time.Unix(c.Exp, 0)
	if !exp.After(now) {
		return VAPID{}, fmt.Errorf("token expired at %s", exp.UTC().Format(time.RFC3339))
	}
	if exp.Sub(now) > maxVAPIDLife {
		return VAPID{}, fmt.Errorf("exp %s is more than 24h away", exp.UTC().Format(time.RFC3339))
	}
	if !strings.HasPrefix(c.Sub, "mailto:") && !strings.HasPrefix(c.Sub, "https:") {
		return VAPID{}, fmt.Errorf("sub %q is not a mailto: or https: contact", c.Sub)
	}
	return VAPID{Claims: c, Key: key}, nil
}

func origin(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

func decodePart(s string, v any) error {
	raw, err := b64(s)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

// b64 decodes base64url with or without padding, as browsers and libraries
// write both.
func b64(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}
