package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
)

// A Turn its process settled on its own deadline before this node's timer
// recorded it still gets its session.deadline; a Turn that completed, or
// one settled with deadline_exceeded before its max_turn_duration came by
// this node's clock (another deadline's error), does not.
func TestDeadlineRecordedAfterTheProcessSettledOnIt(t *testing.T) {
	c := &testClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	e := newEngineWith(t, engine.Options{Clock: c})
	ctx := context.Background()
	deadline := &helmrtype.TurnError{Code: helmrtype.CodeDeadlineExceeded}
	for _, tc := range []struct {
		name   string
		after  time.Duration // from the Turn's start to its settlement
		s      engine.Settlement
		record bool
	}{
		{"on its deadline", time.Minute, engine.Settlement{Status: helmrtype.TurnInterrupted, Error: deadline}, true},
		{"completed", time.Minute, engine.Settlement{Status: helmrtype.TurnCompleted, Result: []byte(`{}`)}, false},
		{"before its deadline", 10 * time.Second, engine.Settlement{Status: helmrtype.TurnInterrupted, Error: deadline}, false},
	} {
		rec, _, err := e.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "timed", Input: text("x")}, engine.APICaller)
		if err != nil {
			t.Fatal(err)
		}
		sid := rec.Session.ID
		turn, _, err := e.StartNextTurn(ctx, sid)
		if err != nil || turn == nil {
			t.Fatalf("%s: start: %v %v", tc.name, turn, err)
		}
		c.advance(tc.after)
		if _, _, err := e.SettleTurn(ctx, sid, turn.ID, 1, tc.s, false); err != nil {
			t.Fatal(err)
		}
		err = e.RecordDeadline(ctx, sid, turn.ID)
		if (err == nil) != tc.record {
			t.Fatalf("%s: RecordDeadline after the settlement: %v", tc.name, err)
		}
		page, err := e.ListEvents(ctx, sid, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ev := range page.Records {
			if ev.Kind == helmrtype.EventSessionDeadline {
				n++
			}
		}
		if want := map[bool]int{true: 1, false: 0}[tc.record]; n != want {
			t.Fatalf("%s: %d session.deadline events, want %d", tc.name, n, want)
		}
	}
}
