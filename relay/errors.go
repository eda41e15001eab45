package relay

import (
	"encoding/json"
	"net/http"

	"github.com/aep-kimi/aep-kimi/relay/wire"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"internal","detail":"response encoding failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, detail string) {
	writeJSON(w, status, wire.HTTPError{Error: code, Detail: detail})
}
