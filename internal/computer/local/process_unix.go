//go:build unix

package local

import (
	"errors"
	"os/exec"
	"sync"
	"syscall"
)

type process struct {
	// pid is the host PID of the process's leader: bubblewrap's outer
	// process, or a restored sandbox's PID 1 (Unpark).
	pid int
	// waitFn waits for the leader's end (exec.Cmd.Wait, or the restored
	// process's wait); an *exec.ExitError tells its status.
	waitFn func() error
	done   chan struct{}
	code   int
	err    error
	// stop ends the disk watch of the process; nil without one.
	stop func() error
	// unmount lets the host mount of the Computer's image go; nil
	// without one.
	unmount func()
	// ended stops what served the process and outlives it (its
	// network's pasta); nil without anything.
	ended func()
	// net is the pasta serving the process's network; nil without one.
	net *netServer
	// init is the host PID of the sandbox's PID 1 (the command itself)
	// of a Restorable process; 0 otherwise.
	init int
	// owner is the provider that started or restored the process.
	owner *Provider
	// binds are the mount points of a Restorable process's binds
	// (ProcessSpec.Binds): a restore binds each from the source its
	// caller gives then (another node's files, perhaps).
	binds []string

	// mu guards parking and parked.
	mu sync.Mutex
	// parking is set while Park dumps the process: its end waits for
	// the verdict before it is reported.
	parking chan struct{}
	// parked says Park ended the process on purpose: it reports exit
	// code 0 and no error.
	parked bool
}

// newProcess returns the process of a started command.
func newProcess(cmd *exec.Cmd, owner *Provider) *process {
	return &process{pid: cmd.Process.Pid, waitFn: cmd.Wait, done: make(chan struct{}), owner: owner}
}

func (pr *process) wait() {
	err := pr.waitFn()
	if pr.ended != nil {
		pr.ended()
	}
	if pr.unmount != nil {
		pr.unmount()
	}
	// A dump ends the process before CRIU returns: whether that was a
	// park is known once the dump is over.
	pr.mu.Lock()
	parking := pr.parking
	pr.mu.Unlock()
	if parking != nil {
		<-parking
	}
	pr.mu.Lock()
	parked := pr.parked
	pr.mu.Unlock()
	if pr.stop != nil {
		// A process stopped for its disk use says so.
		if derr := pr.stop(); derr != nil && !parked {
			err = derr
		}
	}
	pr.code = 0
	var ee *exec.ExitError
	switch {
	case parked:
		// Not an exit of its own: Park's caller knows.
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
	syscall.Kill(-pr.pid, syscall.SIGKILL)
	if pr.init > 0 {
		syscall.Kill(-pr.init, syscall.SIGKILL)
	}
	close(pr.done)
}

func (pr *process) PID() int { return pr.pid }

// InitPID returns the host PID of the sandbox's PID 1 of a Restorable
// process (the command itself, the root of the tree CRIU checkpoints),
// 0 for any other process.
func (pr *process) InitPID() int          { return pr.init }
func (pr *process) Done() <-chan struct{} { return pr.done }
func (pr *process) Wait() (int, error)    { <-pr.done; return pr.code, pr.err }
func (pr *process) Signal(sig syscall.Signal) error {
	err := syscall.Kill(-pr.pid, sig)
	if pr.init > 0 && pr.init != pr.pid {
		// A Restorable process leads a session, hence a process group,
		// of its own inside the sandbox: the group of bubblewrap's outer
		// process does not hold it.
		if ierr := syscall.Kill(-pr.init, sig); ierr == nil {
			err = nil
		}
	}
	return err
}

// netServer is the pasta process that serves a sandbox's network
// namespace. It is stopped for good when the sandbox ends, and paused
// (stopped, to be replaced) while the sandbox is checkpointed.
type netServer struct {
	mu  sync.Mutex
	pid int
	// closed is set once the sandbox ended: a pasta set after that is
	// stopped at once.
	closed bool
}

// set records pid as the sandbox's pasta; it is killed at once when the
// sandbox has ended meanwhile.
func (s *netServer) set(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		syscall.Kill(pid, syscall.SIGKILL)
		return
	}
	s.pid = pid
}

// pause kills the pasta and returns its PID (0 when none ran).
func (s *netServer) pause() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	pid := s.pid
	if pid > 0 {
		syscall.Kill(pid, syscall.SIGKILL)
		s.pid = 0
	}
	return pid
}

// close kills the pasta for good: the sandbox has ended.
func (s *netServer) close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.pid > 0 {
		syscall.Kill(s.pid, syscall.SIGKILL)
		s.pid = 0
	}
}
