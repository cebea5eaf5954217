package helmr

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/sessionproc"
)

// Turn is one admitted input being handled. The handler's ctx is the Turn's
// signal: it ends when the Turn is interrupted, reaches its deadline, the
// process shuts down, or the Turn fails.
type Turn[I any] struct {
	ID        string
	Sequence  int64
	CreatedAt time.Time
	Input     I
	Source    InputSource
	// Output appends human-facing output to the Turn.
	Output *Output

	rt *sessionproc.Turn
}

// OutputReceipt acknowledges durable output: its timeline sequence.
type OutputReceipt struct {
	Sequence int64
}

// Output is a Turn's output stream.
type Output struct {
	rt *sessionproc.Turn
}

// toContent converts HumanContent (a string or Content) to Content.
func toContent(v any) (Content, error) {
	switch c := v.(type) {
	case string:
		return Text(c), nil
	case Content:
		if c == nil {
			return Content{}, nil
		}
		if err := c.Check(); err != nil {
			return nil, err
		}
		return c, nil
	case []ContentPart:
		return toContent(Content(c))
	case nil:
		return nil, helmrtype.Errorf(helmrtype.CodeOutputInvalid, "content is nil; use \"\" or Content{}")
	}
	return nil, helmrtype.Errorf(helmrtype.CodeOutputInvalid, "content must be a string or helmr.Content, not %T", v)
}

// Write appends a string or Content to the Turn's output. It returns once
// the output is durable. Adjacent text concatenates exactly.
func (o *Output) Write(ctx context.Context, v any) (OutputReceipt, error) {
	c, err := toContent(v)
	if err != nil {
		return OutputReceipt{}, err
	}
	seq, err := o.rt.Output(ctx, c)
	return OutputReceipt{Sequence: seq}, err
}

// Pipe appends each item of src in order and returns when src is exhausted.
// src is an iter.Seq or a receive channel of string or Content. An item
// rejected for a limit stops the pipe; the accepted prefix stays.
func (o *Output) Pipe(ctx context.Context, src any) error {
	write := func(v any) error {
		_, err := o.Write(ctx, v)
		return err
	}
	switch s := src.(type) {
	case iter.Seq[string]:
		return pipeSeq(ctx, s, write)
	case iter.Seq[Content]:
		return pipeSeq(ctx, s, write)
	case <-chan string:
		return pipeChan(ctx, s, write)
	case chan string:
		return pipeChan(ctx, (<-chan string)(s), write)
	case <-chan Content:
		return pipeChan(ctx, s, write)
	case chan Content:
		return pipeChan(ctx, (<-chan Content)(s), write)
	}
	return helmrtype.Errorf(helmrtype.CodeOutputInvalid, "Pipe takes an iter.Seq or channel of string or helmr.Content, not %T", src)
}

func pipeSeq[T any](ctx context.Context, s iter.Seq[T], write func(any) error) error {
	for v := range s {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		if err := write(v); err != nil {
			return err
		}
	}
	return nil
}

func pipeChan[T any](ctx context.Context, ch <-chan T, write func(any) error) error {
	for {
		select {
		case v, ok := <-ch:
			if !ok {
				return nil
			}
			if err := write(v); err != nil {
				return err
			}
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// Respond stages the Turn's human response (a string or Content), published
// only if the Turn completes. Call it at most once: a second call fails with
// response_already_staged. "" records an explicit empty response.
func (t *Turn[I]) Respond(ctx context.Context, v any) error {
	c, err := toContent(v)
	if err != nil {
		return err
	}
	return t.rt.Respond(ctx, c)
}

// OnCancel registers cleanup that runs when the Turn is interrupted, reaches
// its deadline, the process shuts down, or the handler fails; it runs
// alongside the handler's drainage and both share a 10 s cleanup period
// (ctx carries it). A callback that fails or overruns makes the Session's
// process unusable.
func (t *Turn[I]) OnCancel(fn func(ctx context.Context, reason error) error) error {
	return t.rt.OnCancel(fn)
}

// Message is a message sent to exactly this Turn.
type Message struct {
	ID      string
	Content InputContent
	Source  InputSource
}

// OnMessage registers the handler for messages sent to this Turn. Messages
// are delivered one at a time. Return MessageRejected to reject one without
// failing the Turn; any other error fails the Turn.
func (t *Turn[I]) OnMessage(ctx context.Context, fn func(ctx context.Context, m Message) error) error {
	return t.rt.OnMessage(func(ctx context.Context, m sessionproc.Message) error {
		return fn(ctx, Message{ID: m.ID, Content: m.Content, Source: m.Source})
	})
}

// MessageRejected rejects a message from an OnMessage handler: the Session
// records message.rejected with reason message_rejected and the Turn goes
// on. Match it with errors.As.
type MessageRejected struct {
	Reason string
}

// RejectMessage returns a MessageRejected error with a reason.
func RejectMessage(format string, args ...any) error {
	return &MessageRejected{Reason: fmt.Sprintf(format, args...)}
}

func (e *MessageRejected) Error() string { return "message rejected: " + e.Reason }

// RejectsMessage marks the error as a message rejection for the runtime.
func (e *MessageRejected) RejectsMessage() bool { return true }

// IsMessageRejected reports whether err is (or wraps) a message rejection.
func IsMessageRejected(err error) bool {
	var r interface{ RejectsMessage() bool }
	return errors.As(err, &r) && r.RejectsMessage()
}
