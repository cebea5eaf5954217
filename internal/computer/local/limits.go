//go:build linux

package local

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/freezer"
	"golang.org/x/sys/unix"
)

// Resource limits. Each Computer gets a cgroup per controller — memory,
// cpu and pids — named <CgroupName>/<computer id>, shared by all its
// processes:
//   - cgroup v1: memory.limit_in_bytes (and memory.memsw.limit_in_bytes
//     when swap accounting exists) and cpu.cfs_quota_us over a 100 ms
//     period, in the memory and cpu hierarchies, and pids.max in the pids
//     hierarchy;
//   - cgroup v2: memory.max, memory.swap.max, cpu.max and pids.max in one
//     group under the unified hierarchy's root.
// A new sandbox is moved in before it runs its command (it waits on its
// block descriptor meanwhile): its leader first, then every member of its
// process group. Every Computer has a process limit (Resources.Processes,
// default 1,024): the sandbox user is host root mapped, so RLIMIT_NPROC
// would bind nothing.

const cpuPeriod = 100000 // µs

type limiter struct {
	log *slog.Logger
	// dirs are the parent directories (one per controller hierarchy) to
	// create the Computers' cgroups in; empty when no limits are possible.
	mem, cpu, pids string
	v2             bool
	why            string

	// spares are empty pids cgroups made ahead (cgroup v1) with the
	// default limit, renamed to a new Computer's: making a cgroup costs
	// milliseconds on a new Computer's first start, renaming one almost
	// nothing.
	spareMu   sync.Mutex
	spares    []string
	refilling bool
	closed    bool
	refills   sync.WaitGroup
}

// spareGroups is how many spare pids cgroups are kept ready.
const spareGroups = 2

func newLimiter(name string, log *slog.Logger) *limiter {
	l := &limiter{log: log}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		base := filepath.Join("/sys/fs/cgroup", name)
		if err := enableV2(base); err != nil {
			l.why = "cgroup v2: " + err.Error()
		} else {
			l.mem, l.cpu, l.pids, l.v2 = base, base, base, true
		}
	} else {
		mounts := v1Mounts()
		for _, c := range []struct {
			ctrl string
			dst  *string
		}{{"memory", &l.mem}, {"cpu", &l.cpu}, {"pids", &l.pids}} {
			m, ok := mounts[c.ctrl]
			if !ok {
				l.why += "no cgroup v1 " + c.ctrl + " hierarchy; "
				continue
			}
			d := filepath.Join(m, name)
			if err := os.MkdirAll(d, 0o755); err != nil {
				l.why += err.Error() + "; "
				continue
			}
			// The group may exist already, made by root (an earlier
			// run): this user must be able to make the Computers'
			// groups in it.
			if err := syscall.Access(d, 2|1); err != nil { // W_OK|X_OK
				l.why += fmt.Sprintf("%s is not writable by this user: %v; ", d, err)
				continue
			}
			*c.dst = d
		}
	}
	if l.mem == "" || l.cpu == "" || l.pids == "" {
		// As an ordinary user: a cgroup v2 subtree delegated to this
		// process (systemd's Delegate=yes) holds the limits instead.
		base, err := delegatedV2(name)
		if err == nil {
			l.mem, l.cpu, l.pids, l.v2 = base, base, base, true
			l.why = ""
			log.Info("computers: resource limits enforced with cgroups", "kind", l.kind(), "delegated", base)
			return l
		}
		l.why = strings.TrimSuffix(l.why, "; ") + "; delegated cgroup v2: " + err.Error()
		log.Warn("computers: resource limits are not enforced", "reason", l.why)
	} else {
		log.Info("computers: resource limits enforced with cgroups", "kind", l.kind())
	}
	return l
}

// enableV2 creates base under the unified hierarchy with the memory, cpu
// and pids controllers available to its children.
func enableV2(base string) error {
	if err := os.MkdirAll(base, 0o755); err != nil {
		return err
	}
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte("+memory +cpu +pids"), 0); err != nil {
			return fmt.Errorf("enable memory and cpu in %s: %w", d, err)
		}
	}
	return nil
}

// delegatedV2 makes base <own>/<name> in this process's own cgroup v2
// group when that group is delegated to this user (writable, with the
// memory, cpu and pids controllers available): this process moves into a
// leaf <own>/<name>.control first (a group that hands controllers to its
// children may hold no process), then base gets the controllers for the
// Computers' groups.
func delegatedV2(name string) (string, error) {
	own, err := freezer.OwnV2Group()
	if err != nil {
		return "", err
	}
	for _, f := range []string{own, filepath.Join(own, "cgroup.procs"), filepath.Join(own, "cgroup.subtree_control")} {
		if err := unix.Access(f, unix.W_OK); err != nil {
			return "", fmt.Errorf("%s is not writable by this user (no delegated cgroup: run under systemd with Delegate=yes, e.g. systemd-run --user -p Delegate=yes --scope, or as root): %w", f, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(own, "cgroup.controllers"))
	if err != nil {
		return "", err
	}
	have := strings.Fields(string(b))
	for _, c := range []string{"memory", "cpu", "pids"} {
		if !slices.Contains(have, c) {
			return "", fmt.Errorf("%s lacks the %s controller (it has %q)", own, c, have)
		}
	}
	sub, _ := os.ReadFile(filepath.Join(own, "cgroup.subtree_control"))
	if !strings.Contains(string(sub), "memory") || !strings.Contains(string(sub), "cpu") || !strings.Contains(string(sub), "pids") {
		leaf := filepath.Join(own, name+".control")
		if err := os.MkdirAll(leaf, 0o755); err != nil {
			return "", err
		}
		// Every process of the group moves (it must be empty to hand
		// out controllers); a Delegate=yes unit holds only its own.
		pids, err := os.ReadFile(filepath.Join(own, "cgroup.procs"))
		if err != nil {
			return "", err
		}
		for _, pid := range strings.Fields(string(pids)) {
			if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(pid), 0); err != nil && !errors.Is(err, syscall.ESRCH) {
				return "", fmt.Errorf("move process %s into %s: %w", pid, leaf, err)
			}
		}
	}
	base := filepath.Join(own, name)
	if err := enableV2(base); err != nil {
		return "", err
	}
	return base, nil
}

// v1Mounts maps each cgroup v1 controller to its hierarchy's mount point.
func v1Mounts() map[string]string {
	out := map[string]string{}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// … mountpoint … - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, pf := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(pf) < 3 || pf[0] != "cgroup" {
			continue
		}
		for _, opt := range strings.Split(pf[2], ",") {
			if opt == "memory" || opt == "cpu" || opt == "pids" {
				if _, seen := out[opt]; !seen {
					out[opt] = fields[4]
				}
			}
		}
	}
	return out
}

func (l *limiter) kind() string {
	switch {
	case l.mem == "" || l.cpu == "" || l.pids == "":
		return ""
	case l.v2:
		return "cgroup-v2"
	}
	return "cgroup-v1"
}

// apply puts the process tree led by pid (its process group) into the
// Computer's cgroups, creating them with the Template's limits. Every
// Computer has a process limit; the memory and cpu hierarchies (cgroup
// v1) are joined only where they limit something: membership there slows
// every process in it (about 20% of a Turn's server round trip in the
// benchmark).
func (l *limiter) apply(id string, r helmrtype.ResourcesManifest, pid int) error {
	if l.kind() == "" {
		return nil
	}
	mem, err := l.ensure(id, r)
	if err != nil {
		return err
	}
	dirs := []string{filepath.Join(l.pids, id)}
	if !l.v2 && mem > 0 {
		dirs = append(dirs, filepath.Join(l.mem, id))
	}
	if !l.v2 && r.CPU > 0 {
		dirs = append(dirs, filepath.Join(l.cpu, id))
	}
	for _, d := range dirs {
		if err := freezer.MoveGroup(context.Background(), filepath.Join(d, "cgroup.procs"), pid, pid); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("move %d into %s: %w", pid, d, err)
		}
	}
	return nil
}

// ensure creates the Computer's cgroups with r's limits, or writes the
// limits again into those that exist, and returns the memory limit in
// bytes (0: none). A parked Computer's groups may have gone meanwhile
// (Cleanup at a control plane's stop): CRIU puts a restored process back
// into the groups it had, which must hold their limits.
func (l *limiter) ensure(id string, r helmrtype.ResourcesManifest) (int64, error) {
	if l.kind() == "" {
		return 0, nil
	}
	var mem int64
	if r.Memory != "" {
		var err error
		if mem, err = helmrtype.ParseMemory(r.Memory); err != nil {
			return 0, err
		}
	}
	if l.v2 && !fileExists(filepath.Join(l.mem, "cgroup.subtree_control")) {
		// The parent group went too (Cleanup removes it when empty).
		if err := enableV2(l.mem); err != nil {
			return 0, err
		}
	}
	return mem, l.setLimits(id, mem, r.CPU, r.ProcessLimit())
}

// setLimits creates the Computer's cgroups that limit something (on
// cgroup v1: pids always, memory and cpu when set; on v2 the one group)
// and writes their limits.
func (l *limiter) setLimits(id string, mem int64, cpu float64, procs int) error {
	write := func(file, v string) error {
		if err := os.WriteFile(file, []byte(v), 0); err != nil {
			return fmt.Errorf("write %s: %w", file, err)
		}
		return nil
	}
	mkdir := func(base string) (string, error) {
		d := filepath.Join(base, id)
		return d, os.MkdirAll(d, 0o755)
	}
	quota := "max"
	if cpu > 0 {
		quota = strconv.FormatInt(max(int64(cpu*cpuPeriod), 1000), 10)
	}
	if l.v2 {
		d, err := mkdir(l.mem)
		if err != nil {
			return err
		}
		m := "max"
		if mem > 0 {
			m = strconv.FormatInt(mem, 10)
		}
		if err := write(filepath.Join(d, "memory.max"), m); err != nil {
			return err
		}
		if mem > 0 {
			// Swap would let a hog outlive its limit; absent without swap.
			os.WriteFile(filepath.Join(d, "memory.swap.max"), []byte("0"), 0)
		}
		if err := write(filepath.Join(d, "pids.max"), strconv.Itoa(procs)); err != nil {
			return err
		}
		return write(filepath.Join(d, "cpu.max"), quota+" "+strconv.Itoa(cpuPeriod))
	}
	pd, set, err := l.pidsGroup(id, procs)
	if err != nil {
		return err
	}
	if !set {
		if err := write(filepath.Join(pd, "pids.max"), strconv.Itoa(procs)); err != nil {
			return err
		}
	}
	if mem > 0 {
		md, err := mkdir(l.mem)
		if err != nil {
			return err
		}
		m := strconv.FormatInt(mem, 10)
		// memsw must stay ≥ the memory limit: the memory limit first.
		if err := write(filepath.Join(md, "memory.limit_in_bytes"), m); err != nil {
			return err
		}
		if memsw := filepath.Join(md, "memory.memsw.limit_in_bytes"); fileExists(memsw) {
			if err := write(memsw, m); err != nil {
				return err
			}
		}
	}
	if cpu > 0 {
		cd, err := mkdir(l.cpu)
		if err != nil {
			return err
		}
		if err := write(filepath.Join(cd, "cpu.cfs_period_us"), strconv.Itoa(cpuPeriod)); err != nil {
			return err
		}
		return write(filepath.Join(cd, "cpu.cfs_quota_us"), quota)
	}
	return nil
}

// pidsGroup returns the Computer's pids cgroup (cgroup v1), made from a
// spare when it does not exist yet; set reports that its pids.max is
// procs already (a group made earlier for this Computer, or a spare,
// made with the default limit).
func (l *limiter) pidsGroup(id string, procs int) (dir string, set bool, err error) {
	d := filepath.Join(l.pids, id)
	if fileExists(d) {
		return d, true, nil
	}
	l.spareMu.Lock()
	var spare string
	if n := len(l.spares); n > 0 {
		spare, l.spares = l.spares[n-1], l.spares[:n-1]
	}
	l.spareMu.Unlock()
	l.refill()
	if spare != "" && os.Rename(spare, d) == nil {
		return d, procs == helmrtype.DefaultProcesses, nil
	}
	return d, false, os.MkdirAll(d, 0o755)
}

// refill makes spare pids cgroups aside until there are spareGroups.
func (l *limiter) refill() {
	l.spareMu.Lock()
	defer l.spareMu.Unlock()
	if l.refilling || l.closed || len(l.spares) >= spareGroups {
		return
	}
	l.refilling = true
	l.refills.Add(1)
	go func() {
		defer l.refills.Done()
		for {
			l.spareMu.Lock()
			if l.closed || len(l.spares) >= spareGroups {
				l.refilling = false
				l.spareMu.Unlock()
				return
			}
			l.spareMu.Unlock()
			var b [6]byte
			rand.Read(b[:])
			d := filepath.Join(l.pids, ".spare-"+hex.EncodeToString(b[:]))
			err := os.Mkdir(d, 0o755)
			if err == nil {
				if err = os.WriteFile(filepath.Join(d, "pids.max"), []byte(strconv.Itoa(helmrtype.DefaultProcesses)), 0); err != nil {
					syscall.Rmdir(d)
				}
			}
			l.spareMu.Lock()
			if err != nil {
				l.refilling = false
				l.spareMu.Unlock()
				return
			}
			l.spares = append(l.spares, d)
			l.spareMu.Unlock()
		}
	}()
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// cleanup removes the cgroups of Computers that have no process, and the
// parent groups when nothing is left in them (a stopping control plane;
// groups in use stay).
func (l *limiter) cleanup() {
	l.spareMu.Lock()
	l.closed = true
	l.spares = nil
	l.spareMu.Unlock()
	l.refills.Wait() // the spares are empty groups: removed below
	for _, base := range []string{l.mem, l.cpu, l.pids} {
		if base == "" {
			continue
		}
		entries, _ := os.ReadDir(base)
		for _, e := range entries {
			if e.IsDir() {
				syscall.Rmdir(filepath.Join(base, e.Name()))
			}
		}
		syscall.Rmdir(base)
	}
}

// remove deletes a Computer's cgroups (they must be empty).
func (l *limiter) remove(id string) {
	if l.kind() == "" {
		return
	}
	syscall.Rmdir(filepath.Join(l.mem, id))
	if !l.v2 {
		syscall.Rmdir(filepath.Join(l.cpu, id))
		syscall.Rmdir(filepath.Join(l.pids, id))
	}
}
