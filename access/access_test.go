package access

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
)

func TestRolesOrder(t *testing.T) {
	cases := []struct {
		have, want Role
		can        bool
	}{
		{RoleWatch, RoleWatch, true}, {RoleWatch, RoleAnswer, false}, {RoleWatch, RoleAdmin, false},
		{RoleAnswer, RoleWatch, true}, {RoleAnswer, RoleAnswer, true}, {RoleAnswer, RoleAdmin, false},
		{RoleAdmin, RoleAdmin, true}, {"", RoleWatch, false}, {"root", RoleWatch, false},
	}
	for _, c := range cases {
		if got := (Principal{Role: c.have}).Can(c.want); got != c.can {
			t.Errorf("%q.Can(%q) = %v, want %v", c.have, c.want, got, c.can)
		}
	}
	if _, err := ParseRole("owner"); err == nil {
		t.Error("ParseRole took an unknown role")
	}
	if o := Owner(); o.Name != OwnerName || !o.Can(RoleAdmin) || o.Capture != aep.CaptureFull {
		t.Errorf("Owner() = %+v", o)
	}
}

func TestStoreAddListRemove(t *testing.T) {
	home := t.TempDir()
	s := Store{Home: home, Now: func() time.Time { return time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC) }}
	e, tok, err := s.Add("alice", RoleAnswer, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) < 40 || e.Hash != Hash(tok) {
		t.Fatalf("token %q, entry %+v", tok, e)
	}
	if _, _, err := s.Add("alice", RoleWatch, ""); err == nil {
		t.Fatal("a second token for one name was added")
	}
	if _, _, err := s.Add("owner", RoleWatch, ""); err == nil {
		t.Fatal("the owner's name was taken")
	}
	if _, _, err := s.Add("bob", RoleWatch, "loud"); err == nil {
		t.Fatal("a bad capture was taken")
	}
	if _, _, err := s.Add("bob", RoleWatch, ""); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), tok) {
		t.Fatal("the tokens file holds the token itself")
	}
	st, _ := os.Stat(s.Path())
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("tokens file mode %v, want 0600", st.Mode().Perm())
	}
	l, err := s.List()
	if err != nil || len(l) != 2 || l[0].Name != "alice" || l[0].Capture != "full" || l[1].Capture != "metadata" {
		t.Fatalf("List = %+v, %v", l, err)
	}
	if _, err := s.Remove("carol"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("Remove(carol) = %v", err)
	}
	if _, err := s.Remove("alice"); err != nil {
		t.Fatal(err)
	}
	if l, _ := s.List(); len(l) != 1 || l[0].Name != "bob" {
		t.Fatalf("after rm: %+v", l)
	}
}

// A tokens file the store cannot read is never overwritten: a torn or
// foreign file, one others may read, a link.
func TestStoreRefusesWhatItCannotRead(t *testing.T) {
	for name, plant := range map[string]func(path string) error{
		"torn": func(p string) error { return os.WriteFile(p, []byte(`{"version":1,"people":[{"name":"a`), 0o600) },
		"foreign": func(p string) error {
			return os.WriteFile(p, []byte(`{"version":1,"people":[],"admins":["me"]}`), 0o600)
		},
		"readable": func(p string) error { return os.WriteFile(p, File{}.Marshal(), 0o644) },
		"link": func(p string) error {
			target := filepath.Join(filepath.Dir(p), "elsewhere")
			if err := os.WriteFile(target, File{}.Marshal(), 0o600); err != nil {
				return err
			}
			return os.Symlink(target, p)
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := Store{Home: t.TempDir()}
			if err := plant(s.Path()); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(s.Path())
			if _, _, err := s.Add("alice", RoleAdmin, ""); err == nil {
				t.Fatal("Add changed a file it cannot read")
			}
			after, _ := os.ReadFile(s.Path())
			if string(before) != string(after) {
				t.Fatal("the file changed")
			}
		})
	}
}

func TestBookLookupReloadEnds(t *testing.T) {
	home := t.TempDir()
	s := Store{Home: home}
	_, alice, err := s.Add("alice", RoleAnswer, "redacted")
	if err != nil {
		t.Fatal(err)
	}
	_, bob, _ := s.Add("bob", RoleWatch, "")
	b := OpenRoster(home, nil)
	reload := func() []string {
		if apply := b.Reload(); apply != nil {
			return apply()
		}
		return nil
	}
	p, ref, ok := b.Lookup(alice)
	if !ok || p.Name != "alice" || p.Role != RoleAnswer || p.Capture != aep.CaptureRedacted {
		t.Fatalf("Lookup(alice) = %+v %v", p, ok)
	}
	if q, ok := b.Resolve(ref); !ok || q != p {
		t.Fatalf("Resolve = %+v %v", q, ok)
	}
	for _, tok := range []string{"", "x", alice + "x", Hash(alice)} {
		if _, _, ok := b.Lookup(tok); ok {
			t.Fatalf("Lookup(%q) admitted", tok)
		}
	}
	if ended := reload(); len(ended) != 0 {
		t.Fatalf("an unchanged file ended %v", ended)
	}
	if _, err := s.Remove("alice"); err != nil {
		t.Fatal(err)
	}
	_, alice2, _ := s.Add("alice", RoleAnswer, "redacted")
	ended := reload()
	if len(ended) != 1 || ended[0] != "alice" {
		t.Fatalf("ended %v, want [alice]", ended)
	}
	if _, _, ok := b.Lookup(alice); ok {
		t.Fatal("a revoked token still admits")
	}
	if _, ok := b.Resolve(ref); ok {
		t.Fatal("a login made with a revoked token resolves under the new one")
	}
	p2, _, ok := b.Lookup(alice2)
	if !ok {
		t.Fatal("the new token does not admit")
	}
	// Whatever acts for alice later (a link, a device) names her token:
	// the old one's stays dead under the new one, the new one's stands,
	// and a name alone (or with its Ref carried over text) stands for
	// nobody but the token it names.
	if _, ok := b.Current(p); ok || p.Token == p2.Token || p2.Token == (Ref{}) {
		t.Fatalf("Current(the old alice) stands, or the tokens share a Ref: %v %v", p.Token, p2.Token)
	}
	if q, ok := b.Current(p2); !ok || q != p2 {
		t.Fatalf("Current(the new alice) = %+v %v", q, ok)
	}
	if q, ok := b.Current(Principal{Name: "alice", Role: RoleAnswer}); ok {
		t.Fatalf("a name alone stands: %+v", q)
	}
	if q, ok := b.Current(Principal{Name: "alice", Token: ParseRef(p2.Token.String())}); !ok || q != p2 {
		t.Fatalf("the new token's Ref read back: %+v %v", q, ok)
	}
	if _, ok := b.Current(Principal{Name: "bob", Token: p2.Token}); ok {
		t.Fatal("alice's token stands for bob")
	}
	if ParseRef("") != (Ref{}) || ParseRef("zz") != (Ref{}) || (Ref{}).String() != "" {
		t.Fatal("the zero Ref does not round-trip as empty")
	}
	if _, _, ok := b.Lookup(bob); !ok {
		t.Fatal("bob's token stopped working")
	}
	// A file turned unreadable keeps the people in force.
	if err := os.WriteFile(s.Path(), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ended := reload(); len(ended) != 0 {
		t.Fatalf("a bad file ended %v", ended)
	}
	if _, _, ok := b.Lookup(bob); !ok {
		t.Fatal("a bad file dropped bob")
	}
	b.Flush()
	l, err := (Store{Home: home}).List()
	if err == nil {
		t.Fatalf("List read a bad file: %+v", l)
	}
	if uses := readUses(filepath.Join(home, UsesFileName)); uses["bob"].IsZero() {
		t.Fatalf("bob's use not kept: %v", uses)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"version":1,"people":[{"name":"alice","role":"watch","hash":"sha256:` + strings.Repeat("ab", 32) + `","created":"2026-12-01T18:00:00Z"}]}`))
	f.Add([]byte(`{"version":1,"people":[]}`))
	f.Add([]byte(``))
	f.Add([]byte(`{"version":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse(b)
		if err != nil {
			return
		}
		// What parses renders to a file that parses to the same people.
		again, err := Parse(file.Marshal())
		if err != nil {
			t.Fatalf("re-parse: %v", err)
		}
		if len(again.People) != len(file.People) {
			t.Fatalf("people %d, then %d", len(file.People), len(again.People))
		}
		for i, e := range file.People {
			if again.People[i].Principal() != e.Principal() || again.People[i].Hash != e.Hash {
				t.Fatalf("entry %d changed: %+v then %+v", i, e, again.People[i])
			}
			if e.Principal().Role.rank() == 0 {
				t.Fatalf("entry %d has no role", i)
			}
		}
	})
}
