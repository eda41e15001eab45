// Package export implements the AEP-0005 bridges — CloudEvents 1.0 both ways
// (§1, §2), OTLP log records (§3) and the OCSF projection (§4) — plus
// OpenTelemetry traces of agent runs, which AEP-0005 defers and this package
// adds beyond the specification.
//
// The mappings are pure functions of one event (and, for traces, of the
// events before it in the same run); the live exporters in this package are
// ordinary relay consumers that feed them and deliver the results.
package export
