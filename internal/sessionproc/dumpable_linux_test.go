//go:build linux

package sessionproc

import (
	"os"
	"strconv"
	"testing"

	"github.com/helmr-go/helmr/internal/protocol"
	"golang.org/x/sys/unix"
)

// The processes agent code starts run as the same user in the same
// sandbox: once the credential is read, the session process is not
// dumpable, so they cannot read it from /proc/PID/mem or ptrace it.
func TestReadTokenHidesTheProcessMemory(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	w.WriteString("secret-token")
	w.Close()
	// readToken closes the descriptor it is given: a copy of r's.
	fd, err := unix.Dup(int(r.Fd()))
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(protocol.EnvTokenFD, strconv.Itoa(fd))
	t.Cleanup(func() { unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0) })
	tok, err := readToken()
	if err != nil || tok != "secret-token" {
		t.Fatalf("readToken: %q %v", tok, err)
	}
	if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 0 {
		t.Fatalf("the session process is dumpable (%d, %v): its children can read the credential from its memory", d, err)
	}
}
