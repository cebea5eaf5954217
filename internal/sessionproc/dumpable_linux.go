//go:build linux

package sessionproc

import "golang.org/x/sys/unix"

// hideMemory makes this process non-dumpable, so that the processes agent
// code starts (which run as the same user, in the same sandbox) cannot read
// the session credential out of its memory through /proc/PID/mem or
// ptrace, nor open its descriptors through /proc/PID/fd. A program they
// exec is dumpable again; this process stays hidden.
func hideMemory() error { return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }

// showMemory makes this process dumpable while it is parked: CRIU cannot
// checkpoint a restored process that is not. hideMemory follows once it
// has reconnected.
func showMemory() error { return unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0) }
