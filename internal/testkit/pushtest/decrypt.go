package pushtest

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// The aes128gcm content coding (RFC 8188) as Web Push uses it (RFC 8291).
const (
	saltLen     = 16
	headerLen   = saltLen + 4 + 1 // salt, record size, key id length
	tagLen      = 16
	authLen     = 16
	minRecord   = tagLen + 2 // RFC 8188 §2: rs must exceed the tag and one delimiter
	lastRecord  = 0x02
	innerRecord = 0x01
)

// Decrypt opens an aes128gcm Web Push message body for the user agent
// holding ua (its P-256 key) and auth (its 16-byte authentication secret),
// with the derivation of RFC 8291 §3.4 and the records of RFC 8188 §2. The
// key id must carry the application server's public key, as RFC 8291 §4
// requires.
func Decrypt(ua *ecdh.PrivateKey, auth, body []byte) ([]byte, error) {
	if len(auth) != authLen {
		return nil, fmt.Errorf("auth secret is %d bytes, want %d", len(auth), authLen)
	}
	if len(body) < headerLen {
		return nil, fmt.Errorf("body of %d bytes is shorter than the aes128gcm header", len(body))
	}
	salt := body[:saltLen]
	rs := binary.BigEndian.Uint32(body[saltLen:])
	idLen := int(body[saltLen+4])
	if rs < minRecord {
		return nil, fmt.Errorf("record size %d is below the minimum %d", rs, minRecord)
	}
	if len(body) < headerLen+idLen {
		return nil, errors.New("body ends inside the key id")
	}
	asPub, err := ecdh.P256().NewPublicKey(body[headerLen : headerLen+idLen])
	if err != nil {
		return nil, fmt.Errorf("key id is not the application server's P-256 public key: %w", err)
	}
	records := body[headerLen+idLen:]
	if len(records) == 0 {
		return nil, errors.New("no records after the header")
	}

	secret, err := ua.ECDH(asPub)
	if err != nil {
		return nil, fmt.Errorf("ecdh: %w", err)
	}
	keyInfo := append([]byte("WebPush: info\x00"), ua.PublicKey().Bytes()...)
	keyInfo = append(keyInfo, asPub.Bytes()...)
	ikm, err := hkdf.Key(sha256.New, secret, auth, string(keyInfo), 32)
	if err != nil {
		return nil, fmt.Errorf("hkdf: %w", err)
	}
	cek, err := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		return nil, fmt.Errorf("hkdf: %w", err)
	}
	nonce, err := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		return nil, fmt.Errorf("hkdf: %w", err)
	}
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, fmt.Errorf("aes: %w", err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("gcm: %w", err)
	}

	var out []byte
	for seq := uint64(0); len(records) > 0; seq++ {
		n := min(int(rs), len(records))
		rec := records[:n]
		records = records[n:]
		if len(rec) < minRecord-1 {
			return nil, fmt.Errorf("record %d of %d bytes is too short", seq, len(rec))
		}
		plain, err := gcm.Open(nil, recordNonce(nonce, seq), rec, nil)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", seq, err)
		}
		data, delim, err := unpad(plain)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", seq, err)
		}
		last := len(records) == 0
		switch {
		case last && delim != lastRecord:
			return nil, fmt.Errorf("record %d ends the body without the last-record delimiter", seq)
		case !last && delim != innerRecord:
			return nil, fmt.Errorf("record %d is marked last but more follow", seq)
		case !last && n != int(rs):
			return nil, fmt.Errorf("record %d is shorter than the record size but not last", seq)
		}
		out = append(out, data...)
	}
	return out, nil
}

// recordNonce is the base nonce XORed with the record's sequence number
// (RFC 8188 §2.3).
func recordNonce(base []byte, seq uint64) []byte {
	n := append([]byte(nil), base...)
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], seq)
	for i := range s {
		n[len(n)-8+i] ^= s[i]
	}
	return n
}

// unpad strips a record's padding: zeros after a delimiter octet.
func unpad(p []byte) (data []byte, delim byte, err error) {
	i := len(p) - 1
	for i >= 0 && p[i] == 0 {
		i--
	}
	if i < 0 {
		return nil, 0, errors.New("record has no delimiter")
	}
	return p[:i], p[i], nil
}
