//go:build !unix

package setup

import (
	"io/fs"
	"os"
)

// keepOwner is a no-op where files have no Unix owner.
func keepOwner(*os.File, fs.FileInfo) {}
