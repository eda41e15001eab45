package relay

import (
	"encoding/json"
	"net/http"
)

// Error codes. HTTP errors answer {"error": code, "detail": text}; socket
// errors are error frames {"type": "error", "code": code, "detail": text}.
const (
	codeInvalidEvent     = "invalid-event"
	codePayloadTooLarge  = "payload-too-large"
	codeBodyTimeout      = "body-timeout"
	codeTooManyEvents    = "too-many-events"
	codeUnsupportedMedia = "unsupported-media-type"
	codeVersion          = "version-unsupported"
	codeUnauthorized     = "unauthorized"
	codeForbidden        = "forbidden"
	codeInvalidFilter    = "invalid-filter"
	codeInvalidCapture   = "invalid-capture"
	codeLimitExceeded    = "limit-exceeded"
	codeUnknownDialect   = "unknown-dialect"
	codeNotFound         = "not-found"
	codeMethod           = "method-not-allowed"
	codeControlSocket    = "control-requires-socket"
	codeShuttingDown     = "shutting-down"
	codeHelloRequired    = "hello-required"
	codeInvalidHello     = "invalid-hello"
	codeInvalidFrame     = "invalid-frame"
	codeBinary           = "binary-unsupported"
	codeUnsupported      = "unsupported"
	codeAmbiguous        = "ambiguous"
	codeNoRoute          = "no-route"
)

// httpError is the body of every HTTP error.
type httpError struct {
	Error  string `json:"error"`
	Detail string `json:"detail,omitempty"`
	// Line is the 1-based line of the first failing event in a batch.
	Line int `json:"line,omitempty"`
	// Versions lists the supported versions on a 426.
	Versions []string `json:"versions,omitempty"`
}

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
	writeJSON(w, status, httpError{Error: code, Detail: detail})
}
