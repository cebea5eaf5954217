package supervisor

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// startID identifies one process across PID reuse: the boot ID and the
// process's start time in clock ticks since boot.
func startID(pid int) (string, error) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// The command name (field 2) may hold spaces and parentheses: fields
	// are counted after its closing parenthesis.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return "", errors.New("unreadable /proc stat")
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 {
		return "", errors.New("short /proc stat")
	}
	return strings.TrimSpace(string(boot)) + ":" + f[19], nil
}

// onThisHost reports whether a process's start ID (startID) is of this
// host's current boot: only then can its PID be looked at here.
func onThisHost(id string) bool {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return err == nil && strings.HasPrefix(id, strings.TrimSpace(string(boot))+":")
}

// zombie reports whether the process has ended but is not yet reaped (a
// zombie, whose start ID is still readable): a session process killed with
// its control plane may linger so until its new parent reaps it.
func zombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := strings.LastIndexByte(string(stat), ')')
	if err != nil || i < 0 || i+2 >= len(stat) {
		return true
	}
	return stat[i+2] == 'Z' || stat[i+2] == 'X'
}

// adoptedProcess is a session process launched by an earlier control plane:
// not this one's child, so its exit is noticed through a pidfd.
type adoptedProcess struct {
	pid  int
	fd   *os.File
	done chan struct{}
}

// adopt takes charge of a running process when it is still the one that
// was launched (same start ID).
func adopt(pid int, want string) (*adoptedProcess, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	// Check after opening the pidfd: from here the PID cannot be reused
	// under us unnoticed.
	if got, err := startID(pid); err != nil || got != want || zombie(pid) {
		unix.Close(fd)
		return nil, errors.New("the process is gone")
	}
	p := &adoptedProcess{pid: pid, fd: os.NewFile(uintptr(fd), "pidfd"), done: make(chan struct{})}
	go p.watch()
	return p, nil
}

func (p *adoptedProcess) watch() {
	defer close(p.done)
	defer p.fd.Close()
	rc, err := p.fd.SyscallConn()
	if err != nil {
		return
	}
	// A pidfd becomes readable when its process exits; the runtime's
	// poller waits for that without a thread per process.
	rc.Read(func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, _ := unix.Poll(fds, 0)
		return n > 0
	})
	// Children it left in its group go with it.
	syscall.Kill(-p.pid, syscall.SIGKILL)
}

func (p *adoptedProcess) Done() <-chan struct{} { return p.done }

// PID is the process's ID, checked against the protocol connection's peer.
func (p *adoptedProcess) PID() int { return p.pid }

// Err says the process ended; an adopted process's exit status is its
// parent's to read, not ours.
func (p *adoptedProcess) Err() error {
	select {
	case <-p.done:
		return errors.New("the session process exited")
	default:
		return nil
	}
}

func (p *adoptedProcess) Kill() {
	select {
	case <-p.done:
	default:
		syscall.Kill(-p.pid, syscall.SIGKILL)
		syscall.Kill(p.pid, syscall.SIGKILL)
	}
}
