package store

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// ErrUnavailable wraps the error of a store call that could not reach the
// database: the connection was refused, lost or shut down by the server.
// The call may be tried again once the database is back; an Update that
// failed so may or may not have committed only when its commit was cut
// off, which an idempotency key makes safe to repeat. Each store decides
// which of its driver's errors are so, in one place; callers test with
// errors.Is.
var ErrUnavailable = errors.New("store: the database is unreachable")

// Unavailable wraps err with ErrUnavailable (unless it already is).
func Unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	return &unavailableError{err: err}
}

// unavailableError is err marked with ErrUnavailable; its message is err's.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string   { return e.err.Error() }
func (e *unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.err} }

// Reachability is whether the database answers, as a Monitor last saw it.
type Reachability int

const (
	// Reachable: the last call that reached a verdict reached the database.
	Reachable Reachability = iota
	// Unreachable: the last call that reached a verdict failed with
	// ErrUnavailable.
	Unreachable
)

// String names r for logs.
func (r Reachability) String() string {
	if r == Unreachable {
		return "unreachable"
	}
	return "reachable"
}

// outcome is what one store call says about the database.
type outcome int

const (
	// outcomeAnswered: the database answered (a success, not found, a
	// constraint, any SQL error).
	outcomeAnswered outcome = iota
	// outcomeUnreachable: the call failed with ErrUnavailable.
	outcomeUnreachable
	// outcomeUnknown: the caller gave up (its ctx ended) before the
	// database could tell; no change.
	outcomeUnknown
)

// outcomeOf classifies a store call's error.
func outcomeOf(err error) outcome {
	switch {
	case err == nil:
		return outcomeAnswered
	case errors.Is(err, ErrUnavailable):
		return outcomeUnreachable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return outcomeUnknown
	}
	return outcomeAnswered
}

// transition is the Monitor's state machine: from state, after a call's
// outcome, the next state and whether the change is to be logged (a
// change of state, and nothing else, is).
func transition(state Reachability, o outcome) (next Reachability, changed bool) {
	switch {
	case state == Reachable && o == outcomeUnreachable:
		return Unreachable, true
	case state == Unreachable && o == outcomeAnswered:
		return Reachable, true
	}
	return state, false
}

// Monitor follows whether a store's database is reachable from the
// outcomes of its calls, and logs each change once: an error line when
// the database becomes unreachable (with the first error) and an info
// line when it answers again (with how long it was down), however many
// calls fail in between. A Monitor is safe for concurrent use.
type Monitor struct {
	log *slog.Logger
	now func() time.Time

	mu    sync.Mutex
	state Reachability
	// since is when the database became unreachable.
	since time.Time
	// failed counts the calls that failed while it was unreachable.
	failed int
}

// NewMonitor returns a Monitor, starting reachable, that logs to log (nil
// discards) and reads the time from now (nil means time.Now).
func NewMonitor(log *slog.Logger, now func() time.Time) *Monitor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	return &Monitor{log: log, now: now}
}

// Observe records the outcome of one store call, whose error is err (nil
// for a success), and returns err unchanged.
func (m *Monitor) Observe(ctx context.Context, err error) error {
	o := outcomeOf(err)
	m.mu.Lock()
	next, changed := transition(m.state, o)
	if next == Unreachable && o == outcomeUnreachable {
		m.failed++
	}
	if !changed {
		m.mu.Unlock()
		return err
	}
	prev := m.state
	m.state = next
	now := m.now()
	since, failed := m.since, m.failed
	if next == Unreachable {
		m.since = now
	} else {
		m.failed = 0
	}
	m.mu.Unlock()
	if prev == Reachable {
		m.log.ErrorContext(ctx, "the database is unreachable", "err", err)
	} else {
		m.log.InfoContext(ctx, "the database is reachable again",
			"down", now.Sub(since).Round(time.Millisecond).String(), "failed_calls", failed)
	}
	return err
}

// State returns whether the database is reachable and, when it is not,
// since when.
func (m *Monitor) State() (Reachability, time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state == Unreachable {
		return m.state, m.since
	}
	return m.state, time.Time{}
}
