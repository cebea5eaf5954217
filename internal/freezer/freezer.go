// Package freezer freezes and thaws session process trees, so that a
// Session whose Turn waits uses no CPU while its wait is suspended.
//
// Two mechanisms: the cgroup v1 freezer (every task of the process's
// cgroup, including children forked later, stops at once and cannot resume
// itself), and, where no writable freezer hierarchy exists, SIGSTOP and
// SIGCONT to the process group (children that left the group, or a
// process that another process sends SIGCONT, are not held). See
// docs/waits.md.
package freezer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Freezer places process trees under its control.
type Freezer interface {
	// Attach puts the process pid (leader of process group pgid) under the
	// freezer, named name (unique per process, such as the Session ID).
	// Call it before the process starts children.
	Attach(ctx context.Context, name string, pid, pgid int) (Handle, error)
	// Kind is "cgroup-v1" or "signal".
	Kind() string
}

// Handle freezes and thaws one attached process tree.
type Handle interface {
	// Freeze returns once every task of the tree is stopped.
	Freeze(ctx context.Context) error
	// Thaw lets the tree run again; thawing a running tree does nothing.
	Thaw(ctx context.Context) error
	// Frozen reports whether the tree was frozen by Freeze and not thawed.
	Frozen() bool
	// Release thaws the tree and lets go of it (its cgroup is removed once
	// it has no tasks). It is safe to call more than once.
	Release() error
}

// New returns the best mechanism the host allows: the cgroup v1 freezer
// under /sys/fs/cgroup/freezer/<root> when it is writable, else signals.
func New(log *slog.Logger, root string) Freezer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f, err := NewCgroupV1("/sys/fs/cgroup/freezer", root)
	if err == nil {
		log.Info("session processes are suspended with the cgroup v1 freezer", "cgroup", f.dir)
		return f
	}
	log.Warn("no writable cgroup freezer; suspended session processes are stopped with SIGSTOP instead", "why", err)
	return NewSignal()
}

// CgroupV1 freezes with the cgroup v1 freezer controller.
type CgroupV1 struct {
	dir string
}

// NewCgroupV1 creates (or reuses) the directory root under the freezer
// hierarchy mounted at mount, and checks that it is writable.
func NewCgroupV1(mount, root string) (*CgroupV1, error) {
	if _, err := os.Stat(filepath.Join(mount, "freezer.state")); err != nil && !fileExists(filepath.Join(mount, "cgroup.procs")) {
		return nil, fmt.Errorf("no cgroup v1 freezer at %s", mount)
	}
	dir := filepath.Join(mount, root)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if !fileExists(filepath.Join(dir, "freezer.state")) {
		return nil, fmt.Errorf("%s is not a freezer cgroup", dir)
	}
	return &CgroupV1{dir: dir}, nil
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// Kind is "cgroup-v1".
func (f *CgroupV1) Kind() string { return "cgroup-v1" }

// Attach creates the cgroup name and moves pid into it.
func (f *CgroupV1) Attach(ctx context.Context, name string, pid, pgid int) (Handle, error) {
	if name == "" || strings.ContainsAny(name, "/.") && name != filepath.Base(name) {
		return nil, fmt.Errorf("freezer: bad name %q", name)
	}
	dir := filepath.Join(f.dir, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		return nil, fmt.Errorf("freezer: move %d into %s: %w", pid, dir, err)
	}
	return &cgroupHandle{dir: dir, parent: f.dir}, nil
}

type cgroupHandle struct {
	dir, parent string
	mu          sync.Mutex
	frozen      bool
	released    bool
}

func (h *cgroupHandle) setState(ctx context.Context, want string) error {
	p := filepath.Join(h.dir, "freezer.state")
	if err := os.WriteFile(p, []byte(want), 0); err != nil {
		return err
	}
	for {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(b)) == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("freezer: %s did not become %s: %w", h.dir, want, ctx.Err())
		case <-time.After(time.Millisecond):
		}
		if want == "FROZEN" {
			// A task that was busy in the kernel: ask again.
			os.WriteFile(p, []byte(want), 0)
		}
	}
}

func (h *cgroupHandle) Freeze(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return errors.New("freezer: released")
	}
	if err := h.setState(ctx, "FROZEN"); err != nil {
		h.setState(context.WithoutCancel(ctx), "THAWED")
		return err
	}
	h.frozen = true
	return nil
}

func (h *cgroupHandle) Thaw(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return nil
	}
	h.frozen = false
	return h.setState(ctx, "THAWED")
}

func (h *cgroupHandle) Frozen() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.frozen
}

// Release thaws the cgroup, moves any task left to the parent and removes it.
func (h *cgroupHandle) Release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return nil
	}
	h.released, h.frozen = true, false
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h.setState(ctx, "THAWED")
	if b, err := os.ReadFile(filepath.Join(h.dir, "cgroup.procs")); err == nil {
		for _, pid := range strings.Fields(string(b)) {
			os.WriteFile(filepath.Join(h.parent, "cgroup.procs"), []byte(pid), 0)
		}
	}
	var err error
	for range 50 {
		if err = syscall.Rmdir(h.dir); err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		time.Sleep(2 * time.Millisecond)
	}
	return err
}

// Signal freezes with SIGSTOP and SIGCONT to the process group.
type Signal struct{}

// NewSignal returns the signal mechanism.
func NewSignal() *Signal { return &Signal{} }

// Kind is "signal".
func (Signal) Kind() string { return "signal" }

// Attach remembers the process group.
func (Signal) Attach(ctx context.Context, name string, pid, pgid int) (Handle, error) {
	return &signalHandle{pgid: pgid}, nil
}

type signalHandle struct {
	pgid   int
	mu     sync.Mutex
	frozen bool
}

func (h *signalHandle) Freeze(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := syscall.Kill(-h.pgid, syscall.SIGSTOP); err != nil {
		return err
	}
	h.frozen = true
	return nil
}

func (h *signalHandle) Thaw(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.frozen = false
	if err := syscall.Kill(-h.pgid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

func (h *signalHandle) Frozen() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.frozen
}

func (h *signalHandle) Release() error { return h.Thaw(context.Background()) }
