// Package computer defines Computers as the runtime sees them: an isolated
// environment with a read-only root filesystem from a Template's image, a
// durable writable /workspace and /tmp, and resource limits, in which
// processes run. Providers implement it; local is the default (bubblewrap
// sandboxes and cgroup limits on this machine), and computertest is the
// conformance suite every provider passes.
package computer

import (
	"context"
	"io"
	"os"
	"syscall"

	"github.com/helmr-go/helmr/helmrtype"
)

// Paths inside every Computer.
const (
	// Workspace is the durable writable directory shared by the Computer's
	// processes; it is their working directory and HOME by default.
	Workspace = "/workspace"
	// Tmp is the Computer's durable scratch directory.
	Tmp = "/tmp"
)

// Image is a resolved root filesystem: a directory mounted read-only, or
// the host's system directories (Host).
type Image struct {
	Host bool
	Root string
	// Env, Workdir and User come from the image config and build steps.
	Env     []string
	Workdir string
	User    string
}

// Spec describes a Computer: its image, resources and network.
type Spec struct {
	ID        string
	Image     Image
	Resources helmrtype.ResourcesManifest
	// Network gives the Computer outbound access through a network
	// namespace of its own; without it processes have only their own
	// loopback. NetworkAllow limits it to these destinations.
	Network      bool
	NetworkAllow []helmrtype.NetworkDest
}

// Bind makes a host path visible inside the Computer at Dst.
type Bind struct {
	Src, Dst string
	Writable bool
}

// ProcessSpec is a process to run in a Computer.
type ProcessSpec struct {
	Argv []string
	// Env is added to the image's environment and the defaults (PATH, HOME).
	Env []string
	// Dir is the working directory inside; default the image's workdir or
	// /workspace.
	Dir   string
	Binds []Bind
	// Files are given to the process as descriptors 3, 4, … in order (the
	// session credential travels this way); the caller closes its copies
	// once Start returns.
	Files []*os.File
	Stdin io.Reader
	// Stdout and Stderr receive the process's output; nil discards it.
	Stdout, Stderr io.Writer
	// Restorable asks for a sandbox that CRIU can checkpoint and restore
	// (package checkpoint): the process is the sandbox's PID 1 itself, in
	// a session of its own. Such a process reaps no orphans but its own
	// children, and ignores signals from inside it has no handler for.
	Restorable bool
}

// Process is a process running in a Computer.
type Process interface {
	// PID is the host PID of the process's leader (the sandbox's outermost
	// process); the process tree is its process group.
	PID() int
	// Done is closed once the process has exited; Wait then returns at once.
	Done() <-chan struct{}
	// Wait returns the exit status: code is the exit code, or 128+signal
	// for a process killed by a signal.
	Wait() (code int, err error)
	// Signal sends sig to the whole process tree.
	Signal(sig syscall.Signal) error
}

// Provider creates Computers and runs processes in them.
type Provider interface {
	// Kind names the isolation: "bubblewrap", or "unsafe" for plain host
	// processes.
	Kind() string
	// Create makes the Computer's durable filesystem if it does not exist;
	// calling it again is harmless.
	Create(ctx context.Context, spec Spec) error
	// Start runs a process in the Computer, which must exist.
	Start(ctx context.Context, spec Spec, p ProcessSpec) (Process, error)
	// Delete removes the Computer and its files; its processes must have
	// ended.
	Delete(ctx context.Context, id string) error
}
