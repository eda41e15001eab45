package service

import (
	"flag"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// Flag is one of up's flags as given: its name and the value set.
type Flag struct{ Name, Value string }

// Record wraps every flag of fs so that each value set on it (a repeated
// flag once per use) is appended to the list returned, in order.
func Record(fs *flag.FlagSet) *[]Flag {
	seen := &[]Flag{}
	fs.VisitAll(func(f *flag.Flag) {
		r := recorder{Value: f.Value, name: f.Name, seen: seen}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			f.Value = boolRecorder{r}
			return
		}
		f.Value = r
	})
	return seen
}

type recorder struct {
	flag.Value
	name string
	seen *[]Flag
}

func (r recorder) Set(v string) error {
	if err := r.Value.Set(v); err != nil {
		return err
	}
	*r.seen = append(*r.seen, Flag{r.name, v})
	return nil
}

type boolRecorder struct{ recorder }

func (boolRecorder) IsBoolFlag() bool { return true }

// pathFlags are up's flags naming a file or directory.
var pathFlags = map[string]bool{"home": true, "kimi-home": true, "tls-cert": true, "tls-key": true, "nats-ca": true, "nats-creds": true}

// CheckFlags refuses what must not go in a unit: a secret (a notify
// target's URL or an OTLP header's value given inline rather than read
// from a file, credentials in a URL) and a relative path (the service
// does not start in this directory).
func CheckFlags(flags []Flag) error {
	for _, f := range flags {
		if err := checkFlag(f); err != nil {
			return fmt.Errorf("--%s: %w", f.Name, err)
		}
	}
	return nil
}

func checkFlag(f Flag) error {
	for _, part := range strings.Split(f.Value, ",") {
		if u, err := url.Parse(part); err == nil && u.User != nil {
			return fmt.Errorf("a URL with credentials would be written into the unit: use a credentials file (--nats-creds) or a header read from a file")
		}
	}
	switch {
	case pathFlags[f.Name]:
		return absolute(f.Value)
	case f.Name == "notify":
		kind, rest, _ := strings.Cut(f.Value, ":")
		target, opts, _ := strings.Cut(rest, "#")
		file, ok := strings.CutPrefix(target, "@")
		if !ok {
			return fmt.Errorf("%s:URL would write the URL into the unit, and such a URL is a secret: put it in a 0600 file and give %s:@FILE", kind, kind)
		}
		if err := absolute(file); err != nil {
			return err
		}
		for _, o := range strings.Split(opts, "&") {
			if k, v, ok := strings.Cut(o, "="); ok && strings.HasSuffix(k, "-file") {
				if err := absolute(v); err != nil {
					return err
				}
			}
		}
	case f.Name == "otlp-header":
		k, v, _ := strings.Cut(f.Value, "=")
		file, ok := strings.CutPrefix(v, "@")
		if !ok {
			return fmt.Errorf("%s=VALUE would write the value into the unit: put it in a 0600 file and give %s=@FILE", k, k)
		}
		return absolute(file)
	}
	return nil
}

func absolute(p string) error {
	if p != "" && !filepath.IsAbs(p) {
		return fmt.Errorf("%q is relative: give an absolute path (the service does not start in this directory)", p)
	}
	return nil
}
