package bridgeweb

import (
	"net/url"
	"path/filepath"

	"github.com/aep-kimi/aep-kimi/mapping"
)

// Paths under an AEP home. The bridge keeps its own epoch counter and log
// directory so it never shares order or files with the hook adapter.
func kimiDir(home string) string   { return filepath.Join(home, "kimi") }
func epochPath(home string) string { return filepath.Join(kimiDir(home), "web-epoch") }

// LogDir is where the bridge writes its per-session JSONL logs.
func LogDir(home string) string { return filepath.Join(home, "logs", mapping.Agent+"-web") }

// SessionName is the AEP session a kap session is published as: the kap id
// itself in primary mode, {id}.web in companion mode (see the package docs).
func SessionName(mode mapping.Mode, kapSession string) string {
	if mode == mapping.Primary {
		return kapSession
	}
	return kapSession + CompanionSuffix
}

// SourceURI is the bridge's source for a kap session:
// aep://{host}/agent/kimi-code/web/session/{kap session}, each part escaped
// like aep.SourceURI escapes its parts.
func SourceURI(host, kapSession string) string {
	if host == "" {
		host = "localhost"
	}
	return "aep://" + url.PathEscape(host) + "/agent/" + url.PathEscape(mapping.Agent) +
		"/web/session/" + url.PathEscape(kapSession)
}
