// Package checkpoint parks a session process: it checkpoints the process
// tree of a restorable sandbox to disk with CRIU and ends it, and later
// restores it with its memory, its place in its code and its descriptors
// (decision 0024).
//
// A sandbox is restorable when the session process is the PID 1 of its
// sandbox and leads a session of its own there (the local provider's
// computer.ProcessSpec.Restorable: bubblewrap's --as-pid-1 and
// --new-session). Dump takes the tree rooted at that process with all its
// namespaces (user, PID, mount, IPC, UTS, network, cgroup). The sandbox's
// bind mounts are external to the checkpoint: Restore binds the same host
// paths again (or those RestoreOptions.Mounts names). Files the process
// holds open from outside the sandbox (its stdout and stderr log, the
// host's /dev/null as stdin) are external too: Restore opens them again,
// or takes them from RestoreOptions.Files.
//
// What a checkpoint cannot keep: connections to the outside. Established
// TCP connections come back closed; a connected Unix socket to a peer
// outside the sandbox makes Dump fail. A session process closes its
// protocol connection before it is parked and reconnects after.
//
// Images hold the process's memory, its secrets included: the images
// directory is made mode 0700 and every file in it 0600, readable by the
// control plane alone.
package checkpoint

import (
	"log/slog"
	"os"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

// Codes of this package's errors (helmrtype.Error), for errors.Is.
const (
	// CodeUnsupported says this host cannot checkpoint: not Linux, not
	// root, no CRIU, `criu check` fails, or checkpoints are turned off.
	CodeUnsupported helmrtype.Code = "checkpoint_unsupported"
	// CodeDumpFailed says a checkpoint could not be taken; the process
	// runs on where CRIU left it running, and the error quotes CRIU's log.
	CodeDumpFailed helmrtype.Code = "checkpoint_failed"
	// CodeRestoreFailed says a checkpoint could not be restored; the
	// error quotes CRIU's log, and the images are left as they were.
	CodeRestoreFailed helmrtype.Code = "checkpoint_restore_failed"
)

// Names of the files Dump and Restore keep in the images directory next
// to CRIU's images.
const (
	// ManifestFile is the Checkpoint, as JSON.
	ManifestFile = "helmr-checkpoint.json"
	// DumpLog and RestoreLog are CRIU's logs of the last dump and restore.
	DumpLog    = "dump.log"
	RestoreLog = "restore.log"
)

// DumpOptions are the options of a dump.
type DumpOptions struct {
	// Mounts are mount points inside the sandbox (such as /workspace)
	// whose host source Restore must be told (RestoreOptions.Mounts):
	// a Computer's disk image, mounted anew at each start, or a directory
	// that may move. The other bind mounts are found again at the same
	// host paths.
	Mounts []string
}

// RestoreOptions are the options of a restore.
type RestoreOptions struct {
	// Mounts gives the host source of each of DumpOptions.Mounts, by the
	// mount point inside.
	Mounts map[string]string
	// Files gives the process the host files it held at the dump, by
	// their host path (ExternalFile.Path). A file not given is opened
	// again at its path with its flags (a log is created when missing).
	Files map[string]*os.File
	// WorkDir is where Restore makes the restored sandbox's root (a small
	// tmpfs mount, gone once the restore is done); default the images
	// directory's parent.
	WorkDir string
	// Place puts the restored tree's processes (the root first) where they
	// belong, their cgroups, before they run again: checkpoints leave
	// cgroups out (CRIU would otherwise dump, and need at the restore,
	// every group below the tree's, the host's whole hierarchy for a
	// process in a root group). An error ends the tree. nil leaves the
	// processes in this process's cgroups.
	Place func(pids []int) error
}

// Checkpoint describes a checkpoint on disk (ManifestFile).
type Checkpoint struct {
	// PID is the host PID the tree had at the dump.
	PID int `json:"pid"`
	// Created is when the dump ended.
	Created time.Time `json:"created"`
	// Took is how long CRIU's dump ran.
	Took time.Duration `json:"took"`
	// Bytes is the size of the images on disk.
	Bytes int64 `json:"bytes"`
	// CRIU is the version of CRIU that took it.
	CRIU string `json:"criu"`
	// Files are the host files the tree held open.
	Files []ExternalFile `json:"files,omitempty"`
	// Mounts maps each of DumpOptions.Mounts to its key in the images.
	Mounts map[string]string `json:"mounts,omitempty"`
	// Root is the sandbox's root directory, which is not in the images:
	// its mount points and symbolic links.
	Root []RootEntry `json:"root"`
}

// ExternalFile is a host file the tree held open at the dump.
type ExternalFile struct {
	// Key is CRIU's name of it: file[mount id:inode], in hex.
	Key string `json:"key"`
	// Path is its host path when the dump was taken.
	Path string `json:"path"`
	// Flags are its open flags (O_WRONLY|O_APPEND, …).
	Flags int `json:"flags"`
	// Offset is its position, for a file not opened to append.
	Offset int64 `json:"offset,omitempty"`
}

// RootEntry is one entry of a sandbox's root: "d" a directory, "f" a
// file (a mount point of a file), "l" a symbolic link to Target.
type RootEntry struct {
	Path   string `json:"path"`
	Type   string `json:"type"`
	Mode   uint32 `json:"mode"`
	Target string `json:"target,omitempty"`
}

// CRIU is a CRIU binary that passed `criu check` on this host (Probe).
type CRIU struct {
	// Path is the binary.
	Path string
	// Version is what `criu --version` says, such as "4.2".
	Version string
	log     *slog.Logger
}

// Restored is a restored tree's root process, a child of the process
// that called Restore, in a process group of its own.
type Restored struct {
	// PID is its host PID.
	PID int
	// Took is how long CRIU's restore ran, until the process ran again.
	Took time.Duration
	proc *os.Process
}

// Wait waits for the restored process to exit and returns its state.
func (r *Restored) Wait() (*os.ProcessState, error) { return r.proc.Wait() }
