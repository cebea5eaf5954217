//go:build linux

package checkpoint

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"golang.org/x/sys/unix"
)

// Probe finds CRIU and checks that this host can checkpoint with it: path
// is the binary ("" looks for criu on PATH and in /usr/local/sbin and
// /usr/sbin; "off" turns checkpoints off). It runs `criu check`; an error
// with CodeUnsupported says why the host cannot checkpoint. log hears
// dumps and restores (nil: nothing).
func Probe(ctx context.Context, path string, log *slog.Logger) (*CRIU, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if path == "off" {
		return nil, helmrtype.Errorf(CodeUnsupported, "checkpoints are turned off")
	}
	if path == "" {
		path = "criu"
	}
	found, err := exec.LookPath(path)
	if err != nil && !strings.ContainsRune(path, '/') {
		for _, dir := range []string{"/usr/local/sbin", "/usr/sbin", "/sbin"} {
			if f, err2 := exec.LookPath(filepath.Join(dir, path)); err2 == nil {
				found, err = f, nil
				break
			}
		}
	}
	if err != nil {
		return nil, helmrtype.Errorf(CodeUnsupported, "CRIU is not installed (%v): install CRIU 4 or newer (Debian 12's 3.17 fails on 6.x kernels; ../shared/tools/criu/build.sh builds 4.2)", err)
	}
	if os.Geteuid() != 0 {
		return nil, helmrtype.Errorf(CodeUnsupported, "checkpoints need root: CRIU restores namespaces and process IDs, which an unprivileged control plane cannot")
	}
	out, err := exec.CommandContext(ctx, found, "--version").CombinedOutput()
	if err != nil {
		return nil, helmrtype.Errorf(CodeUnsupported, "%s --version: %v: %s", found, err, strings.TrimSpace(string(out)))
	}
	c := &CRIU{Path: found, Version: criuVersion(out), log: log}
	out, err = exec.CommandContext(ctx, found, "check").CombinedOutput()
	if err != nil {
		return nil, helmrtype.Errorf(CodeUnsupported, "`%s check` (CRIU %s) fails, so this host cannot checkpoint: %s", found, c.Version, lastLines(string(out), 6))
	}
	return c, nil
}

// criuVersion returns the version in `criu --version`'s output.
func criuVersion(out []byte) string {
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Version:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return strings.TrimSpace(string(out))
}

// maxRootEntries bounds the sandbox root a Dump records.
const maxRootEntries = 4096

// Dump checkpoints the process tree rooted at pid (the PID 1 of a
// restorable sandbox) into dir and ends it. dir is made with mode 0700 if
// missing and must hold no checkpoint yet; CRIU's log stays there
// (DumpLog). The process runs on when Dump fails.
func (c *CRIU) Dump(ctx context.Context, pid int, dir string, opts DumpOptions) (*Checkpoint, error) {
	if pid <= 1 {
		return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "checkpoint: no process %d to dump", pid)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, dumpError(dir, "%v", err)
	}
	if err := imagesDir(dir); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "inventory.img")); err == nil {
		return nil, helmrtype.Errorf(helmrtype.CodeConflict, "checkpoint: %s already holds a checkpoint", dir)
	}
	if err := sandboxInit(pid); err != nil {
		return nil, dumpError(dir, "%v", err)
	}
	cp := &Checkpoint{PID: pid, CRIU: c.Version}
	files, err := externalFiles(pid)
	if err != nil {
		return nil, dumpError(dir, "read the descriptors of process %d: %v", pid, err)
	}
	cp.Files = files
	if cp.Root, err = sandboxRoot(pid); err != nil {
		return nil, dumpError(dir, "read the sandbox root of process %d: %v", pid, err)
	}
	args := []string{"dump", "--tree", strconv.Itoa(pid), "--images-dir", dir, "--log-file", DumpLog, "-v4",
		// The sandbox's bind mounts are found again on the host.
		"--ext-mount-map", "auto", "--enable-external-sharing", "--enable-external-masters",
		// The sandbox's network namespace holds nothing to protect from
		// the outside during the dump; no iptables or nft is needed.
		"--network-lock", "skip",
		"--file-locks", "--tcp-close",
		// Cgroups are the caller's to give back (RestoreOptions.Place).
		"--manage-cgroups=ignore"}
	if len(opts.Mounts) > 0 {
		cp.Mounts = map[string]string{}
		for i, m := range opts.Mounts {
			key := "helmr-mnt-" + strconv.Itoa(i)
			cp.Mounts[m] = key
			args = append(args, "--external", "mnt["+m+"]:"+key)
		}
	}
	for _, f := range files {
		args = append(args, "--external", f.Key)
	}
	start := time.Now()
	out, err := c.run(ctx, args, nil)
	cp.Took = time.Since(start)
	if err != nil {
		err = dumpError(dir, "criu dump of process %d: %v%s", pid, err, logTail(filepath.Join(dir, DumpLog), out))
		removeImages(dir)
		return nil, err
	}
	cp.Created = time.Now().UTC()
	// CRIU keeps the tree's monotonic and boot-time clocks and, without
	// this image, restores the tree in no time namespace of its own: its
	// clocks then show the time it spent checkpointed, as the wall clock
	// does. (With it, a restored process would see no time pass while it
	// was parked: a handler that measured a day's wait would see
	// milliseconds, and its timers would fire late.)
	if err := os.Remove(filepath.Join(dir, timensImage)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		removeImages(dir)
		return nil, dumpError(dir, "%v", err)
	}
	if err := privatize(dir); err != nil {
		return nil, dumpError(dir, "%v", err)
	}
	cp.Bytes = dirBytes(dir)
	b, _ := json.MarshalIndent(cp, "", "  ")
	if err := writeFile(filepath.Join(dir, ManifestFile), b); err != nil {
		return nil, dumpError(dir, "%v", err)
	}
	c.log.Info("checkpoint taken", "pid", pid, "dir", dir, "took", cp.Took, "bytes", cp.Bytes)
	return cp, nil
}

// runTimeout bounds one run of CRIU.
const runTimeout = time.Minute

// timensImage is CRIU's image of the clocks of a tree outside any time
// namespace of its own.
const timensImage = "timens-0.img"

// Restore restores the checkpoint in dir: the tree runs again in new
// namespaces, its root process a child of this process (Restored.Wait).
// CRIU's log stays in dir (RestoreLog). The images stay too: the caller
// removes them once the restored process is known to run.
func (c *CRIU) Restore(ctx context.Context, dir string, opts RestoreOptions) (*Restored, error) {
	// CRIU takes --root as given, and a relative one fails.
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, restoreError(dir, "%v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, restoreError(dir, "read the checkpoint: %v", err)
	}
	var cp Checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, restoreError(dir, "read the checkpoint: %v", err)
	}
	work := opts.WorkDir
	if work == "" {
		work = filepath.Dir(dir)
	}
	if work, err = filepath.Abs(work); err != nil {
		return nil, restoreError(dir, "%v", err)
	}
	root, cleanup, err := makeRoot(work, cp.Root)
	if err != nil {
		return nil, restoreError(dir, "make the sandbox root: %v", err)
	}
	defer cleanup()
	pidfile := filepath.Join(dir, "restore.pid")
	os.Remove(pidfile)
	args := []string{"restore", "--images-dir", dir, "--log-file", RestoreLog, "-v4", "--root", root,
		"--ext-mount-map", "auto", "--enable-external-sharing", "--enable-external-masters",
		"--file-locks", "--tcp-close", "--manage-cgroups=ignore",
		// CRIU leaves the tree stopped, placed (RestoreOptions.Place),
		// then continued; its root becomes a child of this process, not
		// of CRIU.
		"--leave-stopped", "--restore-detached", "--restore-sibling", "--pidfile", pidfile}
	for m, key := range cp.Mounts {
		src, ok := opts.Mounts[m]
		if !ok {
			return nil, restoreError(dir, "the checkpoint needs the host source of %s (RestoreOptions.Mounts)", m)
		}
		args = append(args, "--external", "mnt["+key+"]:"+src)
	}
	var extra []*os.File
	for _, f := range cp.Files {
		file, opened, err := externalFile(f, opts.Files)
		if err != nil {
			closeAll(extra)
			return nil, restoreError(dir, "open %s for the restored process: %v", f.Path, err)
		}
		if opened {
			defer file.Close()
		}
		args = append(args, "--inherit-fd", fmt.Sprintf("fd[%d]:%s", 3+len(extra), f.Key))
		extra = append(extra, file)
	}
	start := time.Now()
	out, err := c.run(ctx, args, extra)
	took := time.Since(start)
	if err != nil {
		// What it restored before it failed (or was ended) goes, and is
		// reaped: it is this process's child.
		if pb, rerr := os.ReadFile(pidfile); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(pb))); perr == nil && pid > 1 {
				syscall.Kill(-pid, syscall.SIGKILL)
				syscall.Kill(pid, syscall.SIGKILL)
				if proc, ferr := os.FindProcess(pid); ferr == nil {
					go proc.Wait()
				}
			}
		}
		return nil, restoreError(dir, "criu restore: %v%s", err, logTail(filepath.Join(dir, RestoreLog), out))
	}
	privatize(dir)
	pb, err := os.ReadFile(pidfile)
	if err != nil {
		return nil, restoreError(dir, "the restored process's PID: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pb)))
	if err != nil || pid <= 1 {
		return nil, restoreError(dir, "the restored process's PID: %q", pb)
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		return nil, restoreError(dir, "the restored process %d: %v", pid, err)
	}
	tree := treePIDs(pid)
	if opts.Place != nil {
		if err := opts.Place(tree); err != nil {
			syscall.Kill(-pid, syscall.SIGKILL)
			syscall.Kill(pid, syscall.SIGKILL)
			proc.Wait()
			return nil, restoreError(dir, "place the restored processes: %v", err)
		}
	}
	for _, p := range tree {
		syscall.Kill(p, syscall.SIGCONT)
	}
	c.log.Info("checkpoint restored", "pid", pid, "dir", dir, "took", took)
	return &Restored{PID: pid, Took: took, proc: proc}, nil
}

// run runs CRIU with args and files as descriptors 3, 4, …, and returns
// what it printed. Its files are made private to this user (umask is
// per process; privatize fixes the modes after).
func (c *CRIU) run(ctx context.Context, args []string, files []*os.File) ([]byte, error) {
	// Bounded whatever the caller's ctx: CRIU was seen waiting forever on
	// an error path (a restored process killed during its restore).
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Path, args...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.ExtraFiles = files
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// CRIU is not part of the control plane's process group: a signal to
	// the group (a terminal's Ctrl-C) does not stop it half-way.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err := cmd.Run()
	return out.Bytes(), err
}

// imagesDir makes dir with mode 0700, or makes an existing one 0700.
func imagesDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return helmrtype.Errorf(CodeDumpFailed, "checkpoint: %v", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return helmrtype.Errorf(CodeDumpFailed, "checkpoint: %v", err)
	}
	return nil
}

// privatize makes every file in dir mode 0600 (CRIU writes 0644).
func privatize(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			if err := os.Chmod(filepath.Join(dir, e.Name()), 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeImages removes what a failed dump left in dir but its log.
func removeImages(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != DumpLog && e.Name() != RestoreLog {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// writeFile writes b to path, mode 0600, through a temporary file.
func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// dirBytes is the disk space the files in dir take.
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok {
					n += st.Blocks * 512
				} else {
					n += fi.Size()
				}
			}
		}
		return nil
	})
	return n
}

// sandboxInit checks that pid is the PID 1 of a PID namespace of its
// own: the root of a restorable sandbox's tree.
func sandboxInit(pid int) error {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(v)
			if len(f) < 2 || f[len(f)-1] != "1" {
				return fmt.Errorf("process %d is not the PID 1 of a sandbox (NSpid %s): only a restorable sandbox's process can be checkpointed", pid, strings.TrimSpace(v))
			}
			return nil
		}
	}
	return fmt.Errorf("process %d: no NSpid in its status", pid)
}

// treePIDs returns pid and its descendants (through every thread's
// children).
func treePIDs(pid int) []int {
	pids := []int{pid}
	for i := 0; i < len(pids); i++ {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pids[i]))
		for _, t := range tasks {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pids[i], t.Name()))
			for _, f := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(f); err == nil {
					pids = append(pids, n)
				}
			}
		}
	}
	return pids
}

// externalFiles returns the files the tree of pid holds open from
// mounts outside its mount namespace: regular files, directories and
// devices that CRIU cannot find inside, so they are dumped as external.
func externalFiles(pid int) ([]ExternalFile, error) {
	var files []ExternalFile
	seen := map[string]bool{}
	for _, p := range treePIDs(pid) {
		mounts, err := mountIDs(p)
		if err != nil {
			if p == pid {
				return nil, err
			}
			continue // gone meanwhile
		}
		fdDir := fmt.Sprintf("/proc/%d/fd", p)
		entries, err := os.ReadDir(fdDir)
		if err != nil {
			if p == pid {
				return nil, err
			}
			continue
		}
		for _, e := range entries {
			var st unix.Stat_t
			if err := unix.Stat(filepath.Join(fdDir, e.Name()), &st); err != nil {
				continue
			}
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFREG, unix.S_IFDIR, unix.S_IFCHR:
			default:
				continue // pipes, sockets, anonymous inodes: CRIU dumps them
			}
			info, err := fdInfo(p, e.Name())
			if err != nil || mounts[info.mnt] {
				continue
			}
			key := fmt.Sprintf("file[%x:%x]", info.mnt, st.Ino)
			if seen[key] {
				continue
			}
			seen[key] = true
			path, _ := os.Readlink(filepath.Join(fdDir, e.Name()))
			f := ExternalFile{Key: key, Path: strings.TrimSuffix(path, " (deleted)"), Flags: info.flags}
			if info.flags&unix.O_APPEND == 0 && st.Mode&unix.S_IFMT == unix.S_IFREG {
				f.Offset = info.pos
			}
			files = append(files, f)
		}
	}
	return files, nil
}

// mountIDs returns the IDs of the mounts in pid's mount namespace.
func mountIDs(pid int) (map[int]bool, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ids := map[int]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		id, _, _ := strings.Cut(sc.Text(), " ")
		if n, err := strconv.Atoi(id); err == nil {
			ids[n] = true
		}
	}
	return ids, sc.Err()
}

type fdInfoT struct {
	mnt, flags int
	pos        int64
}

// fdInfo reads /proc/pid/fdinfo/fd.
func fdInfo(pid int, fd string) (fdInfoT, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd))
	if err != nil {
		return fdInfoT{}, err
	}
	var in fdInfoT
	in.mnt = -1
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "mnt_id":
			in.mnt, _ = strconv.Atoi(v)
		case "flags":
			n, _ := strconv.ParseInt(v, 8, 64)
			in.flags = int(n)
		case "pos":
			in.pos, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if in.mnt < 0 {
		return in, errors.New("no mnt_id")
	}
	return in, nil
}

// sandboxRoot returns the entries of the root filesystem of pid's mount
// namespace (bubblewrap's tmpfs: mount points and symbolic links), which
// CRIU leaves out of the images: Restore makes it again.
func sandboxRoot(pid int) ([]RootEntry, error) {
	base := fmt.Sprintf("/proc/%d/root/", pid)
	var rootSt unix.Stat_t
	if err := unix.Stat(base, &rootSt); err != nil {
		return nil, err
	}
	var entries []RootEntry
	err := filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(path, base)
		if rel == "" {
			return nil
		}
		if len(entries) >= maxRootEntries {
			return fmt.Errorf("more than %d entries in the sandbox's root", maxRootEntries)
		}
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			return err
		}
		e := RootEntry{Path: "/" + rel, Mode: st.Mode & 0o7777}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			e.Type = "l"
			if e.Target, err = os.Readlink(path); err != nil {
				return err
			}
		case unix.S_IFDIR:
			e.Type = "d"
			entries = append(entries, e)
			if st.Dev != rootSt.Dev {
				return filepath.SkipDir // a mount point: its contents are not the root's
			}
			return nil
		default:
			// A file: on the root, or a file bound over one.
			e.Type = "f"
		}
		entries = append(entries, e)
		return nil
	})
	return entries, err
}

// makeRoot makes a sandbox root from entries under work: a small tmpfs
// mount that CRIU takes as the restored mount namespace's root, made
// read-only as the sandbox's was. cleanup unmounts and removes it.
func makeRoot(work string, entries []RootEntry) (string, func(), error) {
	if err := os.MkdirAll(work, 0o700); err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp(work, ".restore-root-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() {
		unix.Unmount(dir, unix.MNT_DETACH)
		os.Remove(dir)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		os.Remove(dir)
		return "", nil, fmt.Errorf("mount a tmpfs on %s: %w", dir, err)
	}
	// Parents first.
	sorted := append([]RootEntry(nil), entries...)
	sort.SliceStable(sorted, func(i, j int) bool { return len(sorted[i].Path) < len(sorted[j].Path) })
	for _, e := range sorted {
		p := filepath.Join(dir, filepath.Clean("/"+e.Path))
		if p == dir || !strings.HasPrefix(p, dir+"/") {
			continue
		}
		var err error
		switch e.Type {
		case "d":
			if err = os.MkdirAll(p, 0o755); err == nil {
				err = os.Chmod(p, fs.FileMode(e.Mode&0o777))
			}
		case "f":
			var f *os.File
			if f, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY, fs.FileMode(e.Mode&0o777)); err == nil {
				err = f.Close()
			}
		case "l":
			err = os.Symlink(e.Target, p)
		}
		if err != nil {
			cleanup()
			return "", nil, err
		}
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("make %s read-only: %w", dir, err)
	}
	return dir, cleanup, nil
}

// externalFile returns the file to give the restored process for f: the
// caller's, or f's path opened again with its flags (opened says so).
func externalFile(f ExternalFile, given map[string]*os.File) (_ *os.File, opened bool, _ error) {
	if file, ok := given[f.Path]; ok && file != nil {
		return file, false, nil
	}
	flags := f.Flags & (unix.O_ACCMODE | unix.O_APPEND | unix.O_NONBLOCK | unix.O_DIRECTORY)
	if flags&unix.O_ACCMODE != unix.O_RDONLY && flags&unix.O_APPEND != 0 {
		flags |= unix.O_CREAT // a log rotated away meanwhile
	}
	file, err := os.OpenFile(f.Path, flags|unix.O_CLOEXEC|unix.O_NOCTTY, 0o600)
	if err != nil {
		return nil, false, err
	}
	if f.Offset > 0 {
		if _, err := file.Seek(f.Offset, 0); err != nil {
			file.Close()
			return nil, false, err
		}
	}
	return file, true, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

func dumpError(dir, format string, args ...any) error {
	return helmrtype.Errorf(CodeDumpFailed, "checkpoint %s: "+format, append([]any{dir}, args...)...)
}

func restoreError(dir, format string, args ...any) error {
	return helmrtype.Errorf(CodeRestoreFailed, "restore %s: "+format, append([]any{dir}, args...)...)
}

// logTail quotes the errors of CRIU's log at path (or, without any,
// its last lines), and out, what CRIU printed.
func logTail(path string, out []byte) string {
	var b strings.Builder
	if o := strings.TrimSpace(string(out)); o != "" {
		fmt.Fprintf(&b, ": %s", lastLines(o, 4))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return b.String()
	}
	var errs []string
	for _, line := range strings.Split(string(data), "\n") {
		// Printed on every run, and harmless.
		if strings.Contains(line, "Error (") && !strings.Contains(line, "RLIMIT_NOFILE") {
			errs = append(errs, strings.TrimSpace(line))
		}
	}
	tail := strings.Join(errs, "\n")
	if tail == "" {
		tail = lastLines(string(data), 8)
	} else {
		tail = lastLines(tail, 8)
	}
	fmt.Fprintf(&b, " (log %s:\n%s)", path, tail)
	return b.String()
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
