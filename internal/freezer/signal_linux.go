package freezer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
)

// signalFreezer stops and continues a process group with SIGSTOP and
// SIGCONT. It needs no privilege beyond signalling the group, but it is not a
// strict freeze: anything that sends SIGCONT (another process of the same
// user, a debugger) resumes the group, and a process that left the group
// with setpgid or setsid is not covered.
type signalFreezer struct{}

// NewSignal returns the fallback freezer that sends SIGSTOP and SIGCONT to
// the process group. It works on any Linux host.
func NewSignal() Freezer { return signalFreezer{} }

func (signalFreezer) Kind() string { return KindSignal }

// Attach records the group; nothing moves. The name is only checked.
func (signalFreezer) Attach(ctx context.Context, name string, pid, pgid int) (Handle, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	sid, err := checkTarget(pid, pgid)
	if err != nil {
		return nil, err
	}
	if err := syscall.Kill(-pgid, 0); err != nil {
		return nil, fmt.Errorf("freezer: process group %d: %w", pgid, err)
	}
	return &signalHandle{name: name, pgid: pgid, sid: sid}, nil
}

type signalHandle struct {
	name      string
	pgid, sid int

	mu       sync.Mutex
	frozen   bool
	released bool
}

// members lists the group's processes, refusing if the group ID now names
// processes of another session (the tree exited and the ID was reused).
func (h *signalHandle) members() ([]int, error) {
	pids, foreign, err := groupMembers(h.pgid, h.sid)
	if err != nil {
		return nil, err
	}
	if foreign {
		return nil, fmt.Errorf("freezer: process group %d now has processes outside session %d: not signalling it", h.pgid, h.sid)
	}
	return pids, nil
}

func (h *signalHandle) Freeze(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return ErrReleased
	}
	pids, err := h.members()
	if err != nil {
		return err
	}
	if len(pids) == 0 {
		return fmt.Errorf("freezer: process group %d of %s: %w", h.pgid, h.name, syscall.ESRCH)
	}
	if err := syscall.Kill(-h.pgid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("freezer: SIGSTOP process group %d: %w", h.pgid, err)
	}
	// SIGSTOP is asynchronous: wait until every thread of every member is
	// stopped (T), traced-stopped (t) or dead.
	stopped := func(s byte) bool { return s == 'T' || s == 't' || s == 'Z' || s == 'X' }
	err = poll(ctx, func() (bool, error) {
		pids, err := h.members()
		if err != nil {
			return false, err
		}
		for _, p := range pids {
			if !taskStates(p, stopped) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		if cerr := syscall.Kill(-h.pgid, syscall.SIGCONT); cerr != nil && !errors.Is(cerr, syscall.ESRCH) {
			err = errors.Join(err, cerr)
		}
		h.frozen = false
		return fmt.Errorf("freezer: freeze process group %d (continued again): %w", h.pgid, err)
	}
	h.frozen = true
	return nil
}

func (h *signalHandle) Thaw(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return ErrReleased
	}
	if err := h.cont(); err != nil {
		return err
	}
	h.frozen = false
	return nil
}

// cont sends SIGCONT to the group; a group that is gone is not an error.
func (h *signalHandle) cont() error {
	if _, err := h.members(); err != nil {
		return err
	}
	if err := syscall.Kill(-h.pgid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("freezer: SIGCONT process group %d: %w", h.pgid, err)
	}
	return nil
}

func (h *signalHandle) Frozen() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.frozen
}

// Release sends SIGCONT if the group is frozen; there is nothing to remove.
func (h *signalHandle) Release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return nil
	}
	if h.frozen {
		if err := h.cont(); err != nil {
			return err
		}
		h.frozen = false
	}
	h.released = true
	return nil
}
