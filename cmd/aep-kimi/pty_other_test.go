//go:build !linux

package main

import (
	"errors"
	"os"
)

func openPTY() (master, slave *os.File, err error) {
	return nil, nil, errors.New("no pseudo-terminal helper on this platform")
}
