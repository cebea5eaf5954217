package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/checkpoint"
	"github.com/helmr-go/helmr/internal/computer"
)

// Provider runs Computers on this machine.
type Provider struct {
	opts   Options
	log    *slog.Logger
	kind   string
	bwrap  string
	limits *limiter
	net    *netStack
	// hostEtc is the /etc of host images (writeHostEtc).
	hostEtc string
	disk    *diskWatch
	images  *diskImages
	// unsandboxed is why bubblewrap cannot run here and how to fix it, ""
	// when it runs.
	unsandboxed string
	// criu parks processes; nil when parking is off, and checkpointOff
	// says why.
	criu          *checkpoint.CRIU
	checkpointOff string
	parking       parkLocks
}

// New checks that bubblewrap works here (it runs a trivial sandbox) and
// which cgroup controllers can limit resources, and says so in the log.
func New(opts Options) (*Provider, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.CgroupName == "" {
		opts.CgroupName = "helmr"
	}
	if opts.Bwrap == "" {
		opts.Bwrap = "bwrap"
	}
	abs, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	opts.Dir = abs
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, err
	}
	// Descriptors this process inherited (a shell's redirections, a
	// supervisor's pipes) must not reach any Computer.
	closeInherited()
	hostEtc, err := writeHostEtc(opts.Dir, "/etc")
	if err != nil {
		return nil, err
	}
	p := &Provider{opts: opts, log: opts.Logger, kind: KindBubblewrap, net: newNetStack(), hostEtc: hostEtc}
	if err := p.probe(); err != nil {
		if !opts.Unsafe {
			return nil, fmt.Errorf("%w: %v (install bubblewrap and allow user namespaces, or run with --unsafe-no-sandbox to run agent processes unisolated on the host)", ErrNoSandbox, err)
		}
		p.kind = KindUnsafe
		p.unsandboxed = sandboxHint(err)
		p.log.Warn("computers are NOT sandboxed: agent processes run as plain host processes with the control plane's rights", "reason", err)
	} else {
		p.log.Info("computers are sandboxed with bubblewrap", "bwrap", p.bwrap)
		if p.net.why != "" {
			p.log.Warn("computers with network are refused on this host", "reason", p.net.why)
		}
	}
	p.criu, p.checkpointOff = p.probeCRIU(opts.CRIU)
	if p.checkpointOff != "" {
		p.log.Info("computers: waiting processes are not parked", "reason", p.checkpointOff)
	}
	p.limits = newLimiter(opts.CgroupName, p.log)
	p.disk = newDiskWatch(p.log)
	p.images = newDiskImages(p.log)
	if p.kind == KindBubblewrap && !p.images.usable() {
		p.log.Warn("disk limits are measured, not bounded by a filesystem of their own: a Computer can write past its limit between two measurements", "reason", p.images.why)
	}
	return p, nil
}

// probe runs a minimal sandbox.
func (p *Provider) probe() error {
	path, err := exec.LookPath(p.opts.Bwrap)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return fmt.Errorf("%w (%v)", errNoBwrap, err)
		}
		return err
	}
	p.bwrap = path
	true_, err := exec.LookPath("true")
	if err != nil {
		return err
	}
	args := []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--die-with-parent"}
	args = append(args, hostRoot("")...)
	args = append(args, "--proc", "/proc", "--dev", "/dev", "--", true_)
	cmd := exec.Command(path, args...)
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", path, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// errNoBwrap is the probe's error when bubblewrap is not on PATH.
var errNoBwrap = errors.New("bubblewrap (bwrap) is not installed: not found on PATH")

// sandboxHint turns the probe's error into what is missing and how to
// install or allow it.
func sandboxHint(err error) string {
	if errors.Is(err, errNoBwrap) {
		return err.Error() + "; install it (Debian/Ubuntu: sudo apt-get install bubblewrap, or `make setup` as root; Fedora: sudo dnf install bubblewrap) and start again"
	}
	return "bubblewrap cannot make a sandbox here (" + err.Error() + "); it needs user namespaces: allow them (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 and later sysctl kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for bwrap) and start again"
}

// Kind is "bubblewrap" or "unsafe".
func (p *Provider) Kind() string { return p.kind }

// Unsandboxed says why processes run unsandboxed and how to fix it; ""
// when bubblewrap sandboxes them.
func (p *Provider) Unsandboxed() string { return p.unsandboxed }

// Unenforced lists the limits r sets ("cpu", "memory", "processes",
// "disk") that this host does not enforce: all but disk without cgroups
// (a disk limit is measured and enforced without them).
func (p *Provider) Unenforced(r helmrtype.ResourcesManifest) []string {
	return unenforced(r, p.limits.kind() != "", true)
}

// LimitsWhy says why resource limits are not enforced ("" when they are).
func (p *Provider) LimitsWhy() string {
	if p.limits.kind() != "" {
		return ""
	}
	return p.limits.why
}

// Limits names the cgroup mechanism that enforces resource limits ("" if
// none can).
func (p *Provider) Limits() string { return p.limits.kind() }

func (p *Provider) dir(id string) (string, error) {
	if !helmrtype.ValidName(id) {
		return "", fmt.Errorf("local: invalid computer id %q", id)
	}
	return filepath.Join(p.opts.Dir, id), nil
}

// Create makes the Computer's workspace and tmp: on a disk image of its
// own when it has a disk limit and this host can (diskimage.go), in plain
// directories otherwise. A Computer keeps what it was made with.
func (p *Provider) Create(ctx context.Context, spec computer.Spec) error {
	d, err := p.dir(spec.ID)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d, 0o700); err != nil {
		return err
	}
	p.images.making.Lock()
	defer p.images.making.Unlock()
	if hasImage(d) {
		return nil
	}
	if spec.Resources.Disk != "" && p.kind == KindBubblewrap && p.images.usable() {
		if _, err := os.Stat(filepath.Join(d, "workspace")); errors.Is(err, os.ErrNotExist) {
			n, err := helmrtype.ParseMemory(spec.Resources.Disk)
			if err != nil {
				return err
			}
			if err := p.images.make(ctx, d, n); !errors.Is(err, errNoImage) {
				return err
			}
		}
	}
	for _, sub := range []string{"workspace", "tmp"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// Cleanup removes the cgroups this provider made that no process uses
// (call it when the control plane stops). Groups still in use stay.
func (p *Provider) Cleanup() { p.limits.cleanup() }

// LimitsDir returns the cgroup v2 directory that holds the Computers'
// limit groups, "" when limits use cgroup v1 or none apply. A freezer must
// keep processes under it (freezer.NestUnder), or they would escape their
// limits.
func (p *Provider) LimitsDir() string {
	if p.limits.v2 && p.limits.kind() != "" {
		return p.limits.mem
	}
	return ""
}

// Delete removes the Computer's files, the images of its parked processes
// (they live in its directory) and its cgroups.
func (p *Provider) Delete(ctx context.Context, id string) error {
	d, err := p.dir(id)
	if err != nil {
		return err
	}
	p.limits.remove(id)
	p.images.forget(d)
	return os.RemoveAll(d)
}

// computerFiles are a Computer's writable directories on the host for
// one start.
type computerFiles struct {
	ws, tmp string
	// fsdir is where its image is mounted, "" for plain directories.
	fsdir string
	// meter measures its disk use; nil without a disk limit.
	meter diskMeter
	// unmount lets the image's host mount go; nil for plain directories.
	unmount func()
}

// files opens the writable directories of the Computer in d: its image
// mounted, or its plain directories.
func (p *Provider) files(d string, spec computer.Spec) (*computerFiles, error) {
	fl := &computerFiles{ws: filepath.Join(d, "workspace"), tmp: filepath.Join(d, "tmp")}
	if hasImage(d) {
		unmount, err := p.images.mount(d)
		if err != nil {
			return nil, err
		}
		fl.unmount, fl.fsdir = unmount, filepath.Join(d, fsName)
		fl.ws, fl.tmp = filepath.Join(fl.fsdir, "workspace"), filepath.Join(fl.fsdir, "tmp")
		if spec.Resources.Disk != "" {
			f, err := os.Open(fl.fsdir)
			if err != nil {
				unmount()
				return nil, err
			}
			fl.meter = fsMeter{f: f, own: ownBytes(fl.fsdir)}
		}
		return fl, nil
	}
	if _, err := os.Stat(fl.ws); err != nil {
		return nil, fmt.Errorf("local: computer %s does not exist (create it first): %w", spec.ID, err)
	}
	if spec.Resources.Disk != "" {
		fl.meter = treeMeter{fl.ws, fl.tmp}
	}
	return fl, nil
}

// close lets go of whatever the files still hold.
func (fl *computerFiles) close() {
	if fl.meter != nil {
		fl.meter.close()
		fl.meter = nil
	}
	if fl.unmount != nil {
		fl.unmount()
	}
}

// imageRoot returns the arguments that show an image directory as the
// root, read-only: each top-level entry is bound on its own, so that the
// sandbox's own root stays writable for /workspace, /tmp and binds.
func imageRoot(root string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("local: image root: %w", err)
	}
	var args []string
	for _, e := range entries {
		name := "/" + e.Name()
		switch name {
		case computer.Workspace, computer.Tmp, "/proc", "/dev":
			continue
		}
		src := filepath.Join(root, e.Name())
		if e.Type()&os.ModeSymlink != 0 {
			t, err := os.Readlink(src)
			if err != nil {
				return nil, err
			}
			args = append(args, "--symlink", t, name)
			continue
		}
		args = append(args, "--ro-bind", src, name)
	}
	return args, nil
}

// procArgs returns the arguments of a sandbox's /proc: its PID
// namespace's, read-only. A sandbox's user is host root mapped when the
// control plane runs as root, and the kernel lets the host's root user
// write the global sysctls under /proc/sys (kernel.core_pattern,
// kernel.modprobe: a program the kernel runs as host root) and
// /proc/sysrq-trigger by file permission alone, without capabilities.
func procArgs() []string {
	return []string{"--proc", "/proc", "--remount-ro", "/proc"}
}

// devShmSize bounds /dev/shm (POSIX shared memory) in a sandbox.
const devShmSize = 64 << 20

// devArgs returns the arguments of a sandbox's /dev: bubblewrap's minimal
// one, read-only (it is a tmpfs, in memory and outside any disk limit),
// with a writable /dev/shm of devShmSize bytes.
func devArgs() []string {
	return []string{"--dev", "/dev", "--size", strconv.Itoa(devShmSize), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"}
}

// Start runs a process in the Computer.
func (p *Provider) Start(ctx context.Context, spec computer.Spec, ps computer.ProcessSpec) (_ computer.Process, err error) {
	d, err := p.dir(spec.ID)
	if err != nil {
		return nil, err
	}
	if len(ps.Argv) == 0 {
		return nil, errors.New("local: no command")
	}
	fl, err := p.files(d, spec)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			fl.close()
		}
	}()
	ws, tmp := fl.ws, fl.tmp
	dir := ps.Dir
	if dir == "" {
		dir = spec.Image.Workdir
	}
	if dir == "" {
		dir = computer.Workspace
	}
	if fl.meter != nil {
		if err := p.disk.check(fl.meter, spec.Resources.Disk); err != nil {
			return nil, err
		}
	}
	env := environment(spec.Image, ps.Env)
	var (
		cmd *exec.Cmd
		sb  *sandbox
	)
	if p.kind == KindUnsafe {
		cmd, err = p.unsafeCommand(ws, tmp, dir, env, ps)
	} else {
		var args []string
		if args, err = p.sandboxArgs(spec, ws, tmp, dir, env, ps); err == nil {
			cmd, sb, err = p.sandboxed(args, ps.Argv, ps.Files, spec.Network, fl.unmount != nil || ps.Restorable)
		}
	}
	if err != nil {
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = ps.Stdin, ps.Stdout, ps.Stderr
	if cmd.Stdout == nil {
		cmd.Stdout = io.Discard
	}
	if cmd.Stderr == nil {
		cmd.Stderr = io.Discard
	}
	// Its own session, hence its own process group: the tree is
	// signalled, frozen and limited as one, and it has no controlling
	// terminal (a control plane started from a shell, as helmr dev is,
	// would otherwise give it the user's: /dev/tty, TIOCSTI typing into
	// the shell). It is not tied to the control plane's life (no
	// pdeathsig): a session process outlives a control-plane restart.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		sb.abandon()
		return nil, fmt.Errorf("local: start %s: %w", ps.Argv[0], err)
	}
	pr := newProcess(cmd, p)
	fail := func(err error) (computer.Process, error) {
		// Without its limits or its network's firewall the process must
		// not run user code: it is killed before its block descriptor
		// closes (bubblewrap reads the end of the descriptor as a go).
		pr.Signal(syscall.SIGKILL)
		sb.abandon()
		cmd.Wait()
		return nil, err
	}
	// Limits first, while bubblewrap still waits for its arguments and
	// has started nothing: every process of the sandbox is born inside
	// its cgroups and file size limit. bubblewrap takes the end of its
	// block descriptor for a go, so a control plane that dies before the
	// release (a crash, an OOM kill) must not leave a sandbox running
	// outside its limits.
	if err := p.limits.apply(spec.ID, spec.Resources, cmd.Process.Pid); err != nil {
		return fail(fmt.Errorf("local: resource limits: %w", err))
	}
	if spec.Resources.Disk != "" && sb != nil {
		if err := limitFileSize(cmd.Process.Pid, spec.Resources.Disk); err != nil {
			return fail(err)
		}
	}
	if err := sb.started(ctx, p.net, spec.NetworkAllow); err != nil {
		return fail(err)
	}

	// Only now does the sandbox run the command (it waited on its block
	// descriptor): everything it starts is inside its limits and, with
	// network, behind its firewall.
	if err := sb.release(); err != nil {
		return fail(err)
	}
	// The root of the tree a checkpoint takes.
	if ps.Restorable && sb != nil {
		for _, b := range ps.Binds {
			pr.binds = append(pr.binds, b.Dst)
		}
		if pr.init, err = sb.initPID(); err != nil {
			return fail(err)
		}
	}
	if fl.meter != nil {
		pr.stop = p.disk.watch(spec.ID, spec.Resources.Disk, fl.meter, pr)
		fl.meter = nil
	}
	// Unsandboxed, the process uses the host's mount of the image.
	pr.unmount = fl.unmount
	if fl.unmount != nil && sb != nil {
		// The sandbox has a mount of the image of its own once it has
		// made its mounts (before it read its block descriptor): the
		// host's goes then, aside (or with the process, whichever
		// comes first).
		go func() {
			child, err := sb.initPID()
			if err == nil {
				err = waitMounted(context.WithoutCancel(ctx), child, fl.fsdir, pr.done)
			}
			if err != nil {
				p.log.Warn("a sandbox did not mount its Computer's disk image", "computer", spec.ID, "err", err)
			}
			fl.unmount()
		}()
	}
	pr.ended = sb.stopNetwork
	if sb != nil && sb.network {
		pr.net = &sb.pasta
	}
	go pr.wait()
	return pr, nil
}

// sandboxArgs returns bubblewrap's options for one process of a
// Computer (they travel by a pipe, not on the command line); the command
// follows them apart (sandboxed).
func (p *Provider) sandboxArgs(spec computer.Spec, ws, tmp, dir string, env []string, ps computer.ProcessSpec) ([]string, error) {
	args := []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--unshare-net", "--hostname", "computer", "--cap-drop", "ALL", "--clearenv"}
	switch {
	case spec.Image.Host:
		args = append(args, hostRoot(p.hostEtc)...)
	case spec.Image.Root != "":
		root, err := imageRoot(spec.Image.Root)
		if err != nil {
			return nil, err
		}
		args = append(args, root...)
	}
	args = append(args, procArgs()...)
	args = append(args, devArgs()...)
	args = append(args, "--bind", ws, computer.Workspace, "--bind", tmp, computer.Tmp)
	for _, b := range ps.Binds {
		flag := "--ro-bind"
		if b.Writable {
			flag = "--bind"
		}
		args = append(args, flag, b.Src, b.Dst)
	}
	// The sandbox's own root is a tmpfs (in memory, up to half the host's
	// RAM, outside any disk limit): once every mount point is made it is
	// read-only, so /workspace, /tmp and /dev/shm are the only places a
	// process can write.
	args = append(args, "--remount-ro", "/")
	if ps.Restorable {
		// CRIU checkpoints the tree under the sandbox's PID 1, and
		// bubblewrap as PID 1 cannot be: its executable lies on a host
		// mount the sandbox does not have. The command is PID 1 itself,
		// and leads a session of its own inside (the host session of
		// bubblewrap's outer process is outside the sandbox's PID
		// namespace, which CRIU refuses). See decision 0024.
		args = append(args, "--as-pid-1", "--new-session")
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		args = append(args, "--setenv", k, v)
	}
	return append(args, "--chdir", dir), nil
}

// RunStep runs one image build step: argv in a sandbox whose root is the
// writable directory root (the step's result), with outbound network
// access as a Computer with Network has (builds fetch packages) and
// nothing else of the host. It implements image.Runner.
func (p *Provider) RunStep(ctx context.Context, root string, argv, env []string, workdir, user string) error {
	if p.kind == KindUnsafe {
		return errors.New("local: image build steps need a sandbox (bubblewrap); this host runs unsandboxed")
	}
	if user != "" && user != "root" && user != "0" {
		return fmt.Errorf("local: build steps run as root in their sandbox; user %q is not supported yet", user)
	}
	if workdir == "" {
		workdir = "/"
	}
	// Build steps fetch packages: they get a network namespace of their
	// own with outbound access, like a Computer with Network.
	args := []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--unshare-net", "--hostname", "build", "--cap-drop", "ALL", "--clearenv", "--die-with-parent",
		"--bind", root, "/"}
	args = append(args, procArgs()...)
	args = append(args, devArgs()...)
	args = append(args, "--tmpfs", "/tmp")
	if _, err := os.Stat("/etc/resolv.conf"); err == nil {
		args = append(args, "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf")
	}
	for _, kv := range environment(computer.Image{}, env) {
		k, v, _ := strings.Cut(kv, "=")
		args = append(args, "--setenv", k, v)
	}
	args = append(args, "--chdir", workdir)
	// Without pasta or nft a step runs with no network at all (a step
	// that fetches fails and says why), never with the host's.
	network := p.net.why == ""
	if !network {
		p.log.Warn("an image build step runs without network", "reason", p.net.why)
	}
	cmd, sb, err := p.sandboxed(args, argv, nil, network, false)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Its own session: no controlling terminal (see Start).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		sb.abandon()
		return err
	}
	stop := context.AfterFunc(ctx, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	defer stop()
	// A step is limited as a Computer with default resources is (a
	// process limit of helmrtype.DefaultProcesses): a fork bomb in a
	// Template's build step is not bounded by the host alone.
	var idb [8]byte
	rand.Read(idb[:])
	id := "build-" + hex.EncodeToString(idb[:])
	defer p.limits.remove(id)
	// Limits before the arguments, as in Start.
	if err = p.limits.apply(id, helmrtype.ResourcesManifest{}, cmd.Process.Pid); err != nil {
		err = fmt.Errorf("local: resource limits: %w", err)
	}
	if err == nil {
		err = sb.started(ctx, p.net, nil)
	}
	if err == nil {
		err = sb.release()
	}
	if err != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		sb.abandon()
		cmd.Wait()
		return err
	}
	err = cmd.Wait()
	sb.stopNetwork()
	// Its tree goes with it, so that its cgroup can be removed.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if err != nil {
		return fmt.Errorf("%v: %s", err, tail(out.Bytes(), 2048))
	}
	return nil
}
