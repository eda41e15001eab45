//go:build !unix

package consumer

import "os"

// terminalWidth is unknown here: COLUMNS sets it (Width).
func terminalWidth(*os.File) int { return 0 }
