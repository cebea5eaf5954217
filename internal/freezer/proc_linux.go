package freezer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// procStat is the part of /proc/<pid>/stat this package reads.
type procStat struct {
	state   byte
	pgrp    int
	session int
	utime   uint64 // clock ticks
	stime   uint64 // clock ticks
}

// readStat parses a /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat file.
func readStat(path string) (procStat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return procStat{}, err
	}
	// The command name (field 2) is in parentheses and may hold anything,
	// so the fields are counted from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("freezer: malformed %s", path)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 13 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("freezer: malformed %s", path)
	}
	var st procStat
	st.state = f[0][0]
	ints := []*int{&st.pgrp, &st.session}
	for k, p := range ints {
		v, err := strconv.Atoi(f[2+k]) // fields 5 and 6
		if err != nil {
			return procStat{}, fmt.Errorf("freezer: malformed %s: %w", path, err)
		}
		*p = v
	}
	if st.utime, err = strconv.ParseUint(f[11], 10, 64); err != nil { // field 14
		return procStat{}, fmt.Errorf("freezer: malformed %s: %w", path, err)
	}
	if st.stime, err = strconv.ParseUint(f[12], 10, 64); err != nil { // field 15
		return procStat{}, fmt.Errorf("freezer: malformed %s: %w", path, err)
	}
	return st, nil
}

// checkTarget refuses targets that would freeze the control plane itself or
// that are not what the caller says, and returns pid's session ID.
func checkTarget(pid, pgid int) (session int, err error) {
	switch {
	case pid <= 1 || pgid <= 1:
		return 0, fmt.Errorf("freezer: invalid pid %d / pgid %d", pid, pgid)
	case pid == os.Getpid():
		return 0, fmt.Errorf("freezer: refusing to attach the calling process %d", pid)
	case pgid == syscall.Getpgrp():
		return 0, fmt.Errorf("freezer: refusing process group %d: it is the caller's own (start the process with Setpgid)", pgid)
	}
	st, err := readStat(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("freezer: process %d: %w", pid, err)
	}
	if st.pgrp != pgid {
		return 0, fmt.Errorf("freezer: process %d is in process group %d, not %d", pid, st.pgrp, pgid)
	}
	return st.session, nil
}

// MoveGroup moves the process tree led by pid into the cgroup whose
// cgroup.procs file is procs: pid first, then its descendants top-down as
// /proc/PID/task/TID/children lists them (a child forked after its parent
// moved is born inside). Where the kernel does not list children, it
// sweeps process group pgid instead, until a pass finds nobody outside.
// Only a failure to move pid itself is an error.
func MoveGroup(ctx context.Context, procs string, pid, pgid int) error {
	if err := writeFile(procs, strconv.Itoa(pid)); err != nil {
		return err
	}
	queue := []int{pid}
	for n := 0; len(queue) > 0 && n < 4096; n++ {
		p := queue[0]
		queue = queue[1:]
		kids, ok := children(p)
		if !ok {
			sweepGroup(ctx, procs, pid, pgid)
			return nil
		}
		for _, k := range kids {
			if err := writeFile(procs, strconv.Itoa(k)); err == nil {
				queue = append(queue, k)
			}
		}
	}
	return nil
}

// children lists pid's children from /proc/PID/task/TID/children; ok is
// false when the kernel does not provide those files.
func children(pid int) (kids []int, ok bool) {
	files, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil || len(files) == 0 {
		return nil, false
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		for _, w := range strings.Fields(string(b)) {
			if k, err := strconv.Atoi(w); err == nil {
				kids = append(kids, k)
			}
		}
	}
	return kids, true
}

// sweepGroup moves the members of process group pgid (in pid's session)
// not yet in procs, repeating while a pass moved someone (a member not
// yet moved may fork again).
func sweepGroup(ctx context.Context, procs string, pid, pgid int) {
	st, err := readStat(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return
	}
	sid := st.session
	for pass := 0; pass < 10 && ctx.Err() == nil; pass++ {
		members, _, err := groupMembers(pgid, sid)
		if err != nil {
			return
		}
		in, err := readPids(procs)
		if err != nil {
			return
		}
		inSet := make(map[int]bool, len(in))
		for _, p := range in {
			inSet[p] = true
		}
		moved := 0
		for _, p := range members {
			if inSet[p] {
				continue
			}
			if st, err := readStat(fmt.Sprintf("/proc/%d/stat", p)); err != nil ||
				st.session != sid || st.pgrp != pgid || st.state == 'Z' {
				continue
			}
			if writeFile(procs, strconv.Itoa(p)) == nil {
				moved++
			}
		}
		if moved == 0 {
			return
		}
	}
}

// groupMembers lists the processes (thread group IDs) in process group pgid.
// foreign reports whether any of them is outside session sid, which means
// pgid no longer names the tree that was attached.
func groupMembers(pgid, sid int) (pids []int, foreign bool, err error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, false, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		st, err := readStat("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		if st.pgrp != pgid {
			continue
		}
		if st.session != sid {
			foreign = true
		}
		pids = append(pids, pid)
	}
	return pids, foreign, nil
}

// taskStates calls ok with the state of every thread of process pid and
// reports whether all of them passed. A process that is gone passes.
func taskStates(pid int, ok func(state byte) bool) bool {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return true // gone
	}
	for _, e := range ents {
		st, err := readStat(filepath.Join(dir, e.Name(), "stat"))
		if err != nil {
			continue // thread exited
		}
		if !ok(st.state) {
			return false
		}
	}
	return true
}

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	root, point, fstype string
	superOpts           []string
}

func mounts() ([]mountEntry, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []mountEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// id parent maj:min root point opts [optional...] - fstype source superopts
		f := strings.Fields(sc.Text())
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 >= len(f) {
			continue
		}
		out = append(out, mountEntry{
			root:      unescapeMount(f[3]),
			point:     unescapeMount(f[4]),
			fstype:    f[sep+1],
			superOpts: strings.Split(f[sep+3], ","),
		})
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupV1FreezerMount finds where the cgroup v1 freezer controller is
// mounted.
func cgroupV1FreezerMount() (string, error) {
	ms, err := mounts()
	if err != nil {
		return "", err
	}
	for _, m := range ms {
		if m.fstype != "cgroup" {
			continue
		}
		for _, o := range m.superOpts {
			if o == "freezer" {
				return m.point, nil
			}
		}
	}
	return "", errors.New("no cgroup v1 freezer hierarchy mounted")
}

// cgroupV2Parent finds the directory of the caller's own cgroup2 group: the
// group delegated to it, under which it may create groups and into which
// its children are born.
func cgroupV2Parent() (string, error) { return v2GroupOf(os.Getpid()) }

// readPids reads a cgroup.procs file.
func readPids(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, s := range strings.Fields(string(b)) {
		p, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("freezer: malformed %s: %w", path, err)
		}
		pids = append(pids, p)
	}
	return pids, nil
}

// writeFile writes s to an existing kernel interface file.
func writeFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writable reports whether path is an existing file the caller may write.
func writable(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	return f.Close()
}
