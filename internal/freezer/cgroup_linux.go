package freezer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	cgroupMagic  = 0x27e0eb   // CGROUP_SUPER_MAGIC (cgroup v1)
	cgroup2Magic = 0x63677270 // CGROUP2_SUPER_MAGIC
)

// cgroupFreezer is the cgroup v1 or v2 freezer: one cgroup per attached tree
// under base.
type cgroupFreezer struct {
	v2   bool
	base string // <hierarchy>/<root>
	// nest (cgroup v2) are directories whose descendant groups keep their
	// processes: see NestUnder.
	nest []string
}

// Cleanup removes a cgroup freezer's parent group when no attached tree is
// left in it (call it when the control plane stops); other freezers and a
// group in use are left alone.
func Cleanup(f Freezer) {
	if cf, ok := f.(*cgroupFreezer); ok {
		syscall.Rmdir(cf.base)
	}
}

// NestUnder makes a cgroup v2 freezer leave a process in its group when
// that group lies under one of dirs (cgroup v2 directories in the same
// hierarchy, such as the groups that hold Computers' resource limits): the
// freezer's group for it is made a child of that group, so the limits still
// apply (a process belongs to one cgroup v2 group, and moving it elsewhere
// would escape them), and freezing freezes only that child. Other freezers
// are unchanged.
func NestUnder(f Freezer, dirs ...string) {
	if cf, ok := f.(*cgroupFreezer); ok && cf.v2 {
		for _, d := range dirs {
			cf.nest = append(cf.nest, filepath.Clean(d))
		}
	}
}

// groupDir returns the directory of the freezer's group named name for
// pid: under the process's own group when NestUnder covers it, else under
// base.
func (f *cgroupFreezer) groupDir(name string, pid int) string {
	if len(f.nest) > 0 {
		if cur, err := v2GroupOf(pid); err == nil {
			for _, d := range f.nest {
				if !strings.HasPrefix(cur, d+"/") {
					continue
				}
				if filepath.Base(cur) == name && filepath.Dir(cur) != d {
					return cur // already in it (adopted after a restart)
				}
				return filepath.Join(cur, name)
			}
		}
	}
	return filepath.Join(f.base, name)
}

// v2GroupOf returns the directory of pid's cgroup v2 group: its path in
// /proc/PID/cgroup under the cgroup2 mount that shows it.
func v2GroupOf(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	rel := ""
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			rel = p
		}
	}
	if !strings.HasPrefix(rel, "/") || strings.Contains(rel, "/..") {
		return "", fmt.Errorf("no cgroup v2 group for process %d in its /proc/%d/cgroup", pid, pid)
	}
	ms, err := mounts()
	if err != nil {
		return "", err
	}
	for _, m := range ms {
		if m.fstype == "cgroup2" {
			if r, ok := strings.CutPrefix(rel, m.root); ok {
				return filepath.Join(m.point, r), nil
			}
		}
	}
	return "", fmt.Errorf("no cgroup2 hierarchy mounted that holds %s", rel)
}

// NewCgroupV1 returns the cgroup v1 freezer for the freezer hierarchy
// mounted at mount (usually /sys/fs/cgroup/freezer). It creates the cgroup
// <mount>/<root> and fails if the hierarchy is missing or not writable.
func NewCgroupV1(mount, root string) (Freezer, error) {
	if err := validRoot(root); err != nil {
		return nil, err
	}
	mount = filepath.Clean(mount)
	if err := checkFS(mount, cgroupMagic); err != nil {
		return nil, err
	}
	ms, err := mounts()
	if err != nil {
		return nil, err
	}
	isFreezer := false
	for _, m := range ms {
		if m.point == mount && m.fstype == "cgroup" {
			for _, o := range m.superOpts {
				isFreezer = isFreezer || o == "freezer"
			}
		}
	}
	if !isFreezer {
		return nil, fmt.Errorf("freezer: %s is not a cgroup v1 freezer hierarchy", mount)
	}
	return newCgroup(false, mount, root, "freezer.state")
}

// NewCgroupV2 returns the cgroup v2 freezer for cgroups created under parent,
// a directory of a cgroup2 hierarchy that the caller may write (its own
// delegated group; New finds it). It creates the cgroup <parent>/<root> and
// fails if parent is not cgroup2, not writable or has no cgroup.freeze.
func NewCgroupV2(parent, root string) (Freezer, error) {
	if err := validRoot(root); err != nil {
		return nil, err
	}
	parent = filepath.Clean(parent)
	if err := checkFS(parent, cgroup2Magic); err != nil {
		return nil, err
	}
	return newCgroup(true, parent, root, "cgroup.freeze")
}

func checkFS(dir string, magic int64) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return fmt.Errorf("freezer: %s: %w", dir, err)
	}
	if int64(st.Type) != magic {
		return fmt.Errorf("freezer: %s is not a cgroup%s hierarchy (fs type %#x)",
			dir, map[bool]string{true: "2", false: " v1"}[magic == cgroup2Magic], st.Type)
	}
	return nil
}

// newCgroup creates base and checks that it has the freezer's interface file
// and that the caller can write it and cgroup.procs.
func newCgroup(v2 bool, dir, root, stateFile string) (Freezer, error) {
	base := filepath.Join(dir, root)
	_, statErr := os.Stat(base)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, fmt.Errorf("freezer: create %s: %w", base, err)
	}
	err := writable(filepath.Join(base, stateFile))
	if err == nil {
		err = writable(filepath.Join(base, "cgroup.procs"))
	}
	if err != nil {
		if statErr != nil {
			os.Remove(base) // best effort: it was created just now
		}
		return nil, fmt.Errorf("freezer: %s unusable: %w", base, err)
	}
	return &cgroupFreezer{v2: v2, base: base}, nil
}

func (f *cgroupFreezer) Kind() string {
	if f.v2 {
		return KindCgroupV2
	}
	return KindCgroupV1
}

// Attach creates <base>/<name> (or a child named name of the process's
// own group, see NestUnder) and moves pid into it, then every other
// process already in pgid (children that pid forked before Attach), until
// none is left outside. Later children are born in the cgroup. A process
// that left the group with setpgid or setsid before Attach is not covered, so
// Attach must run before the process runs user code.
func (f *cgroupFreezer) Attach(ctx context.Context, name string, pid, pgid int) (Handle, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	_, err := checkTarget(pid, pgid)
	if err != nil {
		return nil, err
	}
	h := &cgroupHandle{v2: f.v2, dir: f.groupDir(name, pid)}
	created := true
	if err := os.Mkdir(h.dir, 0o755); errors.Is(err, fs.ErrExist) {
		// Left over from a control plane that stopped without Release:
		// reuse it if nothing lives in it, or if it holds the process
		// being attached (a restarted control plane adopting it).
		created = false
		pids, err := readPids(h.procs())
		if err != nil {
			return nil, fmt.Errorf("freezer: %s exists and is not a cgroup: %w", h.dir, err)
		}
		if len(pids) > 0 && !slices.Contains(pids, pid) {
			return nil, fmt.Errorf("freezer: %s exists with processes %v: name not unique", h.dir, pids)
		}
		if err := h.writeState(false); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("freezer: create %s: %w", h.dir, err)
	}
	if err := MoveGroup(ctx, h.procs(), pid, pgid); err != nil {
		if created {
			os.Remove(h.dir)
		}
		return nil, fmt.Errorf("freezer: move process %d into %s: %w", pid, h.dir, err)
	}
	return h, nil
}

// cgroupHandle is one attached tree's cgroup.
type cgroupHandle struct {
	v2  bool
	dir string

	mu       sync.Mutex
	frozen   bool
	released bool
}

func (h *cgroupHandle) procs() string { return filepath.Join(h.dir, "cgroup.procs") }

// writeState asks the kernel to freeze or thaw the cgroup.
func (h *cgroupHandle) writeState(freeze bool) error {
	var file, val string
	switch {
	case h.v2 && freeze:
		file, val = "cgroup.freeze", "1"
	case h.v2:
		file, val = "cgroup.freeze", "0"
	case freeze:
		file, val = "freezer.state", "FROZEN"
	default:
		file, val = "freezer.state", "THAWED"
	}
	if err := writeFile(filepath.Join(h.dir, file), val); err != nil {
		return fmt.Errorf("freezer: write %s to %s: %w", val, filepath.Join(h.dir, file), err)
	}
	return nil
}

// isFrozen reports whether the kernel has finished freezing every task.
func (h *cgroupHandle) isFrozen() (bool, error) {
	if h.v2 {
		b, err := os.ReadFile(filepath.Join(h.dir, "cgroup.events"))
		if err != nil {
			return false, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "frozen "); ok {
				return strings.TrimSpace(v) == "1", nil
			}
		}
		return false, fmt.Errorf("freezer: no frozen line in %s/cgroup.events", h.dir)
	}
	// v1 reads FREEZING until every task is frozen.
	b, err := os.ReadFile(filepath.Join(h.dir, "freezer.state"))
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(string(b)) == "FROZEN", nil
}

func (h *cgroupHandle) Freeze(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return ErrReleased
	}
	if err := h.writeState(true); err != nil {
		return err
	}
	if err := poll(ctx, h.isFrozen); err != nil {
		if terr := h.writeState(false); terr != nil {
			return errors.Join(fmt.Errorf("freezer: freeze %s: %w", h.dir, err), terr)
		}
		h.frozen = false
		return fmt.Errorf("freezer: freeze %s (thawed again): %w", h.dir, err)
	}
	h.frozen = true
	return nil
}

func (h *cgroupHandle) Thaw(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return ErrReleased
	}
	if err := h.writeState(false); err != nil {
		return err
	}
	h.frozen = false
	return nil
}

func (h *cgroupHandle) Frozen() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.frozen
}

// Release thaws unconditionally (a Freeze that timed out or another writer
// may have left the cgroup freezing), waits up to half a second for tasks
// killed while frozen to exit, then removes the cgroup.
func (h *cgroupHandle) Release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return nil
	}
	if err := h.writeState(false); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			h.released, h.frozen = true, false // removed by someone else
			return nil
		}
		return err
	}
	h.frozen = false
	var pids []int
	deadline := time.Now().Add(500 * time.Millisecond)
	for {
		var err error
		pids, err = readPids(h.procs())
		if err != nil {
			return fmt.Errorf("freezer: release %s: %w", h.dir, err)
		}
		if len(pids) == 0 {
			err = syscall.Rmdir(h.dir)
			if err == nil || errors.Is(err, fs.ErrNotExist) {
				h.released = true
				return nil
			}
			if !errors.Is(err, syscall.EBUSY) {
				return fmt.Errorf("freezer: remove %s: %w", h.dir, err)
			}
			// EBUSY: a task is still leaving; retry.
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(pids) == 0 {
		return fmt.Errorf("freezer: remove %s: %w", h.dir, syscall.EBUSY)
	}
	return fmt.Errorf("%w: %s holds %v (thawed; kill them and Release again)", ErrNotEmpty, h.dir, pids)
}

// OwnV2Group returns the directory of this process's own cgroup v2 group
// (from /proc/self/cgroup and the cgroup2 mount that shows it).
func OwnV2Group() (string, error) { return v2GroupOf(os.Getpid()) }
