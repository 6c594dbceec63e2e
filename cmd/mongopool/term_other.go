//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

import "os"

// terminalWidth reports whether f is a terminal, as far as the file's mode
// tells, and 0 for its width, which is unknown here (the view assumes 80
// columns).
func terminalWidth(f *os.File) (int, bool) {
	fi, err := f.Stat()
	return 0, err == nil && fi.Mode()&os.ModeCharDevice != 0
}
