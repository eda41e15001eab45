package cli

import (
	"strings"
	"testing"
)

func TestEnv(t *testing.T) {
	env := map[string]string{"S": " v ", "B1": "Yes", "B0": "off", "BX": "maybe", "N": "12", "Z": "0", "W": "x"}
	getenv := func(k string) string { return env[k] }
	if EnvOr(getenv, "S", "d") != "v" || EnvOr(getenv, "unset", "d") != "d" {
		t.Error("EnvOr")
	}
	if !EnvBool(getenv, "B1", false) || EnvBool(getenv, "B0", true) || !EnvBool(getenv, "BX", true) || EnvBool(getenv, "unset", false) {
		t.Error("EnvBool")
	}
	n, m := 5, 7
	if err := EnvPositiveInts(getenv, []EnvInt{{"N", &n}, {"unset", &m}}); err != nil || n != 12 || m != 7 {
		t.Errorf("EnvPositiveInts: %v %d %d", err, n, m)
	}
	for _, bad := range []string{"Z", "W"} {
		if err := EnvPositiveInts(getenv, []EnvInt{{bad, &n}}); err == nil || !strings.Contains(err.Error(), bad+"=") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
