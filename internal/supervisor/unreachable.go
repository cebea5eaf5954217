package supervisor

import (
	"context"
	"errors"
	"time"

	"github.com/helmr-go/helmr/internal/store"
)

// While the database is unreachable. A session process's write (an output
// record, a settlement, a question, a Token, a wait, a message's
// acceptance) that fails only because the store cannot reach the database
// is tried again, with backoff, the process kept waiting for its ack,
// until the database is back; only after DefaultUnreachableRetry (on a
// node sharing its database, the lease TTL: another node may take the
// Session over by then) is the error final, and the Turn lost. A Turn
// that finished during a short outage completes as if nothing happened.

// DefaultUnreachableRetry bounds how long a single node tries a write of a
// session process again while the database is unreachable.
const DefaultUnreachableRetry = 2 * time.Minute

// unreachableBackoff is the longest pause between two tries.
const unreachableBackoff = 2 * time.Second

// unreachableLimit is how long a write is tried again.
func (s *Supervisor) unreachableLimit() time.Duration {
	if s.clustered() {
		return s.opts.LeaseTTL
	}
	return DefaultUnreachableRetry
}

// retrying runs op until it does not fail with store.ErrUnavailable, ctx
// ends (the connection or the supervisor), or s's limit has passed since
// its first failure; it returns op's last outcome. Meanwhile process p
// (nil for none) waits for the store: it is not suspended (its lifecycle's
// evStoreWait and evStoreBack).
func retrying[T any](ctx context.Context, s *Supervisor, p *proc, op func() (T, error)) (T, error) {
	var deadline time.Time
	pause := 50 * time.Millisecond
	waiting := false
	defer func() {
		if waiting {
			s.step(p, event{kind: evStoreBack})
		}
	}()
	for {
		v, err := op()
		if err == nil || !errors.Is(err, store.ErrUnavailable) {
			return v, err
		}
		now := s.clock.Now()
		if deadline.IsZero() {
			deadline = now.Add(s.unreachableLimit())
			if p != nil {
				waiting = true
				s.step(p, event{kind: evStoreWait})
			}
		}
		if !now.Before(deadline) {
			return v, err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		pause = min(pause*2, unreachableBackoff)
	}
}

// retryingErr is retrying for an op with no value.
func retryingErr(ctx context.Context, s *Supervisor, p *proc, op func() error) error {
	_, err := retrying(ctx, s, p, func() (struct{}, error) { return struct{}{}, op() })
	return err
}
