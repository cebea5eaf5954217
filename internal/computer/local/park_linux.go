//go:build linux

package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/checkpoint"
	"github.com/helmr-go/helmr/internal/computer"
)

// Parking (computer.Parker, decision 0024). A Restorable process is
// checkpointed with CRIU (package checkpoint) into
// <dir>/<computer id>/checkpoints/<name>/ (mode 0700, files 0600) and
// ends; Unpark restores it from there. What the provider adds to the
// package:
//   - /workspace and /tmp are always named to the dump, and given at the
//     restore as the host paths of this start: a Computer with a disk
//     limit has them on its image, mounted anew at each start (and let go
//     on the host once the restored sandbox has its own mount);
//   - a Computer with Network has its pasta stopped before the dump (its
//     tap device cannot be dumped; the namespace keeps lo and the
//     firewall) and a new one attached to the restored process, with the
//     firewall written again for the host's addresses of now;
//   - the Computer's cgroups stay while it is parked (nothing but Delete
//     and Cleanup removes them) and are made again with its limits
//     before a restore: CRIU puts the restored tree back into the groups
//     it was in;
//   - the process a dump ended reports exit code 0 and no error, and its
//     disk watch, image mount and pasta go as at any end.

// checkpointsDir is the directory of a Computer's parked processes.
const checkpointsDir = "checkpoints"

// parkFile records, next to the images, what Unpark gives the restored
// process and the checkpoint does not say: which host files were its
// stdout and stderr.
const parkFile = "helmr-local.json"

// parkInfo is parkFile's content.
type parkInfo struct {
	Stdout string `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	// Binds are the mount points of the process's binds, which Unpark
	// takes from its ProcessSpec.Binds.
	Binds []string `json:"binds,omitempty"`
}

var _ computer.Parker = (*Provider)(nil)

// probeCRIU returns the CRIU that opt names (Options.CRIU), or why the
// provider cannot park.
func (p *Provider) probeCRIU(opt string) (*checkpoint.CRIU, string) {
	switch {
	case opt == "" || opt == "off":
		return nil, "checkpoints are turned off (--criu off): waiting session processes are frozen, not parked"
	case p.kind == KindUnsafe:
		return nil, "computers are not sandboxed, and only a process in a bubblewrap sandbox can be checkpointed: " + p.unsandboxed
	case os.Geteuid() != 0:
		return nil, "checkpoints need root (CRIU restores namespaces and process IDs): run the server as root to park waiting session processes"
	}
	if opt == "auto" {
		opt = ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := checkpoint.Probe(ctx, opt, p.log)
	if err != nil {
		msg := err.Error()
		var he *helmrtype.Error
		if errors.As(err, &he) {
			msg = he.Message
		}
		return nil, "no criu that passes `criu check`: " + msg + "; `make setup` (as root) installs a CRIU that passes it"
	}
	p.log.Info("computers: waiting processes can be parked", "criu", c.Path, "version", c.Version)
	return c, ""
}

// CheckpointOff says why this provider cannot park processes: parking is
// turned off, the host has no working CRIU, the control plane is not
// root, or Computers are not sandboxed. It is "" when it can.
func (p *Provider) CheckpointOff() string { return p.checkpointOff }

// parkDir returns the images directory of the process parked under name
// in Computer id.
func (p *Provider) parkDir(id, name string) (string, error) {
	d, err := p.dir(id)
	if err != nil {
		return "", helmrtype.Errorf(helmrtype.CodeInvalidRequest, "%v", err)
	}
	if !helmrtype.ValidName(name) {
		return "", helmrtype.Errorf(helmrtype.CodeInvalidRequest, "local: invalid name %q for a parked process", name)
	}
	return filepath.Join(d, checkpointsDir, name), nil
}

// Parked reports whether Computer id holds a complete checkpoint under
// name (its manifest, written last, is there).
func (p *Provider) Parked(id, name string) bool {
	dir, err := p.parkDir(id, name)
	if err != nil {
		return false
	}
	fi, err := os.Stat(filepath.Join(dir, checkpoint.ManifestFile))
	return err == nil && fi.Mode().IsRegular()
}

// DropParked deletes the images of the process parked under name in
// Computer id; no images is not an error.
func (p *Provider) DropParked(id, name string) error {
	dir, err := p.parkDir(id, name)
	if err != nil {
		return err
	}
	unlock := p.parking.lock(dir)
	defer unlock()
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("local: remove the parked process %s of computer %s: %w", name, id, err)
	}
	os.Remove(filepath.Dir(dir)) // when it was the last
	return nil
}

// Park checkpoints pr, a Restorable process of this provider started in
// Computer spec, under name, and ends it: pr's Done is closed when Park
// returns, and its Wait reports code 0 and no error. Images an earlier
// park left under name (those pr was restored from) are replaced. The
// dump is not cut short by ctx (CRIU stopped half-way could leave the
// process broken). On an error the process runs on, with a new pasta
// for a Computer with Network, and no images are left (CRIU's log,
// checkpoint.DumpLog, stays for a look).
func (p *Provider) Park(ctx context.Context, spec computer.Spec, name string, pr computer.Process) (computer.ParkStats, error) {
	if p.criu == nil {
		return computer.ParkStats{}, helmrtype.Errorf(checkpoint.CodeUnsupported, "local: cannot park: %s", p.checkpointOff)
	}
	dir, err := p.parkDir(spec.ID, name)
	if err != nil {
		return computer.ParkStats{}, err
	}
	proc, ok := pr.(*process)
	if !ok || proc.owner != p || proc.init <= 0 {
		return computer.ParkStats{}, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "local: only a Restorable process this provider started or restored can be parked (not %T)", pr)
	}
	unlock := p.parking.lock(dir)
	defer unlock()
	select {
	case <-proc.done:
		return computer.ParkStats{}, helmrtype.Errorf(helmrtype.CodeConflict, "local: the process to park in computer %s has ended", spec.ID)
	default:
	}
	if err := os.RemoveAll(dir); err != nil {
		return computer.ParkStats{}, helmrtype.Errorf(checkpoint.CodeDumpFailed, "local: remove the old images of %s: %v", name, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return computer.ParkStats{}, helmrtype.Errorf(checkpoint.CodeDumpFailed, "local: %v", err)
	}
	os.Chmod(filepath.Dir(dir), 0o700)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return computer.ParkStats{}, helmrtype.Errorf(checkpoint.CodeDumpFailed, "local: %v", err)
	}
	info := parkInfo{Stdout: hostFilePath(proc.init, 1), Stderr: hostFilePath(proc.init, 2), Binds: proc.binds}
	b, _ := json.Marshal(info)
	if err := os.WriteFile(filepath.Join(dir, parkFile), b, 0o600); err != nil {
		os.RemoveAll(dir)
		return computer.ParkStats{}, helmrtype.Errorf(checkpoint.CodeDumpFailed, "local: %v", err)
	}

	proc.mu.Lock()
	if proc.parking != nil {
		proc.mu.Unlock()
		os.RemoveAll(dir)
		return computer.ParkStats{}, helmrtype.Errorf(helmrtype.CodeConflict, "local: the process is being parked already")
	}
	verdict := make(chan struct{})
	proc.parking = verdict
	proc.mu.Unlock()
	decide := func(parked bool) {
		proc.mu.Lock()
		proc.parked = parked
		proc.parking = nil
		close(verdict)
		proc.mu.Unlock()
	}

	start := time.Now()
	paused := false
	if proc.net != nil {
		// pasta's tap device goes with pasta: CRIU cannot dump it.
		paused = proc.net.pause() > 0
		err = waitNoInterface(ctx, proc.init)
	}
	var cp *checkpoint.Checkpoint
	if err == nil {
		cp, err = p.criu.Dump(context.WithoutCancel(ctx), proc.init, dir,
			checkpoint.DumpOptions{Mounts: append([]string{computer.Workspace, computer.Tmp}, proc.binds...)})
	}
	if err != nil {
		decide(false)
		removeAllBut(dir, checkpoint.DumpLog)
		if paused {
			if nerr := p.restartNetwork(ctx, proc, spec); nerr != nil {
				p.log.Error("a process that could not be parked has no network", "computer", spec.ID, "err", nerr)
				err = fmt.Errorf("%w (and its network could not be given back: %v)", err, nerr)
			}
		}
		if helmrtype.CodeOf(err) == helmrtype.CodeInternal {
			err = helmrtype.Errorf(checkpoint.CodeDumpFailed, "local: park: %v", err)
		}
		return computer.ParkStats{}, err
	}
	decide(true)
	// CRIU ended the tree; bubblewrap's outer process (or the restored
	// root itself) ends with it, and its end is reaped and reported.
	select {
	case <-proc.done:
	case <-time.After(30 * time.Second):
		proc.Signal(syscall.SIGKILL)
		<-proc.done
	}
	stats := computer.ParkStats{Took: time.Since(start), Bytes: cp.Bytes}
	p.log.Info("process parked", "computer", spec.ID, "name", name, "took", stats.Took, "bytes", stats.Bytes)
	return stats, nil
}

// restartNetwork gives a sandbox whose park failed a new pasta.
func (p *Provider) restartNetwork(ctx context.Context, proc *process, spec computer.Spec) error {
	pasta, err := p.net.attach(context.WithoutCancel(ctx), proc.init, spec.NetworkAllow)
	if err != nil {
		return err
	}
	proc.net.set(pasta)
	return nil
}

// Unpark restores the process parked under name in Computer spec: its
// files are made available again (its disk image mounted, as at a
// start), its cgroups made again with its limits if they went, and the
// process restored with /workspace and /tmp from this start and
// ps.Stdout and ps.Stderr (files, or nil to open the same paths again)
// as its stdout and stderr. A Computer with Network gets a new pasta and
// its firewall written again; one with a disk limit is watched again.
// The process returned is Restorable: PID and InitPID are the restored
// root's host PID. The images stay until DropParked. The restore is not
// cut short by ctx.
func (p *Provider) Unpark(ctx context.Context, spec computer.Spec, name string, ps computer.ProcessSpec) (_ computer.Process, err error) {
	if p.criu == nil {
		return nil, helmrtype.Errorf(checkpoint.CodeUnsupported, "local: cannot restore a parked process: %s", p.checkpointOff)
	}
	dir, err := p.parkDir(spec.ID, name)
	if err != nil {
		return nil, err
	}
	stdout, err := logFile(ps.Stdout, "Stdout")
	if err != nil {
		return nil, err
	}
	stderr, err := logFile(ps.Stderr, "Stderr")
	if err != nil {
		return nil, err
	}
	if spec.Network && p.net.why != "" {
		return nil, helmrtype.Errorf(checkpoint.CodeRestoreFailed, "local: a Computer with network needs pasta and nft: %s", p.net.why)
	}
	unlock := p.parking.lock(dir)
	defer unlock()
	if !p.Parked(spec.ID, name) {
		return nil, helmrtype.Errorf(helmrtype.CodeNotFound, "local: no process is parked as %q in computer %s", name, spec.ID)
	}
	var info parkInfo
	if b, err := os.ReadFile(filepath.Join(dir, parkFile)); err == nil {
		json.Unmarshal(b, &info)
	}
	d, _ := p.dir(spec.ID)
	fl, err := p.files(d, spec)
	if err != nil {
		return nil, helmrtype.Errorf(checkpoint.CodeRestoreFailed, "local: the files of computer %s: %v", spec.ID, err)
	}
	defer func() {
		if err != nil {
			fl.close()
		}
	}()
	if fl.meter != nil {
		if err := p.disk.check(fl.meter, spec.Resources.Disk); err != nil {
			return nil, err
		}
	}
	if _, err := p.limits.ensure(spec.ID, spec.Resources); err != nil {
		return nil, helmrtype.Errorf(checkpoint.CodeRestoreFailed, "local: resource limits of computer %s: %v", spec.ID, err)
	}
	files := map[string]*os.File{}
	if info.Stderr != "" && stderr != nil {
		files[info.Stderr] = stderr
	}
	if info.Stdout != "" && stdout != nil {
		files[info.Stdout] = stdout
	}
	mounts := map[string]string{computer.Workspace: fl.ws, computer.Tmp: fl.tmp}
	for _, dst := range info.Binds {
		i := slices.IndexFunc(ps.Binds, func(b computer.Bind) bool { return b.Dst == dst })
		if i < 0 {
			return nil, helmrtype.Errorf(checkpoint.CodeRestoreFailed, "local: the restore of %s in computer %s needs the source of its bind %s", name, spec.ID, dst)
		}
		mounts[dst] = ps.Binds[i].Src
	}
	// Into the Computer's cgroups, with their limits, before it runs
	// again: as at a start, every process of the tree is born (here:
	// resumes) inside them.
	place := func(pids []int) error {
		for _, pid := range pids {
			if err := p.limits.apply(spec.ID, spec.Resources, pid); err != nil {
				return err
			}
		}
		return nil
	}
	r, err := p.criu.Restore(context.WithoutCancel(ctx), dir, checkpoint.RestoreOptions{Mounts: mounts, Files: files, Place: place})
	if err != nil {
		return nil, err
	}
	pr := &process{pid: r.PID, init: r.PID, owner: p, binds: info.Binds, done: make(chan struct{}), waitFn: func() error {
		st, err := r.Wait()
		if err != nil {
			return err
		}
		if !st.Success() {
			return &exec.ExitError{ProcessState: st}
		}
		return nil
	}}
	if spec.Network {
		pasta, nerr := p.net.attach(context.WithoutCancel(ctx), r.PID, spec.NetworkAllow)
		if nerr != nil {
			// Without its firewall it must not run on.
			syscall.Kill(-r.PID, syscall.SIGKILL)
			r.Wait()
			err = helmrtype.Errorf(checkpoint.CodeRestoreFailed, "local: the restored process's network: %v", nerr)
			return nil, err
		}
		pr.net = &netServer{pid: pasta}
		pr.ended = pr.net.close
	}
	if fl.meter != nil {
		pr.stop = p.disk.watch(spec.ID, spec.Resources.Disk, fl.meter, pr)
		fl.meter = nil
	}
	// The restored sandbox has a mount of the image of its own: the
	// host's goes.
	if fl.unmount != nil {
		fl.unmount()
		fl.unmount = nil
	}
	go pr.wait()
	p.log.Info("process restored", "computer", spec.ID, "name", name, "pid", r.PID, "took", r.Took)
	return pr, nil
}

// logFile returns w as the file Unpark gives the restored process.
func logFile(w io.Writer, which string) (*os.File, error) {
	if w == nil {
		return nil, nil
	}
	if f, ok := w.(*os.File); ok {
		return f, nil
	}
	return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "local: a restored process's %s must be a file (*os.File), not %T", which, w)
}

// hostFilePath returns the host path of descriptor fd of process pid
// when it is a file, "" otherwise (a pipe, a socket).
func hostFilePath(pid, fd int) string {
	target, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + strconv.Itoa(fd))
	if err != nil || !strings.HasPrefix(target, "/") {
		return ""
	}
	return strings.TrimSuffix(target, " (deleted)")
}

// waitNoInterface waits until the network namespace of process pid has
// no interface but its loopback (pasta's tap goes once pasta is dead).
func waitNoInterface(ctx context.Context, pid int) error {
	path := "/proc/" + strconv.Itoa(pid) + "/net/dev"
	deadline := time.Now().Add(5 * time.Second)
	wait := 100 * time.Microsecond
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("local: the process's network: %w", err)
		}
		others := false
		lines := strings.Split(string(b), "\n")
		for _, l := range lines[min(2, len(lines)):] {
			if name, _, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(name) != "lo" {
				others = true
			}
		}
		if !others {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("local: the sandbox's network interface did not go within 5 s of its pasta's end")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Millisecond)
	}
}

// removeAllBut removes everything in dir but the file keep.
func removeAllBut(dir, keep string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != keep {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// parkLocks serializes Park, Unpark and DropParked of one images
// directory.
type parkLocks struct {
	mu   sync.Mutex
	held map[string]*parkLock
}

type parkLock struct {
	mu sync.Mutex
	n  int
}

// lock locks key and returns its unlock.
func (l *parkLocks) lock(key string) func() {
	l.mu.Lock()
	if l.held == nil {
		l.held = map[string]*parkLock{}
	}
	k := l.held[key]
	if k == nil {
		k = &parkLock{}
		l.held[key] = k
	}
	k.n++
	l.mu.Unlock()
	k.mu.Lock()
	return func() {
		k.mu.Unlock()
		l.mu.Lock()
		if k.n--; k.n == 0 {
			delete(l.held, key)
		}
		l.mu.Unlock()
	}
}
