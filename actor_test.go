package helmr

import (
	"context"
	"errors"
	"testing"
)

// A stopping session process cancels Run's ctx and closes the stopping
// channel at once; Receive must report the normal end every time, not the
// ctx's error in about half of the calls.
func TestActorReceiveReturnsNilWhenTheProcessStops(t *testing.T) {
	ctx, stop := context.WithCancelCause(context.Background())
	s := &ActorSession[struct{}, struct{}]{incoming: make(chan *ActorTurn[struct{}, struct{}]), stopping: ctx.Done()}
	stop(errors.New("shutdown"))
	derived, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range 200 {
		for _, c := range []context.Context{ctx, derived} {
			if turn, err := s.Receive(c); turn != nil || err != nil {
				t.Fatalf("receive %d after stop = (%v, %v), want (nil, nil)", i, turn, err)
			}
		}
	}
}

// A ctx of the caller's own that ends while the process runs is a real
// end of the wait: Receive returns its cause.
func TestActorReceiveReturnsTheCallersContextError(t *testing.T) {
	s := &ActorSession[struct{}, struct{}]{incoming: make(chan *ActorTurn[struct{}, struct{}]), stopping: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if turn, err := s.Receive(ctx); turn != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("receive = (%v, %v), want context.Canceled", turn, err)
	}
}
