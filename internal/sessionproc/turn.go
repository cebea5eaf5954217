package sessionproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/protocol"
)

// Message is a message delivered to a running Turn.
type Message = protocol.InboundMessage

// Turn is one running Turn inside the process.
type Turn struct {
	ID        string
	Sequence  int64
	CreatedAt time.Time
	Input     json.RawMessage
	Source    helmrtype.InputSource
	Deadline  *time.Time

	c    *Conn
	info *Info
	ctx  context.Context
	end  context.CancelCauseFunc
	ops  atomic.Int64
	opMu sync.Mutex

	mu         sync.Mutex
	cancelled  bool
	closed     bool // drainage finished; no more callbacks
	callbacks  sync.WaitGroup
	cbFailed   atomic.Bool
	onCancel   []func(context.Context, error) error
	cancelCtx  context.Context
	outputUsed int64
	response   json.RawMessage // staged response, nil when none
	// trace records the Turn's spans; nil when the Turn is not traced.
	trace *turnTrace

	msgMu      sync.Mutex
	msgHandler func(context.Context, Message) error
	msgQueue   []Message
	msgSeen    map[string]bool
	msgWake    chan struct{}
	msgDone    chan struct{}
}

func newTurn(c *Conn, ts *protocol.TurnStart, info *Info) *Turn {
	procCtx := info.Ctx
	t := &Turn{ID: ts.ID, Sequence: ts.Sequence, CreatedAt: ts.CreatedAt, Input: ts.Input, Source: ts.Source,
		Deadline: ts.Deadline, c: c, info: info, msgSeen: map[string]bool{}, msgWake: make(chan struct{}, 1), msgDone: make(chan struct{})}
	if ts.TraceParent != "" {
		t.trace = newTurnTrace(c, ts.ID)
	}
	ctx, end := context.WithCancelCause(context.WithValue(context.WithoutCancel(procCtx), turnKey{}, t))
	if ts.Deadline != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, *ts.Deadline, ErrDeadline)
		_ = cancel // released when end is called
		prev := end
		end = func(cause error) { prev(cause); cancel() }
	}
	t.ctx, t.end = ctx, end
	return t
}

// Info describes the Session the Turn runs in.
func (t *Turn) Info() *Info { return t.info }

// Context is the Turn's signal: it ends on interrupt, deadline, shutdown or failure.
func (t *Turn) Context() context.Context { return t.ctx }

// call numbers an operation of this Turn and sends it, then waits for its
// ack. Numbering and sending happen under one lock, so operations reach the
// server in op order even when goroutines of the handler write at once (the
// server applies an op only if it is above the last one applied).
func (t *Turn) call(ctx context.Context, m *protocol.Msg) (*protocol.Msg, error) {
	t.opMu.Lock()
	m.TurnID, m.Op = t.ID, t.ops.Add(1)
	ch, err := t.c.send(ctx, m)
	t.opMu.Unlock()
	if err != nil {
		return nil, err
	}
	return t.c.await(ctx, ch)
}

// cancel ends the Turn's ctx and starts its cancellation callbacks.
func (t *Turn) cancel(cause error) {
	t.end(cause)
}

// OnCancel registers a callback run on interruption, deadline, shutdown or
// handler failure, concurrently with the handler's drainage. A callback
// registered after cancellation starts at once; after drainage closed it is
// refused.
func (t *Turn) OnCancel(fn func(ctx context.Context, reason error) error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return helmrtype.Errorf(helmrtype.CodeTurnSettled, "the turn has settled; OnCancel is closed")
	}
	if t.cancelled {
		t.startCallback(fn, context.Cause(t.ctx))
		return nil
	}
	t.onCancel = append(t.onCancel, fn)
	return nil
}

// startCallback runs one cancellation callback; t.mu is held.
func (t *Turn) startCallback(fn func(context.Context, error) error, reason error) {
	t.callbacks.Add(1)
	go func() {
		defer t.callbacks.Done()
		defer func() {
			if r := recover(); r != nil {
				t.cbFailed.Store(true)
			}
		}()
		if err := fn(t.cancelCtx, reason); err != nil {
			t.cbFailed.Store(true)
		}
	}()
}

// startCancellation runs every registered callback once.
func (t *Turn) startCancellation(reason error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cancelled {
		return
	}
	t.cancelled = true
	for _, fn := range t.onCancel {
		t.startCallback(fn, reason)
	}
	t.onCancel = nil
}

// Output appends content to the Turn's output and returns its sequence.
func (t *Turn) Output(ctx context.Context, content helmrtype.Content) (int64, error) {
	if err := content.Check(); err != nil {
		return 0, err
	}
	size := int64(content.EncodedSize())
	t.mu.Lock()
	if t.outputUsed+size > helmrtype.MaxTurnOutputBytes {
		t.mu.Unlock()
		return 0, helmrtype.Errorf(helmrtype.CodeLimitExceeded, "output: the turn's output budget of %d bytes would be exceeded", helmrtype.MaxTurnOutputBytes)
	}
	t.outputUsed += size
	t.mu.Unlock()
	sp := t.startSpan(ctx, protocol.SpanOutput)
	a, err := t.call(ctx, &protocol.Msg{Type: protocol.TypeOutput, Content: content})
	if sp != nil {
		sp.SetAttribute("helmr.output.parts", len(content))
		sp.SetAttribute("helmr.output.bytes", size)
		if err == nil {
			sp.SetAttribute("helmr.output.sequence", a.Sequence)
		}
		sp.SetError(err)
		sp.End()
	}
	if err != nil {
		t.mu.Lock()
		t.outputUsed -= size
		t.mu.Unlock()
		return 0, err
	}
	return a.Sequence, nil
}

// Respond stages the Turn's response; a second call fails with
// response_already_staged. The response travels with the Turn's settlement
// and is published only if the Turn completes, so staging needs no round
// trip: a process lost before settling loses the Turn (failed or
// interrupted) and with it any staged response.
func (t *Turn) Respond(ctx context.Context, content helmrtype.Content) error {
	if content == nil {
		content = helmrtype.Content{}
	}
	if len(content) > helmrtype.MaxContentParts {
		return helmrtype.Errorf(helmrtype.CodeLimitExceeded, "response has %d parts; the limit is %d", len(content), helmrtype.MaxContentParts)
	}
	raw, err := json.Marshal(content)
	if err != nil {
		return helmrtype.Errorf(helmrtype.CodeOutputInvalid, "response: %v", err)
	}
	if len(raw) > helmrtype.MaxResponseBytes {
		return helmrtype.Errorf(helmrtype.CodeLimitExceeded, "response is %d bytes of JSON; the limit is %d", len(raw), helmrtype.MaxResponseBytes)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return helmrtype.Errorf(helmrtype.CodeTurnSettled, "the turn's handler has returned; no response is admitted")
	}
	if t.response != nil {
		return helmrtype.Errorf(helmrtype.CodeResponseAlreadyStaged, "turn %s already has a staged response", t.ID)
	}
	t.response = raw
	return nil
}

// OnMessage registers the handler for messages sent to this Turn; they are
// delivered one at a time, including those that arrived before.
func (t *Turn) OnMessage(fn func(context.Context, Message) error) error {
	t.msgMu.Lock()
	defer t.msgMu.Unlock()
	if t.msgHandler != nil {
		return helmrtype.Errorf(helmrtype.CodeConflict, "the turn already has a message handler")
	}
	t.msgHandler = fn
	go t.pumpMessages()
	return nil
}

func (t *Turn) enqueueMessage(m Message) {
	t.msgMu.Lock()
	if t.msgSeen[m.ID] {
		t.msgMu.Unlock()
		return
	}
	t.msgSeen[m.ID] = true
	t.msgQueue = append(t.msgQueue, m)
	t.msgMu.Unlock()
	select {
	case t.msgWake <- struct{}{}:
	default:
	}
}

func (t *Turn) pumpMessages() {
	for {
		t.msgMu.Lock()
		var m *Message
		if len(t.msgQueue) > 0 {
			m = &t.msgQueue[0]
			t.msgQueue = t.msgQueue[1:]
		}
		fn := t.msgHandler
		t.msgMu.Unlock()
		if m == nil {
			select {
			case <-t.msgWake:
				continue
			case <-t.msgDone:
				return
			}
		}
		if t.ctx.Err() != nil {
			return
		}
		err := safeMessage(t.ctx, fn, *m)
		var r Rejecter
		switch {
		case err == nil:
			t.call(t.ctx, &protocol.Msg{Type: protocol.TypeMessageAccept, MessageID: m.ID})
		case errors.As(err, &r) && r.RejectsMessage():
			t.call(t.ctx, &protocol.Msg{Type: protocol.TypeMessageReject, MessageID: m.ID,
				Reason: string(helmrtype.CodeMessageRejected), Error: &helmrtype.Error{Code: helmrtype.CodeMessageRejected, Message: err.Error()}})
		default:
			t.call(t.ctx, &protocol.Msg{Type: protocol.TypeMessageReject, MessageID: m.ID,
				Reason: string(helmrtype.CodeCallbackFailed), Error: &helmrtype.Error{Code: helmrtype.CodeCallbackFailed, Message: err.Error()}})
			t.end(&helmrtype.Error{Code: helmrtype.CodeCallbackFailed, Message: "a message handler failed: " + err.Error()})
			return
		}
	}
}

func safeMessage(ctx context.Context, fn func(context.Context, Message) error, m Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("message handler panicked: %v", r)
		}
	}()
	return fn(ctx, m)
}

type handlerResult struct {
	result json.RawMessage
	err    error
}

// runTurn runs the handler, joins cancellation work within the cleanup
// period, and settles the Turn. It reports whether the process must exit
// because cleanup failed.
func (c *Conn) runTurn(t *Turn, a Agent, initResult any) (exit bool) {
	done := make(chan handlerResult, 1)
	c.workers.run(func() {
		defer func() {
			if r := recover(); r != nil {
				done <- handlerResult{err: fmt.Errorf("the turn handler panicked: %v", r)}
			}
		}()
		res, err := a.RunTurn(t.ctx, t, initResult)
		done <- handlerResult{res, err}
	})

	var hr handlerResult
	var handlerReturned bool
	select {
	case hr = <-done:
		handlerReturned = true
	case <-t.ctx.Done():
	}
	cause := context.Cause(t.ctx)
	if handlerReturned && cause == nil && helmrtype.CodeOf(hr.err) == helmrtype.CodeResultInvalid {
		// The handler completed; only its result was refused. Nothing is
		// cancelled, so cancellation callbacks do not run.
		t.close()
		c.settle(t, helmrtype.TurnFailed, nil, asError(hr.err, helmrtype.CodeResultInvalid))
		return false
	}
	if handlerReturned && cause == nil && hr.err == nil {
		// Success: cancellation callbacks do not run.
		t.close()
		c.settle(t, helmrtype.TurnCompleted, hr.result, nil)
		return false
	}
	if cause == nil {
		cause = hr.err
	}
	// Cancellation or handler failure: callbacks run alongside drainage and
	// everything joins within the cleanup period.
	cleanupCtx, cancel := context.WithTimeout(context.Background(), CleanupPeriod)
	defer cancel()
	t.mu.Lock()
	t.cancelCtx = cleanupCtx
	t.mu.Unlock()
	t.end(cause)
	t.startCancellation(cause)
	if !handlerReturned {
		select {
		case hr = <-done:
			handlerReturned = true
		case <-cleanupCtx.Done():
		}
	}
	joined := make(chan struct{})
	go func() { t.callbacks.Wait(); close(joined) }()
	select {
	case <-joined:
	case <-cleanupCtx.Done():
	}
	overran := cleanupCtx.Err() != nil
	t.close()

	status, terr := helmrtype.TurnFailed, asError(cause, helmrtype.CodeHandlerFailed)
	switch {
	case errors.Is(cause, ErrInterrupted), errors.Is(cause, ErrShutdown):
		status, terr = helmrtype.TurnInterrupted, asError(cause, helmrtype.CodeInterrupted)
	case errors.Is(cause, ErrDeadline), errors.Is(cause, context.DeadlineExceeded) && t.Deadline != nil:
		status, terr = helmrtype.TurnInterrupted, ErrDeadline
	}
	if overran || t.cbFailed.Load() {
		exit = true
		why := "a cancellation callback failed"
		if overran {
			why = "the handler and callbacks did not drain within the cleanup period"
		}
		terr = &helmrtype.Error{Code: helmrtype.CodeCleanupFailed, Message: why + " (" + terr.Message + ")"}
	}
	c.settle(t, status, nil, terr)
	return exit
}

// close ends drainage: no more callbacks or messages.
func (t *Turn) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.msgMu.Lock()
	select {
	case <-t.msgDone:
	default:
		close(t.msgDone)
	}
	t.msgMu.Unlock()
}

func (c *Conn) settle(t *Turn, status string, result json.RawMessage, terr *helmrtype.Error) error {
	if t.trace != nil {
		var failure error
		if terr != nil {
			failure = terr
		}
		t.trace.settle(status, failure)
	}
	m := &protocol.Msg{Type: protocol.TypeSettle, Status: status, Result: result, Error: terr}
	if status == helmrtype.TurnCompleted {
		t.mu.Lock()
		m.Response = t.response
		t.mu.Unlock()
	}
	_, err := t.call(context.Background(), m)
	t.end(nil)
	return err
}
