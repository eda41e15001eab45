package station

import (
	"flag"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/relay"
)

// The notification flags: repeatable --notify, --public-url from the
// environment, --notify-after; a relay without a token has no notifier,
// and --notify on one, a bad --public-url or a bad target is a usage
// mistake, said in one line.
func TestNotifyOptions(t *testing.T) {
	var o NotifyOptions
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	o.BindFlags(fs, func(k string) string {
		return map[string]string{"AEP_PUBLIC_URL": "https://relay.example", "AEP_NOTIFY_USAGE": "context=90%"}[k]
	})
	if err := fs.Parse([]string{"--notify", "webhook:http://127.0.0.1:9/a", "--notify", "ntfy:https://ntfy.sh/t", "--notify-after", "30s"}); err != nil {
		t.Fatal(err)
	}
	if len(o.Targets) != 2 || o.PublicURL != "https://relay.example" || o.After != 30*time.Second || o.Usage != "context=90%" {
		t.Fatalf("flags: %+v", o)
	}
	log := slog.New(slog.DiscardHandler)
	home := t.TempDir()
	n, err := o.notifier(relay.Config{Token: "tok-0123456789abcdef", Listen: "127.0.0.1:8787"}, home, log)
	if err != nil || n == nil {
		t.Fatalf("notifier: %v", err)
	}
	if n, err := (NotifyOptions{}).notifier(relay.Config{Listen: "127.0.0.1:8787"}, home, log); n != nil || err != nil {
		t.Errorf("a watch-only relay: %v %v, want no notifier", n, err)
	}
	for name, c := range map[string]struct {
		o     NotifyOptions
		token string
		want  string
	}{
		"no token":       {NotifyOptions{Targets: []string{"webhook:http://127.0.0.1:9/a"}}, "", "--notify needs a token"},
		"bad public URL": {NotifyOptions{PublicURL: "relay.example"}, "tok-0123456789abcdef", "--public-url"},
		"bad target":     {NotifyOptions{Targets: []string{"pager:http://x"}}, "tok-0123456789abcdef", "unknown target kind"},
		"bad usage":      {NotifyOptions{Usage: "context=80"}, "tok-0123456789abcdef", `--notify-usage "context=80": context wants a whole percentage`},
		"usage no token": {NotifyOptions{Usage: "tokens=200k"}, "", "--notify-usage needs a token"},
	} {
		_, err := c.o.notifier(relay.Config{Token: c.token, Listen: "127.0.0.1:8787"}, home, log)
		if err == nil || !IsUsage(err) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want a one-line usage error about %q", name, err, c.want)
		}
	}
}

// Without --public-url, answer links point at the relay itself, over
// https when it serves TLS (by hand, a TLS relay's webhook carried
// http:// links that its port answered with a bare 400).
func TestLocalPublicURL(t *testing.T) {
	for _, c := range []struct {
		listen string
		tls    bool
		want   string
	}{
		{"127.0.0.1:8787", false, "http://127.0.0.1:8787"},
		{"127.0.0.1:8787", true, "https://127.0.0.1:8787"},
		{"0.0.0.0:443", true, "https://127.0.0.1:443"},
	} {
		addr, err := net.ResolveTCPAddr("tcp", c.listen)
		if err != nil {
			t.Fatal(err)
		}
		if got := localPublicURL(addr, c.tls); got != c.want {
			t.Errorf("%s tls=%v: %s, want %s", c.listen, c.tls, got, c.want)
		}
	}
}
