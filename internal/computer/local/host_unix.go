//go:build unix && !linux

package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/computer"
)

// noSandboxHere is why Computers are not sandboxed off Linux.
var noSandboxHere = "bubblewrap sandboxes need Linux namespaces; on " + runtime.GOOS + " there is no sandbox"

// Provider runs Computers on this machine. Off Linux it has no sandbox:
// with Unsafe its processes run as plain host processes in the Computer's
// directory, and without Unsafe New refuses.
type Provider struct {
	opts Options
	log  *slog.Logger
}

// New returns a provider of plain host processes when opts.Unsafe is set,
// and ErrNoSandbox otherwise: off Linux nothing can sandbox them.
func New(opts Options) (*Provider, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if !opts.Unsafe {
		return nil, fmt.Errorf("%w: %s (run with --unsafe-no-sandbox to run agent processes unisolated on the host)", ErrNoSandbox, noSandboxHere)
	}
	abs, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	opts.Dir = abs
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, err
	}
	p := &Provider{opts: opts, log: opts.Logger}
	p.log.Warn("computers are NOT sandboxed: agent processes run as plain host processes with the control plane's rights", "reason", noSandboxHere)
	p.log.Warn("computers: resource limits are not enforced", "reason", "cgroups need Linux; this is "+runtime.GOOS+"; disk limits are not enforced either")
	return p, nil
}

// Kind is always "unsafe" off Linux.
func (p *Provider) Kind() string { return KindUnsafe }

// Unsandboxed says why processes are not sandboxed (never "" off Linux).
func (p *Provider) Unsandboxed() string { return noSandboxHere }

// Limits is "": no resource limits off Linux.
func (p *Provider) Limits() string { return "" }

// LimitsWhy says why resource limits are off.
func (p *Provider) LimitsWhy() string { return "cgroups need Linux; this is " + runtime.GOOS }

// LimitsDir is "": there are no cgroups.
func (p *Provider) LimitsDir() string { return "" }

// Cleanup does nothing: no cgroups were made.
func (p *Provider) Cleanup() {}

func (p *Provider) dir(id string) (string, error) {
	if !helmrtype.ValidName(id) {
		return "", fmt.Errorf("local: invalid computer id %q", id)
	}
	return filepath.Join(p.opts.Dir, id), nil
}

// Create makes the Computer's workspace and tmp directories.
func (p *Provider) Create(ctx context.Context, spec computer.Spec) error {
	d, err := p.dir(spec.ID)
	if err != nil {
		return err
	}
	for _, sub := range []string{"workspace", "tmp"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// Delete removes the Computer's files.
func (p *Provider) Delete(ctx context.Context, id string) error {
	d, err := p.dir(id)
	if err != nil {
		return err
	}
	return os.RemoveAll(d)
}

// Start runs a process of the Computer as a plain host process, in its
// own session and process group.
func (p *Provider) Start(ctx context.Context, spec computer.Spec, ps computer.ProcessSpec) (computer.Process, error) {
	d, err := p.dir(spec.ID)
	if err != nil {
		return nil, err
	}
	if len(ps.Argv) == 0 {
		return nil, errors.New("local: no command")
	}
	ws, tmp := filepath.Join(d, "workspace"), filepath.Join(d, "tmp")
	if _, err := os.Stat(ws); err != nil {
		return nil, fmt.Errorf("local: computer %s does not exist (create it first): %w", spec.ID, err)
	}
	dir := ps.Dir
	if dir == "" {
		dir = spec.Image.Workdir
	}
	if dir == "" {
		dir = computer.Workspace
	}
	cmd, err := p.unsafeCommand(ws, tmp, dir, environment(spec.Image, ps.Env), ps)
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
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("local: start %s: %w", ps.Argv[0], err)
	}
	pr := newProcess(cmd, p)
	go pr.wait()
	return pr, nil
}

// RunStep refuses: image build steps need a bubblewrap sandbox.
func (p *Provider) RunStep(ctx context.Context, root string, argv, env []string, workdir, user string) error {
	return errors.New("local: image build steps need a sandbox (bubblewrap on Linux); this host runs unsandboxed")
}

// Unenforced lists the limits r sets ("cpu", "memory", "processes",
// "disk"): none is enforced off Linux.
func (p *Provider) Unenforced(r helmrtype.ResourcesManifest) []string {
	return unenforced(r, false, false)
}
