//go:build !unix

package main

// fileLimit is unknown here: the configured bound on open logs stands.
func fileLimit() uint64 { return 0 }
