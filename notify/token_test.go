package notify

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/mapping"
)

func TestSignerLifecycle(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	s, err := OpenSigner(home)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{KeyFileName} {
		st, err := os.Stat(filepath.Join(home, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want 0600", f, st.Mode(), err)
		}
	}
	now := time.Now()
	c := Claims{Session: "s", Request: "r", Option: "deny", By: "alice", Surface: mapping.AgentLink, Expires: now.Add(time.Minute).Unix()}
	tok, err := s.Mint(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Check(tok, now)
	if err != nil || got.Option != "deny" || got.By != "alice" || got.Request != "r" {
		t.Fatalf("Check: %+v %v", got, err)
	}
	// Anything changed is unknown: the payload, the signature, the key.
	p, sig, _ := strings.Cut(tok, ".")
	for name, bad := range map[string]string{
		"payload":   p[:len(p)-2] + "AA." + sig,
		"signature": p + "." + sig[:len(sig)-2] + "AA",
		"no dot":    p + sig,
		"empty":     "",
	} {
		if _, err := s.Check(bad, now); !errors.Is(err, ErrTokenUnknown) {
			t.Errorf("%s: %v, want unknown", name, err)
		}
	}
	if _, err := NewMemorySigner([]byte("another key")).Check(tok, now); !errors.Is(err, ErrTokenUnknown) {
		t.Errorf("another key: %v", err)
	}
	if _, err := s.Check(tok, now.Add(2*time.Minute)); !errors.Is(err, ErrTokenExpired) {
		t.Errorf("past expiry: %v", err)
	}
	if err := s.Use(got, now); err != nil {
		t.Fatal(err)
	}
	if err := s.Use(got, now); !errors.Is(err, ErrTokenUsed) {
		t.Errorf("second use: %v", err)
	}
	st, err := os.Stat(filepath.Join(home, UsedFileName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("used file: %v %v", st, err)
	}
	// A restart keeps the key and the uses: a used link stays used.
	s2, err := OpenSigner(home)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Check(tok, now); !errors.Is(err, ErrTokenUsed) {
		t.Errorf("after a restart: %v, want used", err)
	}
	s2.Unuse(got)
	if _, err := s2.Check(tok, now); err != nil {
		t.Errorf("after Unuse: %v", err)
	}
}

// The used set stays bounded: expired uses go first, then the soonest
// to expire.
func TestSignerUsedBounded(t *testing.T) {
	t.Parallel()
	s := NewMemorySigner([]byte("k"))
	now := time.Now()
	for i := range MaxUsed + 50 {
		c := Claims{Nonce: string(rune('a'+i%26)) + strings.Repeat("x", i%7) + string(rune(i)), Expires: now.Add(time.Duration(i+1) * time.Second).Unix()}
		_ = s.Use(c, now)
	}
	if len(s.used) > MaxUsed {
		t.Fatalf("used set %d > %d", len(s.used), MaxUsed)
	}
	for _, exp := range s.used {
		if exp <= now.Add(50*time.Second).Unix() {
			t.Fatalf("a use sooner to expire was kept over later ones")
		}
	}
}

func FuzzParseToken(f *testing.F) {
	s := NewMemorySigner([]byte("fuzz key"))
	good, _ := s.Mint(Claims{Session: "s", Request: "r", Option: "allow", By: "owner", Surface: mapping.AgentLink, Expires: 1 << 40})
	f.Add(good)
	f.Add("")
	f.Add(".")
	f.Add("e30.AAAA")
	f.Add(strings.Repeat("A", MaxTokenLen+1))
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := s.Parse(tok)
		if err != nil {
			if !errors.Is(err, ErrTokenUnknown) {
				t.Fatalf("refusal %v is not ErrTokenUnknown", err)
			}
			return
		}
		// Whatever parses was minted with the key: it names a complete answer.
		if c.Session == "" || c.Request == "" || c.Option == "" || c.Surface == "" || c.Nonce == "" {
			t.Fatalf("parsed incomplete claims %+v", c)
		}
	})
}
