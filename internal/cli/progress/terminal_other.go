//go:build !linux && !darwin

package progress

import "os"

// isTerminal takes a character device for a terminal (Windows consoles are
// ones; so is the null device, where what is printed goes nowhere).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
