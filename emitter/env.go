package emitter

import (
	"log/slog"
	"os"
	"strings"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// PostureFromEnv reads the capture and redaction environment every source
// shares: AEP_CAPTURE, AEP_CAPTURE_ATTENTION, AEP_REDACT_NAMES and
// AEP_REDACT_PII.
func PostureFromEnv(getenv func(string) string) (mapping.Posture, error) {
	var names []string
	for _, n := range strings.Split(getenv("AEP_REDACT_NAMES"), ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	home, _ := os.UserHomeDir()
	ro := aep.RedactOptions{Home: home, SecretNames: names, NoPII: !cli.EnvBool(getenv, "AEP_REDACT_PII", true)}
	// A configured name's value, where this process can see it, is a secret
	// value too (AEP-0003 §9.4 b).
	for _, n := range names {
		if v := getenv(n); v != "" {
			ro.SecretValues = append(ro.SecretValues, v)
		}
	}
	return mapping.ParsePosture(getenv("AEP_CAPTURE"), getenv("AEP_CAPTURE_ATTENTION"), ro)
}

// fdShare is the part of the process's file limit one kind of descriptor
// may hold (session logs, process watches): the rest is for hook
// connections, the relay link and the spool.
const fdShare = 4

// FDShareBound keeps a descriptor bound (def when not configured) under a
// quarter of the process's file limit, so idle logs or watches can never
// starve the listener of descriptors (an accept that fails for want of one
// would leave every hook waiting).
func FDShareBound(what string, configured, def int, log *slog.Logger) int {
	return fdShareBound(what, configured, def, fileLimit(), log)
}

func fdShareBound(what string, configured, def int, limit uint64, log *slog.Logger) int {
	if configured <= 0 {
		configured = def
	}
	if limit == 0 || limit/fdShare >= uint64(configured) {
		return configured
	}
	bound := max(int(limit/fdShare), 1)
	log.Info(what+" bounded by the file limit", "bound", bound, "file_limit", limit)
	return bound
}
