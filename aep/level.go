// Package aep implements the AEP 0.1 envelope: events, ids, canonical JSON and
// digests, validation, attr-match filters, capture gating and redaction.
//
// It performs no I/O and reads no clock except where a caller passes one in.
package aep

import "fmt"

// Version is the one envelope version this package speaks.
const Version = "0.1"

// Capture is a content-capture level (AEP-0001 §8.2), ordered none < metadata
// < redacted < full. The zero value is CaptureNone; use ParseCapture for wire
// strings, where an absent value means metadata.
type Capture int8

// Capture levels in their total order.
const (
	CaptureNone Capture = iota
	CaptureMetadata
	CaptureRedacted
	CaptureFull
)

var captureNames = [...]string{"none", "metadata", "redacted", "full"}

// String returns the wire spelling.
func (c Capture) String() string {
	if c < CaptureNone || c > CaptureFull {
		return fmt.Sprintf("capture(%d)", int8(c))
	}
	return captureNames[c]
}

// ParseCapture parses a wire capture level. The empty string is the AEP default
// (metadata).
func ParseCapture(s string) (Capture, error) {
	if s == "" {
		return CaptureMetadata, nil
	}
	for i, n := range captureNames {
		if n == s {
			return Capture(i), nil
		}
	}
	return CaptureMetadata, fmt.Errorf("unknown capture level %q (want none, metadata, redacted or full)", s)
}

// Severity is an event severity (AEP-0001 §8.1), ordered debug < info < notice
// < warning < error < critical.
type Severity int8

// Severity levels in their total order.
const (
	SeverityDebug Severity = iota
	SeverityInfo
	SeverityNotice
	SeverityWarning
	SeverityError
	SeverityCritical
)

var severityNames = [...]string{"debug", "info", "notice", "warning", "error", "critical"}

// String returns the wire spelling.
func (s Severity) String() string {
	if s < SeverityDebug || s > SeverityCritical {
		return fmt.Sprintf("severity(%d)", int8(s))
	}
	return severityNames[s]
}

// ParseSeverity parses a wire severity. The empty string is the AEP default
// (info).
func ParseSeverity(s string) (Severity, error) {
	if s == "" {
		return SeverityInfo, nil
	}
	for i, n := range severityNames {
		if n == s {
			return Severity(i), nil
		}
	}
	return SeverityInfo, fmt.Errorf("unknown severity %q", s)
}
