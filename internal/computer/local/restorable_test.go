//go:build linux

package local_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/helmr-go/helmr/internal/computer"
	"github.com/helmr-go/helmr/internal/computer/local"
	"golang.org/x/sys/unix"
)

// A Restorable process is its sandbox's PID 1, leads a session of its
// own there, and still goes with a Signal to the process.
func TestRestorableProcess(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	p, err := local.New(local.Options{Dir: t.TempDir(), CgroupName: "helmr-test-restorable"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Cleanup)
	ctx := context.Background()
	spec := computer.Spec{ID: "r1", Image: computer.Image{Host: true}}
	if err := p.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), spec.ID) })
	pr, err := p.Start(ctx, spec, computer.ProcessSpec{Argv: []string{"sleep", "60"}, Restorable: true})
	if err != nil {
		t.Fatal(err)
	}
	init := pr.(interface{ InitPID() int }).InitPID()
	if init <= 0 {
		t.Fatal("no InitPID")
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", init))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(status), "\nNSpid:\t"+fmt.Sprint(init)+"\t1\n") {
		t.Fatalf("process %d is not PID 1 of its namespace:\n%s", init, status)
	}
	// It makes its session once released, just before it runs its
	// command.
	for i := 0; ; i++ {
		sid, _ := unix.Getsid(init)
		if sid == init {
			break
		}
		if i == 500 {
			t.Fatalf("process %d is in session %d, not its own", init, sid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := pr.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-pr.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the process runs on after SIGKILL")
	}
	for i := 0; i < 100; i++ {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", init)); err != nil || strings.Contains(string(b), ") Z ") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("process %d is still there", init)
}
