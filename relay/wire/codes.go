package wire

// Error codes. HTTP errors answer {"error": code, "detail": text} (HTTPError);
// socket errors are error frames {"type": "error", "code": code, "detail":
// text} (Error).
const (
	CodeInvalidEvent     = "invalid-event"
	CodePayloadTooLarge  = "payload-too-large"
	CodeBodyTimeout      = "body-timeout"
	CodeTooManyEvents    = "too-many-events"
	CodeUnsupportedMedia = "unsupported-media-type"
	CodeVersion          = "version-unsupported"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeInvalidFilter    = "invalid-filter"
	CodeInvalidCapture   = "invalid-capture"
	CodeLimitExceeded    = "limit-exceeded"
	CodeUnknownDialect   = "unknown-dialect"
	CodeNotFound         = "not-found"
	CodeMethod           = "method-not-allowed"
	CodeControlSocket    = "control-requires-socket"
	CodeShuttingDown     = "shutting-down"
	// CodeStoreUnavailable: the durable store did not take the event, so it
	// was not accepted; the sender retries (HTTP 503).
	CodeStoreUnavailable = "store-unavailable"
	CodeHelloRequired    = "hello-required"
	CodeInvalidHello     = "invalid-hello"
	CodeInvalidFrame     = "invalid-frame"
	CodeBinary           = "binary-unsupported"
	CodeUnsupported      = "unsupported"
	CodeAmbiguous        = "ambiguous"
	CodeNoRoute          = "no-route"
)

// HTTPError is the body of every HTTP error.
type HTTPError struct {
	Error  string `json:"error"`
	Detail string `json:"detail,omitempty"`
	// Line is the 1-based line of the first failing event in a batch.
	Line int `json:"line,omitempty"`
	// Versions lists the supported versions on a 426.
	Versions []string `json:"versions,omitempty"`
}
