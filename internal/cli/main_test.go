package cli

import (
	"os"
	"testing"
)

// TestMain points the user config directory at a temporary one, so that
// no test reads or writes the profiles of the person running it.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "helmr-cli-config-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
