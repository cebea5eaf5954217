// Package timers parks a Turn on time: durably (the due time is in the
// control plane's store, so it fires after a restart too), and without
// keeping the process busy (past the wait's idle timeout the process may be
// suspended; the control plane wakes it when the timer fires).
package timers

import (
	"context"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/sessionproc"
)

// Options tune a timer wait.
type Options struct {
	// IdleTimeout is how long the process stays hot (1ms–1h; default the
	// Agent's, else 30s).
	IdleTimeout string
}

// WaitFor waits d. ctx must be the running Turn's context (or derive from
// it); the wait ends early with ctx's cause when it ends.
func WaitFor(ctx context.Context, d time.Duration, opts ...Options) error {
	return WaitUntil(ctx, time.Now().Add(d), opts...)
}

// WaitUntil waits until t, by the control plane's clock.
func WaitUntil(ctx context.Context, t time.Time, opts ...Options) error {
	rt := sessionproc.TurnFrom(ctx)
	if rt == nil {
		return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "timers: ctx is not a running turn's context")
	}
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	u := t.UTC()
	out, err := rt.Wait(ctx, helmrtype.WaitStart{Kind: helmrtype.WaitTimer, Until: &u, IdleTimeout: o.IdleTimeout})
	if err != nil {
		return err
	}
	if out.Status != helmrtype.OutcomeResolved {
		return out.Error
	}
	return nil
}
