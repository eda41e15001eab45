package stacktest

import (
	"encoding/json"
)

func JsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
