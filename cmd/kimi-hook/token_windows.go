package main

import "github.com/aep-kimi/aep-kimi/internal/safefile"

// readPrivate reads a small file under the home without following a link.
func readPrivate(path string) ([]byte, error) { return safefile.ReadFile(path) }
