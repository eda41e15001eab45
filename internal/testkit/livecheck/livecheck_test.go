package livecheck

import (
	"slices"
	"testing"
)

func TestProblems(t *testing.T) {
	skips := Skips{"control-auth-gate": SkipAuthenticated, "control-cancel": SkipNoCancel}
	cases := []struct {
		name   string
		report Report
		want   []string
	}{
		{"passes and listed skips", Report{OK: true, Checks: []Check{
			{Name: "discovery", Status: "pass"},
			{Name: "control-auth-gate", Status: "skip", Detail: "skipped: authenticated run — probe without --token"},
			{Name: "control-cancel", Status: "skip", Detail: "skipped: destructive — pass --control-cancel <run> to opt in"},
		}}, nil},
		{"a listed check skipped for another reason", Report{OK: true, Checks: []Check{
			{Name: "control-cancel", Status: "skip", Detail: "skipped: no socket endpoint advertised"},
		}}, []string{"unexpected skip control-cancel: skipped: no socket endpoint advertised"}},
		{"an unlisted skip", Report{OK: true, Checks: []Check{
			{Name: "control-ack", Status: "skip", Detail: "skipped: no --control-session target"},
		}}, []string{"unexpected skip control-ack: skipped: no --control-session target"}},
		{"a failure and the verdict", Report{OK: false, Checks: []Check{
			{Name: "control-dedupe", Status: "fail", Detail: "2 distinct acknowledgements"},
		}}, []string{"FAIL control-dedupe: 2 distinct acknowledgements", "live.js verdict: not ok"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.report.Problems(skips); !slices.Equal(got, c.want) {
				t.Errorf("Problems = %q, want %q", got, c.want)
			}
		})
	}
}

func TestSummaryAndRedact(t *testing.T) {
	r := Report{Checks: []Check{{Name: "a", Status: "pass"}, {Name: "b", Status: "skip"}, {Name: "c", Status: "pass"}}}
	if got, want := r.Summary(), "3 checks (pass 2, skip 1): a=pass b=skip c=pass"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	if got := redact([]string{"--evict", "--token", "s3cret", "--timeout", "5"}); slices.Contains(got, "s3cret") {
		t.Errorf("redact left the token: %q", got)
	}
}
