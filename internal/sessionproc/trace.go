package sessionproc

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/helmr-go/helmr/internal/protocol"
)

// Tracing inside the process: when turn.start carries a traceparent, the
// Turn records spans (its handler, each output and wait, and those agent
// code starts with StartSpan) and ships them to the control plane in
// spans messages, which exports them in the Turn's trace. The process
// needs no network and no OpenTelemetry library; an untraced Turn records
// nothing.

// flushAt is how many finished spans are shipped at once, before the
// Turn settles.
const flushAt = 64

// turnTrace collects a traced Turn's finished spans.
type turnTrace struct {
	c       *Conn
	turnID  string
	handler *Span

	mu    sync.Mutex
	done  []protocol.Span
	total int
}

type spanKey struct{}

// Span is a span in a traced Turn; methods of a nil Span do nothing, so
// code need not care whether the Turn is traced.
type Span struct {
	tt    *turnTrace
	mu    sync.Mutex
	s     protocol.Span
	ended bool
}

func newTurnTrace(c *Conn, turnID string) *turnTrace {
	tt := &turnTrace{c: c, turnID: turnID}
	tt.handler = &Span{tt: tt, s: protocol.Span{SpanID: newSpanID(), Name: protocol.SpanHandler, Start: time.Now()}}
	return tt
}

func newSpanID() string {
	var b [8]byte
	for b == [8]byte{} {
		v := rand.Uint64()
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
	}
	return hex.EncodeToString(b[:])
}

// StartSpan starts a span under the span in ctx (the Turn's handler span
// when ctx carries none) and returns a ctx that carries it. Outside a
// traced Turn it returns ctx and a nil Span.
func StartSpan(ctx context.Context, name string) (context.Context, *Span) {
	sp := TurnFrom(ctx).startSpan(ctx, name)
	if sp == nil {
		return ctx, nil
	}
	return context.WithValue(ctx, spanKey{}, sp), sp
}

// startSpan starts a span under the span in ctx; nil when t is not traced.
func (t *Turn) startSpan(ctx context.Context, name string) *Span {
	if t == nil || t.trace == nil {
		return nil
	}
	parent := t.trace.handler
	if p, ok := ctx.Value(spanKey{}).(*Span); ok && p.tt == t.trace {
		parent = p
	}
	return &Span{tt: t.trace, s: protocol.Span{SpanID: newSpanID(), ParentID: parent.s.SpanID, Name: name, Start: time.Now()}}
}

// SetAttribute sets one of the span's attributes: a string, a bool or a
// number (anything else is recorded as its fmt.Sprint text).
func (s *Span) SetAttribute(key string, value any) {
	if s == nil {
		return
	}
	switch v := value.(type) {
	case string, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
	default:
		value = fmt.Sprint(v)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.s.Attributes == nil {
		s.s.Attributes = map[string]any{}
	}
	s.s.Attributes[key] = value
}

// SetError marks the span failed with err's text; nil does nothing.
func (s *Span) SetError(err error) {
	if s == nil || err == nil {
		return
	}
	s.mu.Lock()
	s.s.Error = err.Error()
	s.mu.Unlock()
}

// End ends the span; later calls do nothing. A span not ended when its
// Turn settles is not shipped.
func (s *Span) End() {
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	s.s.End = time.Now()
	sp := s.s
	s.mu.Unlock()
	s.tt.finished(sp)
}

// finished queues a finished span, and ships the queue once it is long.
func (tt *turnTrace) finished(sp protocol.Span) {
	tt.mu.Lock()
	if tt.total >= protocol.MaxSpansPerTurn {
		tt.mu.Unlock()
		return
	}
	tt.total++
	tt.done = append(tt.done, sp)
	var batch []protocol.Span
	if len(tt.done) >= flushAt {
		batch, tt.done = tt.done, nil
	}
	tt.mu.Unlock()
	tt.ship(batch)
}

// settle ends the handler span with the Turn's outcome and ships every
// finished span; it runs before turn.settle is sent.
func (tt *turnTrace) settle(status string, failure error) {
	tt.handler.SetAttribute("helmr.turn.status", status)
	tt.handler.SetError(failure)
	tt.handler.End()
	tt.mu.Lock()
	batch := tt.done
	tt.done = nil
	tt.mu.Unlock()
	tt.ship(batch)
}

func (tt *turnTrace) ship(batch []protocol.Span) {
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Telemetry only: a failed write loses these spans and nothing else.
	tt.c.write(ctx, &protocol.Msg{Type: protocol.TypeSpans, TurnID: tt.turnID, Spans: batch})
}
