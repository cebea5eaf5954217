// Package freezer freezes and thaws a session's process tree so that it uses
// no CPU while a durable wait is suspended, and thaws it when the wait ends.
//
// Three mechanisms exist: the cgroup v2 freezer (cgroup.freeze), the cgroup
// v1 freezer controller (freezer.state), and a fallback that sends SIGSTOP and
// SIGCONT to the tree's process group. [New] picks the best one the host
// allows; docs/freezer.md explains the choice and the limits of each.
//
// The control plane calls [Freezer.Attach] right after it starts a session
// process, before that process runs user code, then [Handle.Freeze] and
// [Handle.Thaw] around each suspension, and [Handle.Release] once the process
// has exited. A frozen tree must be thawed before it is killed: Release does
// that, and callers that kill a frozen tree themselves must Thaw first.
package freezer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Kind names returned by [Freezer.Kind].
const (
	// KindCgroupV2 is the cgroup v2 freezer (cgroup.freeze).
	KindCgroupV2 = "cgroup-v2"
	// KindCgroupV1 is the cgroup v1 freezer controller (freezer.state).
	KindCgroupV1 = "cgroup-v1"
	// KindSignal is the fallback: SIGSTOP and SIGCONT to the process group.
	KindSignal = "signal"
)

var (
	// ErrNotEmpty is returned by Release when live processes are still in
	// the cgroup; the cgroup is left in place, thawed, for the caller to kill
	// them and call Release again.
	ErrNotEmpty = errors.New("freezer: processes remain in the cgroup")
	// ErrReleased is returned by Freeze and Thaw after Release.
	ErrReleased = errors.New("freezer: handle released")
)

// Freezer freezes and thaws process trees.
type Freezer interface {
	// Attach places the process tree rooted at pid (its process group pgid)
	// under the freezer's control, under a name unique per process (the
	// supervisor uses its launch ID). Call right after the process starts, before it runs user
	// code; children forked later are covered (for cgroup mechanisms because
	// children inherit the cgroup, for the signal fallback because they
	// inherit the process group). pid must lead or belong to process group
	// pgid, which must not be the caller's own group.
	Attach(ctx context.Context, name string, pid, pgid int) (Handle, error)
	// Kind is "cgroup-v1", "cgroup-v2" or "signal".
	Kind() string
}

// Handle controls one attached process tree. Its methods are safe for
// concurrent use.
type Handle interface {
	// Freeze returns once every task of the tree is frozen: the cgroup
	// mechanisms poll the cgroup until the kernel reports it frozen, the
	// signal fallback sends SIGSTOP to the group and waits until every
	// thread of every member is stopped. The wait is bounded by ctx; if ctx
	// ends first, Freeze thaws again and returns an error.
	Freeze(ctx context.Context) error
	// Thaw lets the tree run again (SIGCONT to the group for the signal
	// fallback). Thawing a tree that is not frozen is harmless.
	Thaw(ctx context.Context) error
	// Frozen reports whether the last successful Freeze has not been
	// followed by a Thaw or Release.
	Frozen() bool
	// Release thaws the tree if needed and removes its cgroup; call it after
	// the process has exited. If live processes remain in the cgroup it
	// leaves them there, thawed, and returns an error wrapping ErrNotEmpty;
	// it neither kills nor moves them (moving them out would silently take
	// them out of the freezer's control). Release is idempotent.
	Release() error
}

// validName reports whether name is usable as one cgroup directory name.
func validName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 255 ||
		strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("freezer: invalid name %q: want one path element", name)
	}
	return nil
}

// validRoot reports whether root is a usable relative cgroup path.
func validRoot(root string) error {
	if root == "" || !filepath.IsLocal(root) || filepath.Clean(root) == "." ||
		strings.ContainsRune(root, 0) {
		return fmt.Errorf("freezer: invalid root %q: want a relative cgroup path", root)
	}
	return nil
}

// poll calls done until it reports true or fails, or ctx ends, backing off
// from 1 ms to 20 ms between calls.
func poll(ctx context.Context, done func() (bool, error)) error {
	delay := time.Millisecond
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if delay < 20*time.Millisecond {
			delay *= 2
		}
	}
}
