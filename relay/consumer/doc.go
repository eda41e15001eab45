// Package consumer is what a consumer of a relay's stream needs beyond the
// client: the fold of events into sessions, runs and attention requests
// with their outcomes (Fold, the state pending, respond and the rules build
// on), the timeline renderer (Printer) and pending blocks (WritePending), a
// Follower that prints a live stream, and the sanitizer (Line, Text,
// Writer) every line printed from event data goes through.
//
// The fold is the Go twin of fleetpage's assets/state.js: both produce the
// same Projection, held to the golden files under testdata/fold.
package consumer
