package aep

import (
	"strings"
	"testing"
)

func TestValidateJSONL(t *testing.T) {
	t.Parallel()
	good := `{"aep":"0.1","id":"01J0000000000000000000000A","type":"progress.status","time":"2026-07-03T10:00:00.000Z","source":"aep://h/agent/a/session/s","agent":"a","session":"s","seq":0,"epoch":0}`
	n, vs, err := ValidateJSONL(strings.NewReader(good + "\n\nnot json\n"))
	if err != nil || n != 2 {
		t.Fatalf("n %d, err %v", n, err)
	}
	lines := map[int]string{}
	for _, v := range vs {
		lines[v.Line] = v.Rule
	}
	if lines[2] != "AEP-0003 §3.1" || lines[3] != "AEP-0001 §5" || lines[1] != "" {
		t.Fatalf("violations %+v", vs)
	}
	_, _, err = ValidateJSONL(strings.NewReader(strings.Repeat("x", MaxJSONLLine+1)))
	if err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("an oversize line: %v", err)
	}
}
