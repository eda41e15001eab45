package station

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/bridgeweb"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/envtable"
	"github.com/aep-kimi/aep-kimi/internal/syncmode"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/client"
)

// Environment is envtable.Table with the defaults that are constants of
// the daemons' code filled in, as docs/reference/environment.md shows it.
func Environment() []envtable.Var {
	table := envtable.Table()
	defaults := codeDefaults()
	for i, e := range table {
		if d, ok := defaults[e.Name]; ok {
			table[i].Default = d
		}
	}
	return table
}

// codeDefaults is, by variable, the default an unset variable means where
// that default is a constant of the code.
func codeDefaults() map[string]string {
	return map[string]string{
		"AEP_RELAY":                  client.DefaultURL,
		"AEP_PORT":                   portOf(relay.DefaultListen),
		"AEP_BUFFER":                 strconv.Itoa(relay.DefaultBuffer),
		"AEP_BUFFER_BYTES":           bytesOf(relay.DefaultBufferBytes),
		"AEP_MAX_SESSIONS":           strconv.Itoa(relay.DefaultMaxSessions),
		"AEP_MAX_BODY":               bytesOf(relay.DefaultMaxBody),
		"AEP_MAX_BATCH":              strconv.Itoa(relay.DefaultMaxBatch),
		"AEP_MAX_CONNECTIONS":        strconv.Itoa(relay.DefaultMaxConnections),
		"AEP_LOGIN_TTL":              durationOf(fleetpage.DefaultSessionTTL),
		"AEP_LOG_SYNC":               string(syncmode.Default),
		"AEP_CAPTURE":                mapping.DefaultPosture().Capture.String(),
		"AEP_CAPTURE_ATTENTION":      mapping.DefaultPosture().AttentionCapture.String(),
		"AEP_ATTENTION_TIMEOUT_MS":   strconv.FormatInt(adapter.DefaultHoldTimeout.Milliseconds(), 10),
		"AEP_KIMI_MAX_OPEN_LOGS":     fmt.Sprintf("%d (at most a quarter of the open-file limit)", adapter.DefaultMaxOpenLogs),
		"AEP_KIMI_MAX_SESSIONS":      strconv.Itoa(adapter.DefaultMaxSessions),
		"AEP_KIMI_MAX_WATCHES":       fmt.Sprintf("%d (at most a quarter of the open-file limit)", adapter.DefaultMaxWatches),
		"AEP_KIMI_WEB_MAX_OPEN_LOGS": fmt.Sprintf("%d (at most a quarter of the open-file limit)", bridgeweb.DefaultMaxOpenLogs),
		"GOMEMLIMIT":                 "AEP_BUFFER_BYTES + " + bytesOf(relay.HeapHeadroom),
	}
}

func portOf(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[i+1:]
		}
	}
	return addr
}

func bytesOf(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }

// durationOf is d as a person writes it: 12h, not 12h0m0s.
func durationOf(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
