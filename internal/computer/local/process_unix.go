//go:build unix

package local

import (
	"errors"
	"os/exec"
	"syscall"
)

type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	code int
	err  error
	// stop ends the disk watch of the process; nil without one.
	stop func() error
	// unmount lets the host mount of the Computer's image go; nil
	// without one.
	unmount func()
	// ended stops what served the process and outlives it (its
	// network's pasta); nil without anything.
	ended func()
	// init is the host PID of the sandbox's PID 1 (the command itself)
	// of a Restorable process; 0 otherwise.
	init int
}

func (pr *process) wait() {
	err := pr.cmd.Wait()
	if pr.ended != nil {
		pr.ended()
	}
	if pr.unmount != nil {
		pr.unmount()
	}
	if pr.stop != nil {
		// A process stopped for its disk use says so.
		if derr := pr.stop(); derr != nil {
			err = derr
		}
	}
	pr.code = 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			pr.code = 128 + int(ws.Signal())
		} else {
			pr.code = ee.ExitCode()
		}
	case err != nil:
		pr.err = err
	}
	// The tree goes with its leader.
	syscall.Kill(-pr.cmd.Process.Pid, syscall.SIGKILL)
	if pr.init > 0 {
		syscall.Kill(-pr.init, syscall.SIGKILL)
	}
	close(pr.done)
}

func (pr *process) PID() int { return pr.cmd.Process.Pid }

// InitPID returns the host PID of the sandbox's PID 1 of a Restorable
// process (the command itself, the root of the tree CRIU checkpoints),
// 0 for any other process.
func (pr *process) InitPID() int          { return pr.init }
func (pr *process) Done() <-chan struct{} { return pr.done }
func (pr *process) Wait() (int, error)    { <-pr.done; return pr.code, pr.err }
func (pr *process) Signal(sig syscall.Signal) error {
	err := syscall.Kill(-pr.cmd.Process.Pid, sig)
	if pr.init > 0 {
		// A Restorable process leads a session, hence a process group,
		// of its own inside the sandbox: the group of bubblewrap's outer
		// process does not hold it.
		if ierr := syscall.Kill(-pr.init, sig); ierr == nil {
			err = nil
		}
	}
	return err
}
