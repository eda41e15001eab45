package notify

import (
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
