//go:build !linux

package stacktest

import (
	"errors"
	"os"
)

func OpenPTY() (master, slave *os.File, err error) {
	return nil, nil, errors.New("no pseudo-terminal helper on this platform")
}
