package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
)

// storeReads is how many read transactions (views and reads) the engine
// has made, from its own metrics.
func storeReads(t *testing.T, e *engine.Engine) uint64 {
	t.Helper()
	mfs, err := e.Metrics().Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() != "helmr_store_transaction_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() != "update" {
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return n
}

// A wait on a Turn this engine admitted is served from the settlement in
// memory: before the settlement it waits without reading the store, and
// after it answers at once, again without a read. A Turn the engine
// does not remember (after a restart) is read from the store.
func TestWaitIsServedFromTheSettlement(t *testing.T) {
	c := &testClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	e := openLong(t, c)
	ctx := context.Background()
	rec, _, err := e.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "long", Input: text("hi")}, engine.APICaller)
	if err != nil {
		t.Fatal(err)
	}
	sid, tid := rec.Session.ID, rec.Turn.ID
	if turn, _, err := e.StartNextTurn(ctx, sid); err != nil || turn == nil {
		t.Fatalf("start: %v %v", turn, err)
	}
	before := storeReads(t, e)
	got := make(chan *helmrtype.TimedTurnWaitResult, 1)
	go func() {
		r, err := e.WaitTurn(ctx, sid, tid, 30*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	for e.Watchers() == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, _, err := e.SettleTurn(ctx, sid, tid, 1, engine.Settlement{Status: "completed", Result: []byte(`{"ok":true}`)}, false); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.Status != helmrtype.WaitSettled || r.Outcome.Status != "completed" || string(r.Outcome.Result) != `{"ok":true}` {
		t.Fatalf("wait: %+v %+v", r, r.Outcome)
	}
	again, err := e.WaitTurn(ctx, sid, tid, 0)
	if err != nil || again.Status != helmrtype.WaitSettled || string(again.Outcome.Result) != `{"ok":true}` {
		t.Fatalf("wait after the settlement: %+v %v", again, err)
	}
	if n := storeReads(t, e) - before; n != 0 {
		t.Fatalf("waits on a Turn settled in this engine read the store %d times", n)
	}
	// Another engine on the same store knows nothing of the Turn: it reads.
	other := engine.New(e.Store(), engine.Options{Clock: c})
	defer other.Close()
	r2, err := other.WaitTurn(ctx, sid, tid, 0)
	if err != nil || r2.Status != helmrtype.WaitSettled || string(r2.Outcome.Result) != `{"ok":true}` {
		t.Fatalf("wait in another engine: %+v %v", r2, err)
	}
	if _, err := other.WaitTurn(ctx, sid, "0190a000-0000-7000-8000-000000000000", 0); helmrtype.CodeOf(err) != helmrtype.CodeNotFound {
		t.Fatalf("wait on an unknown Turn: %v", err)
	}
}
