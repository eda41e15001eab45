package cli

import (
	"fmt"
	"strconv"
	"strings"
)

// The environment helpers read through getenv (os.Getenv in main, a map in
// tests): a flag's default, or a setting with no flag of its own.

// EnvOr is the trimmed value of key, or def when it is unset or blank.
func EnvOr(getenv func(string) string, key, def string) string {
	if v := strings.TrimSpace(getenv(key)); v != "" {
		return v
	}
	return def
}

// EnvBool reads 1/true/yes/on and 0/false/no/off; anything else is def.
func EnvBool(getenv func(string) string, key string, def bool) bool {
	switch strings.ToLower(strings.TrimSpace(getenv(key))) {
	case "1", "true", "yes", "on":
		return true
	case "0", "false", "no", "off":
		return false
	}
	return def
}

// EnvInt names an integer setting and where it goes.
type EnvInt struct {
	Name string
	Dst  *int
}

// EnvPositiveInts sets each Dst whose variable is set; a value that is not
// a positive integer is an error naming the variable.
func EnvPositiveInts(getenv func(string) string, ints []EnvInt) error {
	for _, e := range ints {
		v := strings.TrimSpace(getenv(e.Name))
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("%s=%q is not a positive integer", e.Name, v)
		}
		*e.Dst = n
	}
	return nil
}
