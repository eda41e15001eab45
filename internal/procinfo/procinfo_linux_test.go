package procinfo

import (
	"bytes"
	"testing"
)

func TestParseStat(t *testing.T) {
	// comm may hold spaces and parentheses: fields count from the last ')'.
	rec := "4242 (we (ird) name) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 50 18446744073709551615\n"
	info, err := parseStat([]byte(rec))
	if err != nil {
		t.Fatal(err)
	}
	if info.PPID != 17 || info.Comm != "we (ird) name" || info.Start != "987654" || info.StartNs != 987654*1e7 {
		t.Fatalf("parseStat = %+v", info)
	}
	for _, bad := range []string{"", "4242 noparen S 1", "4242 (x) S 1 2", "4242 (x) S notanumber 1 1 0 -1 0 0 0 0 0 0 0 0 0 0 0 1 0 5"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) succeeded", bad)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0"))
	f.Add([]byte("7 ()) ) R 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 0 0 1 0 99"))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := parseStat(b)
		if err == nil && info.Start == "" {
			t.Fatalf("accepted %q as %+v", b, info)
		}
	})
}

// statFields splits as bytes.Fields did before it, on any input.
func FuzzStatFieldsAsBytesFields(f *testing.F) {
	f.Add([]byte(" S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 50\n"))
	f.Add([]byte(" R\t1\v2 3\f4\r5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21"))
	f.Add([]byte(" S 1\u00a02 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22"))
	f.Fuzz(func(t *testing.T, b []byte) {
		state, ppid, start, ok := statFields(b)
		fields := bytes.Fields(b)
		if ok != (len(fields) > 19) {
			t.Fatalf("statFields(%q) ok = %v with %d fields", b, ok, len(fields))
		}
		if ok && (!bytes.Equal(state, fields[0]) || !bytes.Equal(ppid, fields[1]) || !bytes.Equal(start, fields[19])) {
			t.Fatalf("statFields(%q) = %q %q %q, want %q %q %q", b, state, ppid, start, fields[0], fields[1], fields[19])
		}
	})
}

// A record costs its two strings (comm and the start token), not a list of
// its fifty fields.
func TestParseStatAllocations(t *testing.T) {
	rec := []byte("4242 (kimi) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 50 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
	if n := testing.AllocsPerRun(20, func() { parseStat(rec) }); n > 2 {
		t.Fatalf("parseStat: %v allocations, want at most 2", n)
	}
}
