package relay

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// natsLogger hands an embedded nats-server's log to slog: its warnings and
// errors are what an operator needs to see ("JetStream out of space, will
// be DISABLED"); its notices (the start-up banner, JetStream starting) are
// debug lines, and its debug and trace output is never asked for.
type natsLogger struct{ log *slog.Logger }

// deliberatePayloadWarning begins the warning the server gives at each
// start about a payload limit above 8 MB: the relay sets it to carry its
// largest event (AEP_MAX_BODY), a choice made, not a fault.
const deliberatePayloadWarning = "Maximum payloads over"

func (l natsLogger) logf(level slog.Level, format string, v []any) {
	if !l.log.Enabled(context.Background(), level) {
		return
	}
	l.log.Log(context.Background(), level, "nats: "+fmt.Sprintf(format, v...))
}

func (l natsLogger) Noticef(format string, v ...any) { l.logf(slog.LevelDebug, format, v) }
func (l natsLogger) Warnf(format string, v ...any) {
	level := slog.LevelWarn
	if strings.HasPrefix(format, deliberatePayloadWarning) {
		level = slog.LevelDebug
	}
	l.logf(level, format, v)
}
func (l natsLogger) Errorf(format string, v ...any) { l.logf(slog.LevelError, format, v) }

// Fatalf is an error like any other: the server that says it returns
// rather than exits, and the relay decides what its failure means.
func (l natsLogger) Fatalf(format string, v ...any) { l.logf(slog.LevelError, format, v) }
func (l natsLogger) Debugf(format string, v ...any) { l.logf(slog.LevelDebug, format, v) }
func (l natsLogger) Tracef(format string, v ...any) { l.logf(slog.LevelDebug, format, v) }
