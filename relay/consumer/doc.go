// Package consumer is what a terminal consumer of a relay's stream needs:
// the sanitizer every line printed from event data goes through.
package consumer
