//go:build !linux

package freezer

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
)

// KindNone is the Kind of the freezer off Linux: it freezes nothing.
const KindNone = "none"

// ErrUnsupported is returned by Attach off Linux: freezing a process tree
// needs Linux (cgroups and /proc).
var ErrUnsupported = errors.New("freezer: freezing process trees needs Linux (this is " + runtime.GOOS + ")")

// New returns a freezer whose Attach fails with ErrUnsupported: off Linux
// suspended waits keep their process running. log hears that once.
func New(log *slog.Logger, root string) Freezer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log.Warn("freezer: no freezer on this operating system; suspended waits keep their session process running", "os", runtime.GOOS)
	return noFreezer{}
}

type noFreezer struct{}

func (noFreezer) Kind() string { return KindNone }

func (noFreezer) Attach(ctx context.Context, name string, pid, pgid int) (Handle, error) {
	return nil, ErrUnsupported
}

// Cleanup does nothing off Linux: no cgroup was made.
func Cleanup(f Freezer) {}

// NestUnder does nothing off Linux: there are no cgroups.
func NestUnder(f Freezer, dirs ...string) {}
