package station

import (
	"flag"
	"strings"
	"testing"
)

func TestTLSOptions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string // "" accepted
		on   bool
	}{
		{nil, nil, "", false},
		{[]string{"--tls-cert", "c.pem", "--tls-key", "k.pem"}, nil, "", true},
		{[]string{"--tls-cert", "c.pem"}, nil, "go together", true},
		{[]string{"--tls-key", "k.pem"}, nil, "go together", true},
		{[]string{"--acme-domain", "relay.example.com,Other.Example.com", "--acme-domain", "third.example.com"}, nil, "", true},
		{nil, map[string]string{"AEP_ACME_DOMAIN": "relay.example.com"}, "", true},
		{[]string{"--acme-domain", "x.example.com"}, map[string]string{"AEP_ACME_DOMAIN": "localhost"}, "", true}, // the flag wins
		{[]string{"--acme-domain", "localhost"}, nil, "with a dot", true},
		{[]string{"--acme-domain", "https://relay.example.com"}, nil, "no scheme", true},
		{[]string{"--acme-domain", "*.example.com"}, nil, "wildcard", true},
		{[]string{"--acme-domain", "relay.example.com", "--tls-cert", "c", "--tls-key", "k"}, nil, "choose one", true},
		{[]string{"--behind-proxy", "--tls-cert", "c", "--tls-key", "k"}, nil, "does not go with", true},
		{[]string{"--behind-proxy"}, nil, "", false},
		{nil, map[string]string{"AEP_BEHIND_PROXY": "1"}, "", false},
	} {
		var o TLSOptions
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		o.BindFlags(fs, func(k string) string { return tc.env[k] })
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := o.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v %v: %v, want %q", tc.args, tc.env, err, tc.want)
		}
		if o.Enabled() != tc.on {
			t.Errorf("%v %v: TLS on %v, want %v", tc.args, tc.env, o.Enabled(), tc.on)
		}
	}
	var o TLSOptions
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	o.BindFlags(fs, func(string) string { return "" })
	_ = fs.Parse([]string{"--acme-domain", "A.example.com, b.example.com"})
	if strings.Join(o.ACMEDomains, " ") != "a.example.com b.example.com" || o.ACMECA != DefaultACMECA {
		t.Errorf("domains %q, CA %q", o.ACMEDomains, o.ACMECA)
	}
	if !strings.HasPrefix(DefaultACMECA, "https://acme-v02.api.letsencrypt.org/") {
		t.Errorf("the default CA is %q, want Let's Encrypt's production directory", DefaultACMECA)
	}
}
