package progress

import (
	"os"

	"golang.org/x/sys/unix"
)

// isTerminal asks the terminal driver whether f is one.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TIOCGETA)
	return err == nil
}
