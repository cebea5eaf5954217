package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
)

// TestExpirePayloads: a settled Turn older than the retention loses its
// input, result, response and output in reads, waits and the timeline,
// and keeps its status, error and timings; younger and unsettled Turns
// keep everything.
func TestExpirePayloads(t *testing.T) {
	clock := &testClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	e := newEngineWith(t, engine.Options{Clock: clock})
	ctx := context.Background()

	if _, err := e.ExpirePayloads(ctx, 0); !errors.Is(err, helmrtype.CodeInvalidRequest) {
		t.Fatalf("ExpirePayloads(0) = %v, want invalid_request", err)
	}

	sid, tid := running(t, e)
	if _, _, err := e.AppendOutput(ctx, sid, tid, 1, helmrtype.Text("progress")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.SettleTurn(ctx, sid, tid, 2, engine.Settlement{Status: "completed", Result: json.RawMessage(`{"secret":1}`),
		Response: text("the answer")}, false); err != nil {
		t.Fatal(err)
	}
	before, err := e.GetTurn(ctx, sid, tid)
	if err != nil || before.Result == nil || before.Response == nil || before.Input == nil {
		t.Fatalf("settled Turn before expiry = %+v, %v", before, err)
	}
	// A second Session: one Turn fails, the next one is still running.
	sid2, failedID := running(t, e)
	if _, _, err := e.SettleTurn(ctx, sid2, failedID, 1, engine.Settlement{Status: "failed",
		Error: &helmrtype.TurnError{Code: "handler_failed", Message: "boom"}}, false); err != nil {
		t.Fatal(err)
	}
	live, _, err := e.Enqueue(ctx, sid2, helmrtype.EnqueueRequest{Input: text("still here")}, engine.APICaller)
	if err != nil {
		t.Fatal(err)
	}

	// Within the retention nothing expires.
	clock.advance(time.Hour)
	if n, err := e.ExpirePayloads(ctx, 2*time.Hour); err != nil || n != 0 {
		t.Fatalf("ExpirePayloads within the retention = %d, %v; want 0", n, err)
	}
	// A later settled Turn stays: it is younger than the retention.
	clock.advance(2 * time.Hour)
	young, _, err := e.Enqueue(ctx, sid, helmrtype.EnqueueRequest{Input: text("young")}, engine.APICaller)
	if err != nil {
		t.Fatal(err)
	}
	if st, _, err := e.StartNextTurn(ctx, sid); err != nil || st == nil || st.ID != young.ID {
		t.Fatalf("start young: %v %v", st, err)
	}
	if _, _, err := e.SettleTurn(ctx, sid, young.ID, 1, engine.Settlement{Status: "completed", Result: json.RawMessage(`2`)}, false); err != nil {
		t.Fatal(err)
	}
	n, err := e.ExpirePayloads(ctx, 2*time.Hour)
	if err != nil || n != 2 {
		t.Fatalf("ExpirePayloads past the retention = %d, %v; want 2 (the completed and the failed Turn)", n, err)
	}
	expiredAt := clock.Now()

	got, err := e.GetTurn(ctx, sid, tid)
	if err != nil {
		t.Fatal(err)
	}
	if got.PayloadExpiredAt == nil || !got.PayloadExpiredAt.Equal(expiredAt) || got.Input != nil || got.Result != nil || got.Response != nil {
		t.Fatalf("expired Turn = %+v; want payload_expired_at %v and no input, result or response", got, expiredAt)
	}
	if got.Status != "completed" || !got.CreatedAt.Equal(before.CreatedAt) || !got.StartedAt.Equal(*before.StartedAt) ||
		!got.TerminalAt.Equal(*before.TerminalAt) || got.Source != before.Source || got.Sequence != before.Sequence {
		t.Fatalf("expired Turn = %+v; want status, timings and source of %+v", got, before)
	}
	w, err := e.WaitTurn(ctx, sid, tid, 0)
	if err != nil || w.Status != "settled" || w.Outcome.Status != "completed" || w.Outcome.PayloadExpiredAt == nil ||
		w.Outcome.Result != nil || w.Outcome.Response != nil {
		t.Fatalf("wait on the expired Turn = %+v, %v", w, err)
	}
	failed, err := e.GetTurn(ctx, sid2, failedID)
	if err != nil || failed.Status != "failed" || failed.Error == nil || failed.Error.Code != "handler_failed" ||
		failed.Error.Message != "boom" || failed.PayloadExpiredAt == nil || failed.Input != nil {
		t.Fatalf("expired failed Turn = %+v, %v; want its error kept", failed, err)
	}
	for _, c := range []struct{ sid, id string }{{sid, young.ID}, {sid2, live.ID}} {
		ts, err := e.GetTurn(ctx, c.sid, c.id)
		if err != nil || ts.PayloadExpiredAt != nil || ts.Input == nil {
			t.Fatalf("Turn %s = %+v, %v; want its payload kept", c.id, ts, err)
		}
	}
	young2, _ := e.GetTurn(ctx, sid, young.ID)
	if string(young2.Result) != "2" {
		t.Fatalf("young Turn's result = %s", young2.Result)
	}

	// The timeline keeps every record; those of the expired Turn lose
	// their payloads and say when.
	page, err := e.ListEvents(ctx, sid, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, ev := range page.Records {
		if ev.TurnID == nil {
			continue
		}
		var data map[string]any
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			t.Fatal(err)
		}
		mine := *ev.TurnID == tid
		switch ev.Kind {
		case "turn.queued", "turn.output", "turn.completed":
			if mine {
				kinds[ev.Kind] = true
				stamp, _ := data["payload_expired_at"].(string)
				at, perr := time.Parse(time.RFC3339Nano, stamp)
				if perr != nil || !at.Equal(expiredAt) {
					t.Errorf("%s of the expired Turn: payload_expired_at %q, want %v", ev.Kind, stamp, expiredAt)
				}
				for _, f := range []string{"input", "content", "result", "response"} {
					if _, ok := data[f]; ok {
						t.Errorf("%s of the expired Turn still has %s: %s", ev.Kind, f, ev.Data)
					}
				}
				if ev.Kind == "turn.queued" && data["sequence"] == nil {
					t.Errorf("turn.queued of the expired Turn lost its sequence: %s", ev.Data)
				}
			} else if _, ok := data["payload_expired_at"]; ok {
				t.Errorf("%s of the young Turn expired: %s", ev.Kind, ev.Data)
			}
		}
	}
	if len(kinds) != 3 {
		t.Fatalf("timeline of the expired Turn has %v, want turn.queued, turn.output and turn.completed", kinds)
	}
	if page.RetainedAfter != 0 {
		t.Fatalf("retained_after = %d, want 0: records are kept", page.RetainedAfter)
	}
	// Nothing is left to expire.
	if n, err := e.ExpirePayloads(ctx, 2*time.Hour); err != nil || n != 0 {
		t.Fatalf("ExpirePayloads again = %d, %v; want 0", n, err)
	}
}

// TestExpirePayloadsInBatches: more Turns than one batch all expire, in
// several transactions.
func TestExpirePayloadsInBatches(t *testing.T) {
	clock := &testClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	e := newEngineWith(t, engine.Options{Clock: clock})
	ctx := context.Background()
	sid, tid := running(t, e)
	want := engine.PayloadExpiryBatch + 5
	for i := 0; i < want; i++ {
		if _, _, err := e.SettleTurn(ctx, sid, tid, 1, engine.Settlement{Status: "completed", Result: json.RawMessage(`1`)}, false); err != nil {
			t.Fatal(err)
		}
		if i == want-1 {
			break
		}
		next, _, err := e.Enqueue(ctx, sid, helmrtype.EnqueueRequest{Input: text("again")}, engine.APICaller)
		if err != nil {
			t.Fatal(err)
		}
		if st, _, err := e.StartNextTurn(ctx, sid); err != nil || st == nil {
			t.Fatalf("start: %v %v", st, err)
		}
		tid = next.ID
	}
	clock.advance(time.Minute)
	if n, err := e.ExpirePayloads(ctx, time.Second); err != nil || n != want {
		t.Fatalf("ExpirePayloads = %d, %v; want %d", n, err, want)
	}
}
