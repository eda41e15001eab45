// Package setup registers the AEP hook shim (kimi-hook) in Kimi Code's
// config.toml: it renders a marker-fenced block of [[hooks]] tables, merges it
// into the user's file without touching any other byte, strips it again, and
// validates the result the way Kimi 2.1.0 does (one bad hooks entry makes Kimi
// drop every hook, silently).
package setup

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aep-kimi/aep-kimi/internal/defaults"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// Defaults and limits.
const (
	// AgentKimiCode is the only agent aep-setup knows.
	AgentKimiCode = "kimi-code"
	// ConfigFileName is the file Kimi reads hooks from, inside its home.
	ConfigFileName = "config.toml"
	// HookCmdName is the shim's executable name; an unfenced [[hooks]] table
	// whose command runs a program of this name is ours.
	HookCmdName = "kimi-hook"
	// DefaultDaemonURL is where the adapter listens.
	DefaultDaemonURL = "http://127.0.0.1:8398"
	// DefaultHookTimeout is each hook's Kimi timeout in seconds: the shim
	// only forwards stdin, so a dead adapter must not stall Kimi for long.
	DefaultHookTimeout = 10
	// DefaultAttentionTimeoutMs is the adapter's default hold of the
	// PreToolUse permission gate (AEP_ATTENTION_TIMEOUT_MS).
	DefaultAttentionTimeoutMs = 50000
	// GateTimeoutSlack is added to the hold so the shim's reply still lands
	// inside Kimi's PreToolUse window.
	GateTimeoutSlack = 10
	// MinHookTimeout and MaxHookTimeout are Kimi's accepted timeout range.
	MinHookTimeout = 1
	MaxHookTimeout = 600
	// BackupInfix separates the file name from the UTC timestamp of a backup.
	BackupInfix = ".aep-backup-"
	// BackupTimeLayout is the backup timestamp (UTC yyyymmddThhmmssZ).
	BackupTimeLayout = "20060102T150405Z"
	// DefaultHealthTimeout bounds the adapter reachability probe.
	DefaultHealthTimeout = time.Second
	// HealthPath is the adapter's liveness endpoint.
	HealthPath = "/healthz"
	// DefaultVersionTimeout bounds `kimi --version`: Node starts in ~1 s,
	// but a loaded machine can take many times that.
	DefaultVersionTimeout = 30 * time.Second
	// NewFileMode and NewDirMode are used when config.toml or its directory
	// does not exist yet: the file holds provider API keys.
	NewFileMode = 0o600
	NewDirMode  = 0o700
)

// ErrBadConfig marks an unusable Config value (a usage error, not a refusal
// to touch the file).
var ErrBadConfig = errors.New("bad setup configuration")

// Config is everything Write, Remove and Check need. Only Home is required
// for Remove; Write also needs HookCmd and AEPHome.
type Config struct {
	// Home is Kimi's home directory (KIMI_CODE_HOME); config.toml lives in it.
	Home string
	// HookCmd is the absolute path of the kimi-hook executable.
	HookCmd string
	// DaemonURL is the adapter's base URL ("" = DefaultDaemonURL).
	DaemonURL string
	// AEPHome is the AEP state directory passed to kimi-hook (absolute).
	AEPHome string
	// KimiVersion is the installed Kimi's version; "" means unknown, which
	// registers the safe 16 events.
	KimiVersion string
	// Control raises the PreToolUse timeout so the held permission gate fits.
	Control bool
	// HoldMs is the gate hold (AEP_ATTENTION_TIMEOUT_MS); 0 means
	// DefaultAttentionTimeoutMs.
	HoldMs int
	// DryRun makes Write and Remove compute everything but change no file.
	DryRun bool
	// Now stamps backups; nil means time.Now.
	Now func() time.Time
	// HTTPClient probes the adapter in Check; nil means a default client.
	HTTPClient *http.Client
	// HealthTimeout bounds that probe; 0 means DefaultHealthTimeout.
	HealthTimeout time.Duration
	// Logger receives debug detail; nil discards it.
	Logger *slog.Logger
}

// ConfigPath is Home/config.toml.
func (c Config) ConfigPath() string { return filepath.Join(c.Home, ConfigFileName) }

// Events is the event set registered for c.KimiVersion.
func (c Config) Events() []string { return HookEvents(c.KimiVersion) }

// VersionKnown reports whether c.KimiVersion parses.
func (c Config) VersionKnown() bool {
	_, err := ParseVersion(c.KimiVersion)
	return err == nil
}

// acceptedEvents is what an existing hooks entry may name: the detected
// version's set, or all 20 when the version is unknown (a user's own
// TurnStarted hook is not ours to reject on a guess).
func (c Config) acceptedEvents() []string {
	if c.VersionKnown() {
		return c.Events()
	}
	return AllHookEvents()
}

// HookTimeout is the Kimi timeout (seconds) registered for event.
func (c Config) HookTimeout(event string) int {
	if event != mapping.HookPreToolUse || !c.Control {
		return DefaultHookTimeout
	}
	c, _ = c.withDefaults() // a refused HoldMs is reported by Render
	hold := c.HoldMs
	// ceil(hold/1000) without float rounding; cap before adding so a huge
	// hold cannot overflow.
	secs := hold / 1000
	if hold%1000 != 0 {
		secs++
	}
	if secs > MaxHookTimeout {
		return MaxHookTimeout
	}
	return min(secs+GateTimeoutSlack, MaxHookTimeout)
}

// withDefaults returns c with every zero field set to its default, or an
// ErrBadConfig error for a negative HoldMs or HealthTimeout (the copy then
// holds the default there too). The exported entry points each fill their
// own copy, since a Config reaches them as the caller built it.
func (c Config) withDefaults() (Config, error) {
	const component = "setup config"
	defaults.Set(&c.DaemonURL, DefaultDaemonURL)
	err := errors.Join(
		defaults.Positive(component, "HoldMs", &c.HoldMs, DefaultAttentionTimeoutMs),
		defaults.Positive(component, "HealthTimeout", &c.HealthTimeout, DefaultHealthTimeout),
	)
	if c.Now == nil {
		c.Now = time.Now
	}
	defaults.Set(&c.Logger, slog.New(slog.DiscardHandler))
	// The probe's context bounds the request.
	defaults.Set(&c.HTTPClient, http.DefaultClient)
	if err != nil {
		return c, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	return c, nil
}

// validateHome checks the field Remove needs.
func (c Config) validateHome() error {
	if c.Home == "" {
		return fmt.Errorf("%w: Kimi home directory is empty", ErrBadConfig)
	}
	return nil
}

// validateRender checks the fields that end up in the hook command.
func (c Config) validateRender() error {
	if err := checkArgPath("--hook-cmd", c.HookCmd); err != nil {
		return err
	}
	if err := checkArgPath("--aep-home", c.AEPHome); err != nil {
		return err
	}
	return checkDaemonURL(c.DaemonURL)
}

func checkArgPath(name, p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%w: %s is empty", ErrBadConfig, name)
	case !filepath.IsAbs(p):
		return fmt.Errorf("%w: %s %q is not an absolute path", ErrBadConfig, name, p)
	case !utf8.ValidString(p):
		return fmt.Errorf("%w: %s %q is not valid UTF-8 (TOML strings must be)", ErrBadConfig, name, p)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("%w: %s contains a NUL byte", ErrBadConfig, name)
	}
	return nil
}

func checkDaemonURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: --daemon %q: %w", ErrBadConfig, raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: --daemon %q is not an http(s)://host[:port] URL", ErrBadConfig, raw)
	}
	if !utf8.ValidString(raw) || strings.ContainsAny(raw, "\x00\n\r") {
		return fmt.Errorf("%w: --daemon %q contains control characters", ErrBadConfig, raw)
	}
	return nil
}
