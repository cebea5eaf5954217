//go:build !unix

package local

import (
	"context"
	"errors"
	"runtime"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/computer"
)

// ErrUnsupportedOS is returned by New where Computers cannot run at all
// (Windows): helmr dev and helmr server need Linux, or macOS for dev.
var ErrUnsupportedOS = errors.New("local: Computers cannot run on " + runtime.GOOS + ": helmr server needs Linux and helmr dev Linux or macOS; the CLI's client commands work here")

// Provider is never made on this operating system: New refuses.
type Provider struct{}

// New returns ErrUnsupportedOS.
func New(opts Options) (*Provider, error) { return nil, ErrUnsupportedOS }

// Kind is "unsafe": no sandbox exists here.
func (p *Provider) Kind() string { return KindUnsafe }

// Unsandboxed says why processes would not be sandboxed.
func (p *Provider) Unsandboxed() string { return ErrUnsupportedOS.Error() }

// Limits is "": no resource limits here.
func (p *Provider) Limits() string { return "" }

// LimitsWhy says why resource limits are off.
func (p *Provider) LimitsWhy() string { return ErrUnsupportedOS.Error() }

// LimitsDir is "": there are no cgroups.
func (p *Provider) LimitsDir() string { return "" }

// Cleanup does nothing.
func (p *Provider) Cleanup() {}

// Create returns ErrUnsupportedOS.
func (p *Provider) Create(ctx context.Context, spec computer.Spec) error { return ErrUnsupportedOS }

// Start returns ErrUnsupportedOS.
func (p *Provider) Start(ctx context.Context, spec computer.Spec, ps computer.ProcessSpec) (computer.Process, error) {
	return nil, ErrUnsupportedOS
}

// Delete returns ErrUnsupportedOS.
func (p *Provider) Delete(ctx context.Context, id string) error { return ErrUnsupportedOS }

// RunStep returns ErrUnsupportedOS.
func (p *Provider) RunStep(ctx context.Context, root string, argv, env []string, workdir, user string) error {
	return ErrUnsupportedOS
}

// Unenforced lists the limits r sets: none is enforced here.
func (p *Provider) Unenforced(r helmrtype.ResourcesManifest) []string {
	return unenforced(r, false, false)
}
