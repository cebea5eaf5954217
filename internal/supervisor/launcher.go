package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/helmr-go/helmr/helmrtype"

	"github.com/helmr-go/helmr/internal/protocol"
)

// LaunchSpec is what a Launcher needs to start a session process.
type LaunchSpec struct {
	SessionID  string
	ComputerID string
	Agent      string
	Binary     string
	// Socket and Token are how the process reaches the protocol endpoint.
	Socket string
	Token  string
	// ReconnectWindow is how long the process tries to reconnect after it
	// lost the control plane.
	ReconnectWindow time.Duration
}

// Env returns the protocol variables a session process reads.
func (s LaunchSpec) Env() []string {
	env := []string{protocol.EnvSocket + "=" + s.Socket, protocol.EnvToken + "=" + s.Token, protocol.EnvAgent + "=" + s.Agent}
	if s.ReconnectWindow > 0 {
		env = append(env, protocol.EnvReconnectWindow+"="+helmrtype.FormatDuration(s.ReconnectWindow))
	}
	return env
}

// Process is a running session process.
type Process interface {
	// Done is closed when the process has exited; Err then tells how.
	Done() <-chan struct{}
	// Err is nil for a clean exit, else why the process ended.
	Err() error
	// Kill ends the process (and its process group) at once.
	Kill()
}

// Launcher starts session processes on Computers.
type Launcher interface {
	Launch(ctx context.Context, spec LaunchSpec) (Process, error)
}

// ExecLauncher runs the Deployment's binary as a child process in a
// per-Computer working directory under Dir. Real sandboxes replace it in
// the computers work; until then a Computer is a directory.
type ExecLauncher struct {
	Dir string
}

type execProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Launch starts spec.Binary in Dir/computers/<id>/workspace, its output
// appended to Dir/computers/<id>/process.log.
func (l *ExecLauncher) Launch(ctx context.Context, spec LaunchSpec) (Process, error) {
	base := filepath.Join(l.Dir, "computers", spec.ComputerID)
	work := filepath.Join(base, "workspace")
	if err := os.MkdirAll(work, 0o750); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(filepath.Join(base, "process.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(spec.Binary)
	cmd.Dir = work
	cmd.Env = append(baseEnv(), spec.Env()...)
	cmd.Env = append(cmd.Env, "HOME="+work, "HELMR_WORKSPACE="+work)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start session process: %w", err)
	}
	p := &execProcess{cmd: cmd, done: make(chan struct{})}
	pid := cmd.Process.Pid
	go func() {
		err := cmd.Wait()
		// The whole process tree goes with its leader: children it left
		// in its group are ended too.
		syscall.Kill(-pid, syscall.SIGKILL)
		logf.Close()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				err = fmt.Errorf("the session process was killed by signal %s", ws.Signal())
			} else {
				err = fmt.Errorf("the session process exited with status %d", ee.ExitCode())
			}
		}
		p.err = err
		close(p.done)
	}()
	return p, nil
}

// baseEnv is the environment a session process gets from the host: enough
// to run, nothing secret of the control plane's.
func baseEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "LANG", "TZ", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func (p *execProcess) Done() <-chan struct{} { return p.done }

// PID is the process's ID, checked against the protocol connection's peer.
func (p *execProcess) PID() int   { return p.cmd.Process.Pid }
func (p *execProcess) Err() error { return p.err }
func (p *execProcess) Kill() {
	if p.cmd.Process != nil {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		p.cmd.Process.Kill()
	}
}
