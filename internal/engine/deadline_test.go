package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
)

// A Turn its process settled on its own deadline before this node's timer
// recorded it still gets its session.deadline; a Turn that completed does
// not.
func TestDeadlineRecordedAfterTheProcessSettledOnIt(t *testing.T) {
	c := &testClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	e := openLong(t, c)
	ctx := context.Background()
	for _, tc := range []struct {
		s      engine.Settlement
		record bool
	}{
		{engine.Settlement{Status: helmrtype.TurnInterrupted, Error: &helmrtype.TurnError{Code: helmrtype.CodeDeadlineExceeded}}, true},
		{engine.Settlement{Status: helmrtype.TurnCompleted, Result: []byte(`{}`)}, false},
	} {
		rec, _, err := e.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "long", Input: text("x")}, engine.APICaller)
		if err != nil {
			t.Fatal(err)
		}
		sid := rec.Session.ID
		turn, _, err := e.StartNextTurn(ctx, sid)
		if err != nil || turn == nil {
			t.Fatalf("start: %v %v", turn, err)
		}
		if _, _, err := e.SettleTurn(ctx, sid, turn.ID, 1, tc.s, false); err != nil {
			t.Fatal(err)
		}
		err = e.RecordDeadline(ctx, sid, turn.ID)
		if (err == nil) != tc.record {
			t.Fatalf("%s: RecordDeadline after the settlement: %v", tc.s.Status, err)
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
			t.Fatalf("%s: %d session.deadline events, want %d", tc.s.Status, n, want)
		}
	}
}
