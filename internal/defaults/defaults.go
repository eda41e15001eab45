// Package defaults is the one way a component fills its Config: each
// component has a `withDefaults` method that returns a copy whose zero fields
// hold their Default constants, built from these two helpers, so a zero
// Config is always usable and a negative count or duration is refused the
// same way everywhere.
package defaults

import "fmt"

// Number is what Positive fills: counts, sizes and time.Duration.
type Number interface {
	~int | ~int64
}

// Set gives *v the default d when *v is the zero value of its type.
func Set[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// Positive gives *v the default d when it is zero. A negative *v is refused
// with an error naming the field ("relay config: MaxBody must not be negative
// (got -1)"), and is replaced by d too, so the copy stays usable either way.
func Positive[T Number](component, field string, v *T, d T) error {
	switch {
	case *v == 0:
		*v = d
	case *v < 0:
		got := *v
		*v = d
		return fmt.Errorf("%s: %s must not be negative (got %v)", component, field, got)
	}
	return nil
}

// SetPositive gives *v the default d unless it is positive: for the knobs
// of a client or a sink, where zero and below both mean "the default"
// rather than a mistake to refuse.
func SetPositive[T Number](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}
