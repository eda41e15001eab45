package service

import (
	"flag"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRecordSeesEachValue: every value set, a repeated flag's each time,
// a bool flag still parsed as one.
func TestRecordSeesEachValue(t *testing.T) {
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	var list []string
	fs.Func("notify", "", func(s string) error { list = append(list, s); return nil })
	ctl := fs.Bool("control", false, "")
	d := fs.Duration("idle-end", time.Minute, "")
	seen := Record(fs)
	if err := fs.Parse([]string{"--control", "--notify", "a", "--idle-end=2m", "--notify=b"}); err != nil {
		t.Fatal(err)
	}
	want := []Flag{{"control", "true"}, {"notify", "a"}, {"idle-end", "2m"}, {"notify", "b"}}
	if !slices.Equal(*seen, want) || !*ctl || *d != 2*time.Minute || !slices.Equal(list, []string{"a", "b"}) {
		t.Errorf("recorded %v; control %v idle-end %v notify %v", *seen, *ctl, *d, list)
	}
}

func TestCheckFlags(t *testing.T) {
	for _, c := range []struct {
		flags []Flag
		err   string // "" accepted
	}{
		{[]Flag{{"control", "true"}, {"home", "/srv/aep"}, {"notify", "ntfy:@/home/op/ntfy#token-file=/home/op/t"}}, ""},
		{[]Flag{{"notify", "webhook:@/etc/hook#secret-file=/etc/s&insecure-http"}, {"otlp-header", "Authorization=@/home/op/otlp"}}, ""},
		{[]Flag{{"acme-email", "op@example.com"}, {"nats", "nats://a:4222,nats://b:4222"}}, ""},
		{[]Flag{{"notify", "slack:https://hooks.slack.com/services/T/B/x"}}, "slack:URL would write the URL into the unit"},
		{[]Flag{{"notify", "ntfy:https://ntfy.sh/topic#token-file=/t"}}, "ntfy:URL would write"},
		{[]Flag{{"notify", "ntfy:@ntfy-url"}}, `"ntfy-url" is relative`},
		{[]Flag{{"notify", "ntfy:@/u#token-file=t"}}, `"t" is relative`},
		{[]Flag{{"otlp-header", "Authorization=Bearer abc"}}, "Authorization=VALUE would write the value"},
		{[]Flag{{"otlp-header", "X=@rel"}}, `"rel" is relative`},
		{[]Flag{{"nats", "nats://a:4222,nats://user:pass@b:4222"}}, "credentials"},
		{[]Flag{{"otlp", "https://u:p@otlp.example:4318"}}, "credentials"},
		{[]Flag{{"home", ".aep"}}, `".aep" is relative`},
		{[]Flag{{"tls-key", "key.pem"}}, "relative"},
	} {
		err := CheckFlags(c.flags)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%v refused: %v", c.flags, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%v: %v, want an error with %q", c.flags, err, c.err)
		case err != nil && strings.Contains(err.Error(), "pass@") || err != nil && strings.Contains(err.Error(), "Bearer"):
			t.Errorf("the error quotes the secret: %v", err)
		}
	}
}
