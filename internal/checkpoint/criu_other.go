//go:build !linux

package checkpoint

import (
	"context"
	"log/slog"

	"github.com/helmr-go/helmr/helmrtype"
)

// Probe says that checkpoints need Linux: CRIU runs there alone.
func Probe(ctx context.Context, path string, log *slog.Logger) (*CRIU, error) {
	return nil, helmrtype.Errorf(CodeUnsupported, "checkpoints need Linux (CRIU)")
}

// Dump says that checkpoints need Linux.
func (c *CRIU) Dump(ctx context.Context, pid int, dir string, opts DumpOptions) (*Checkpoint, error) {
	return nil, helmrtype.Errorf(CodeUnsupported, "checkpoints need Linux (CRIU)")
}

// Restore says that checkpoints need Linux.
func (c *CRIU) Restore(ctx context.Context, dir string, opts RestoreOptions) (*Restored, error) {
	return nil, helmrtype.Errorf(CodeUnsupported, "checkpoints need Linux (CRIU)")
}
