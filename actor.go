package helmr

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/sessionproc"
)

// ActorSession is what an Actor's Run receives: the Session's Turns, one at
// a time in FIFO order.
//
//	Run: func(ctx context.Context, s *helmr.ActorSession[In, Out], ac *helmr.AgentContext[St]) error {
//		for {
//			t, err := s.Receive(ctx)
//			if t == nil || err != nil {
//				return err // nil: the session process is stopping
//			}
//			t.Output.Write(t.Context(), "working\n")
//			t.Complete(Out{…})
//		}
//	}
type ActorSession[I, R any] struct {
	incoming chan *ActorTurn[I, R]
	stopping <-chan struct{}

	mu   sync.Mutex
	last *ActorTurn[I, R]
}

// ActorTurn is one Turn an Actor received. Finish it with Complete or Fail;
// the next Receive completes it (with the zero result) if neither was
// called. Use its Context for work on it: it ends when the Turn is
// interrupted or reaches its deadline.
type ActorTurn[I, R any] struct {
	*Turn[I]
	ctx  context.Context
	once sync.Once
	done chan actorResult[R]
}

type actorResult[R any] struct {
	result R
	err    error
}

// Context is the Turn's signal.
func (t *ActorTurn[I, R]) Context() context.Context { return t.ctx }

// Complete finishes the Turn with result (validated like a handler's). Only
// the first Complete or Fail counts.
func (t *ActorTurn[I, R]) Complete(result R) { t.finish(actorResult[R]{result: result}) }

// Fail finishes the Turn as failed with err (or interrupted, when its
// context was cancelled).
func (t *ActorTurn[I, R]) Fail(err error) {
	if err == nil {
		err = helmrtype.Errorf(helmrtype.CodeHandlerFailed, "the actor failed the turn")
	}
	t.finish(actorResult[R]{err: err})
}

func (t *ActorTurn[I, R]) finish(r actorResult[R]) {
	t.once.Do(func() { t.done <- r })
}

// Receive waits for the Session's next Turn. It first completes the
// previous Turn if the Actor did not finish it. It returns (nil, nil) when
// the session process is stopping (shutdown, or the Session closing) — a
// normal end of the loop, not an error — and ctx's error when ctx ends
// first. While it waits, the process stays hot for the Agent's IdleTimeout
// and may then be suspended until a Turn arrives.
func (s *ActorSession[I, R]) Receive(ctx context.Context) (*ActorTurn[I, R], error) {
	s.mu.Lock()
	if s.last != nil {
		var zero R
		s.last.Complete(zero)
		s.last = nil
	}
	s.mu.Unlock()
	select {
	case t := <-s.incoming:
		s.mu.Lock()
		s.last = t
		s.mu.Unlock()
		return t, nil
	case <-s.stopping:
		return nil, nil
	case <-ctx.Done():
		// Run's ctx is the process's, so a stop closes both channels and
		// select may pick either: a stop is still a normal end.
		select {
		case <-s.stopping:
			return nil, nil
		default:
		}
		return nil, context.Cause(ctx)
	}
}

// actor runs an Actor's Run loop in a session process and hands it Turns.
type actor[I, R, S any] struct {
	a       runtimeAgent[I, R, S]
	session *ActorSession[I, R]
	exited  chan struct{}
	err     error
}

// startActor starts Run once init is done.
func startActor[I, R, S any](a runtimeAgent[I, R, S], info *sessionproc.Info, s S) *actor[I, R, S] {
	act := &actor[I, R, S]{a: a, exited: make(chan struct{}),
		session: &ActorSession[I, R]{incoming: make(chan *ActorTurn[I, R]), stopping: info.Ctx.Done()}}
	ac := &AgentContext[S]{InitContext: newInitContext(info), InitResult: s}
	go func() {
		defer close(act.exited)
		defer func() {
			if r := recover(); r != nil {
				act.err = helmrtype.Errorf(helmrtype.CodeHandlerFailed, "the actor's Run panicked: %v", r)
			}
		}()
		act.err = a.d.spec.Run(info.Ctx, act.session, ac)
	}()
	return act
}

// turn hands one Turn to the Actor and waits until it finishes it. It does
// not return early when the Turn is cancelled: the Actor drains it (the
// session process's cleanup period bounds that).
func (act *actor[I, R, S]) turn(ctx context.Context, rt *sessionproc.Turn) (json.RawMessage, error) {
	t, err := act.a.newTurn(ctx, rt)
	if err != nil {
		return nil, err
	}
	at := &ActorTurn[I, R]{Turn: t, ctx: ctx, done: make(chan actorResult[R], 1)}
	select {
	case act.session.incoming <- at:
	case <-act.exited:
		return nil, act.exitError()
	}
	select {
	case r := <-at.done:
		if r.err != nil {
			return nil, r.err
		}
		return act.a.encodeResult(ctx, r.result)
	case <-act.exited:
		// Run returned while holding the Turn.
		select {
		case r := <-at.done:
			if r.err != nil {
				return nil, r.err
			}
			return act.a.encodeResult(ctx, r.result)
		default:
		}
		return nil, act.exitError()
	}
}

func (act *actor[I, R, S]) exitError() error {
	if act.err != nil {
		return helmrtype.Errorf(helmrtype.CodeHandlerFailed, "the actor's Run ended: %v", act.err)
	}
	return helmrtype.Errorf(helmrtype.CodeHandlerFailed, "the actor's Run returned; it receives no more turns")
}
