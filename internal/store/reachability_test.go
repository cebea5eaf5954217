package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestTransition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		from    Reachability
		o       outcome
		to      Reachability
		changed bool
	}{
		{Reachable, outcomeAnswered, Reachable, false},
		{Reachable, outcomeUnknown, Reachable, false},
		{Reachable, outcomeUnreachable, Unreachable, true},
		{Unreachable, outcomeUnreachable, Unreachable, false},
		{Unreachable, outcomeUnknown, Unreachable, false},
		{Unreachable, outcomeAnswered, Reachable, true},
	} {
		to, changed := transition(tc.from, tc.o)
		if to != tc.to || changed != tc.changed {
			t.Errorf("transition(%v, %d) = %v, %v; want %v, %v", tc.from, tc.o, to, changed, tc.to, tc.changed)
		}
	}
}

func TestOutcomeOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want outcome
	}{
		{nil, outcomeAnswered},
		{ErrNotFound, outcomeAnswered},
		{ErrDuplicate, outcomeAnswered},
		{errors.New("syntax error"), outcomeAnswered},
		{Unavailable(io.ErrUnexpectedEOF), outcomeUnreachable},
		{fmt.Errorf("pgstore: begin: %w", Unavailable(errors.New("connection refused"))), outcomeUnreachable},
		{context.Canceled, outcomeUnknown},
		{fmt.Errorf("pgstore: begin: %w", context.DeadlineExceeded), outcomeUnknown},
	} {
		if got := outcomeOf(tc.err); got != tc.want {
			t.Errorf("outcomeOf(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestUnavailable(t *testing.T) {
	t.Parallel()
	cause := errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	err := Unavailable(cause)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, cause) {
		t.Fatalf("Unavailable(cause) = %v: want both ErrUnavailable and the cause", err)
	}
	if err.Error() != cause.Error() {
		t.Errorf("message %q, want the cause's %q", err.Error(), cause.Error())
	}
	if Unavailable(err) != err {
		t.Error("Unavailable wrapped a marked error again")
	}
	if Unavailable(nil) != nil {
		t.Error("Unavailable(nil) is not nil")
	}
}

func TestMonitorLogsOnePairPerOutage(t *testing.T) {
	t.Parallel()
	// Only the first failure and the first answer after it log, each on
	// this goroutine: the buffer needs no lock.
	var buf bytes.Buffer
	lines := func() []string { return strings.Split(strings.TrimSpace(buf.String()), "\n") }
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	m := NewMonitor(slog.New(slog.NewTextHandler(&buf, nil)), func() time.Time { return now })
	ctx := context.Background()

	m.Observe(ctx, nil)
	m.Observe(ctx, ErrNotFound)
	if st, _ := m.State(); st != Reachable {
		t.Fatalf("state %v after answers, want reachable", st)
	}
	first := Unavailable(errors.New("first: connection refused"))
	// Many concurrent failures, as requests during an outage: one line.
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			if i == 0 {
				return
			}
			m.Observe(ctx, Unavailable(errors.New("later")))
		})
		if i == 0 {
			m.Observe(ctx, first)
		}
	}
	wg.Wait()
	m.Observe(ctx, context.Canceled) // a caller that gave up says nothing
	st, since := m.State()
	if st != Unreachable || !since.Equal(now) {
		t.Fatalf("State() = %v, %v; want unreachable since %v", st, since, now)
	}
	now = now.Add(7 * time.Second)
	m.Observe(ctx, ErrNotFound) // the database answered
	m.Observe(ctx, nil)
	if st, _ := m.State(); st != Reachable {
		t.Fatalf("state %v after an answer, want reachable", st)
	}

	got := lines()
	if len(got) != 2 {
		t.Fatalf("logged %d lines, want 2:\n%s", len(got), strings.Join(got, "\n"))
	}
	if !strings.Contains(got[0], "level=ERROR") || !strings.Contains(got[0], `msg="the database is unreachable"`) ||
		!strings.Contains(got[0], "first: connection refused") {
		t.Errorf("first line %q: want the error line with the first error", got[0])
	}
	if !strings.Contains(got[1], "level=INFO") || !strings.Contains(got[1], `msg="the database is reachable again"`) ||
		!strings.Contains(got[1], "down=7s") || !strings.Contains(got[1], "failed_calls=50") {
		t.Errorf("second line %q: want the info line with down=7s failed_calls=50", got[1])
	}

	// A second outage logs its own pair.
	m.Observe(ctx, Unavailable(io.EOF))
	now = now.Add(time.Second)
	m.Observe(ctx, nil)
	if n := len(lines()); n != 4 {
		t.Errorf("logged %d lines after a second outage, want 4", n)
	}
}
