package notify

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// FuzzParseTarget: any spec is a target or a one-line error, never a
// panic; a target's name starts with its kind and never shows a URL's
// password. Specs naming files only read them (no home is given, so
// nothing is created).
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{
		"ntfy:https://ntfy.sh/aepalerts",
		"ntfy:https://u:p@ntfy.example/prefix/topic#token-file=/nonexistent",
		"slack:https://hooks.slack.com/services/T/B/X",
		"slack:@/nonexistent",
		"webhook:https://example.com/in?key=v#secret-file=/nonexistent",
		"webhook:http://[::1]:8080/h",
		"ntfy:HTTPS://NTFY.SH/T",
		"slack:https:///x",
		"email:x",
		":",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		tg, err := ParseTarget(spec)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
			return
		}
		kind, rest, _ := strings.Cut(spec, ":")
		if !strings.HasPrefix(tg.Name(), kind+":") {
			t.Errorf("Name() = %q for kind %q", tg.Name(), kind)
		}
		where, _, _ := strings.Cut(rest, "#")
		if u, err := url.Parse(where); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok && p != "" && strings.Contains(tg.Name(), ":"+p+"@") {
				t.Errorf("Name() = %q shows the password", tg.Name())
			}
			if strings.Contains(tg.Name(), u.User.String()+"@") {
				t.Errorf("Name() = %q shows the userinfo", tg.Name())
			}
		}
	})
}

// FuzzCheckEndpoint: with nothing allowed, an accepted endpoint is https
// and names a host name or a public address.
func FuzzCheckEndpoint(f *testing.F) {
	for _, s := range []string{
		"https://fcm.googleapis.com/fcm/send/abc", "http://127.0.0.1:8080/push/x", "https://[::1]/x",
		"https://169.254.169.254/", "https://[fe80::1%25eth0]/x", "https://[::ffff:10.0.0.1]/x",
		"https://100.64.0.1/x", "HTTPS://10.0.0.1/", "https://0/x", "https://localhost/x", "//x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if err := checkEndpoint(raw, nil); err != nil {
			return
		}
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "https" {
			t.Fatalf("accepted %q: not https", raw)
		}
		if a, err := netip.ParseAddr(u.Hostname()); err == nil && !publicAddr(a) {
			t.Fatalf("accepted %q: %s is not public", raw, a)
		}
	})
}

// FuzzParsePushAllow: any value is prefixes or a one-line error, never a
// panic; each prefix contains the address it was written with.
func FuzzParsePushAllow(f *testing.F) {
	for _, s := range []string{"127.0.0.1/32", "127.0.0.1, ::1", "10.0.0.0/8,", "fe80::1%eth0", "1.2.3.4/33", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		allow, err := ParsePushAllow(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
			return
		}
		for _, p := range allow {
			if !p.IsValid() || p != p.Masked() {
				t.Errorf("%q gave %v", s, p)
			}
		}
	})
}
