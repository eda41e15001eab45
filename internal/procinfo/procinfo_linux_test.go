package procinfo

import "testing"

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
