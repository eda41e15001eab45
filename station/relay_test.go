package station

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aep-kimi/aep-kimi/relay"
)

// The relay's flags win over its environment: --listen over --public over
// AEP_PORT over the default; a token from a file is re-read from it, one
// from AEP_TOKEN is not.
func TestRelayFlagsConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("from-the-file-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"AEP_PORT": "9911"}
	getenv := func(k string) string { return env[k] }
	for _, c := range []struct {
		o    RelayFlags
		want string
	}{
		{RelayFlags{}, "127.0.0.1:9911"},
		{RelayFlags{RelayOptions: RelayOptions{Public: true}}, "0.0.0.0:9911"},
		{RelayFlags{Listen: "127.0.0.1:1", RelayOptions: RelayOptions{Public: true}}, "127.0.0.1:1"},
	} {
		cfg, err := c.o.Config(getenv)
		if err != nil || cfg.Listen != c.want {
			t.Errorf("%+v: listen %q (%v), want %q", c.o, cfg.Listen, err, c.want)
		}
	}
	delete(env, "AEP_PORT")
	cfg, err := RelayFlags{TokenFile: file, BufferBytes: 1 << 20}.Config(getenv)
	if err != nil || cfg.Listen != relay.DefaultListen || cfg.Token != "from-the-file-0123456789" || cfg.TokenSource == nil || cfg.BufferBytes != 1<<20 {
		t.Fatalf("from the file: %+v, %v", cfg, err)
	}
	env["AEP_TOKEN"] = "from-the-environment-0123"
	if cfg, err := (RelayFlags{TokenFile: file}).Config(getenv); err != nil || cfg.Token != "from-the-environment-0123" || cfg.TokenSource != nil {
		t.Fatalf("from AEP_TOKEN: %+v, %v", cfg, err)
	}
}
