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
	"time"

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

// Parker is a Provider that can park a Restorable process: checkpoint it
// to disk and end it, so that it holds no memory and no process, then
// restore it later with its memory and its place in its code (decision
// 0024). Each parked process has a name (one per session process, its
// Session's ID) under its Computer: the images live in the Computer's
// directory, readable by the control plane alone, and go with it.
type Parker interface {
	// CheckpointOff says why this provider cannot park processes ("" when
	// it can).
	CheckpointOff() string
	// Park checkpoints the Restorable process pr, started in Computer spec,
	// under name, and ends it. On an error the process runs on as it was
	// (its network too) and no images are left.
	Park(ctx context.Context, spec Spec, name string, pr Process) (ParkStats, error)
	// Unpark restores the process parked under name in Computer spec,
	// which must exist. ps gives what the process held outside its
	// sandbox again: Stdout and Stderr (its log, an *os.File), and the
	// sources of its Binds for this restore, by mount point (they may lie
	// elsewhere than at its start: another node's files). The
	// restored process is Restorable: it can be parked again. The images
	// stay until DropParked.
	Unpark(ctx context.Context, spec Spec, name string, ps ProcessSpec) (Process, error)
	// Parked reports whether Computer id holds a parked process under
	// name.
	Parked(id, name string) bool
	// DropParked deletes the images of the process parked under name in
	// Computer id; no images is not an error.
	DropParked(id, name string) error
}

// ParkStats tells what one park cost.
type ParkStats struct {
	// Took is how long the checkpoint took, until the process was gone.
	Took time.Duration
	// Bytes is the size of its images on disk.
	Bytes int64
}
