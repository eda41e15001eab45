package station

import (
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/envtable"
)

// TestCodeDefaultsFillTheTable: every default station fills in names a
// variable of envtable.Table that gives no default of its own, so a
// renamed variable cannot lose its default and the table cannot say one
// thing while the code says another.
func TestCodeDefaultsFillTheTable(t *testing.T) {
	own := map[string]string{}
	for _, e := range envtable.Table() {
		own[e.Name] = e.Default
	}
	for name, d := range codeDefaults() {
		switch have, ok := own[name]; {
		case !ok:
			t.Errorf("station fills in %s's default (%s); envtable.Table has no %s", name, d, name)
		case have != "":
			t.Errorf("envtable.Table gives %s the default %q; station fills in %q from the code", name, have, d)
		}
	}
}
