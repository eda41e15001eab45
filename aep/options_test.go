package aep

import "testing"

func TestMatchOption(t *testing.T) {
	t.Parallel()
	opts := []Option{{"allow", "Allow"}, {"allow_session", "Allow for this session"}, {"deny", "Deny"}, {"twin1", "Same"}, {"twin2", "Same"}}
	cases := []struct {
		text, want string
		ok         bool
	}{
		{" DENY ", "deny", true},
		{"allow for this session", "allow_session", true},
		{"Allow", "allow", true},
		{"same", "", false}, // two labels: ambiguous
		{"please deny this", "", false},
		{"", "", false},
	}
	for _, c := range cases {
		if got, ok := MatchOption(opts, c.text); got != c.want || ok != c.ok {
			t.Errorf("MatchOption(%q) = %q %v, want %q %v", c.text, got, ok, c.want, c.ok)
		}
	}
	if d := OptionsData(opts[:1], CaptureMetadata); d[0].(map[string]any)["label"] != "allow" {
		t.Errorf("metadata label %v", d)
	}
	if d := OptionsData(opts[:1], CaptureRedacted); d[0].(map[string]any)["label"] != "Allow" {
		t.Errorf("redacted label %v", d)
	}
}
