package helmr

import (
	"context"

	"github.com/helmr-go/helmr/internal/sessionproc"
)

// Span is a span in a Turn's trace, which agent code starts with
// StartSpan. Its methods are SetAttribute(key, value), SetError(err) and
// End(); on a nil Span (an untraced Turn) they do nothing.
type Span = sessionproc.Span

// StartSpan starts a span named name in the running Turn's trace, under the
// span in ctx (the Turn's handler span for the ctx the handler got), and
// returns a ctx carrying it for nested spans. End the span before the
// handler returns; a span not ended by then is not exported. When the
// control plane does not trace the Turn it returns ctx and a nil Span.
func StartSpan(ctx context.Context, name string) (context.Context, *Span) {
	return sessionproc.StartSpan(ctx, name)
}
