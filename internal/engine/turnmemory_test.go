package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/store"
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

// hookStore runs after once, after the first Update that commits while it
// is armed and for which after reports true.
type hookStore struct {
	store.Store
	armed atomic.Bool
	after func() bool
}

func (s *hookStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	err := s.Store.Update(ctx, fn)
	if err == nil && s.armed.Load() && s.after() {
		s.armed.Store(false)
	}
	return err
}

// A Turn admitted on this node and settled on another before the
// admission was reported here (the other node's notice came first): the
// wait does not trust a memory of it as unsettled, it reads the store and
// answers settled.
func TestRemoteSettlementBeforeTheAdmissionIsReported(t *testing.T) {
	c := &testClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	other := openLong(t, c)
	ctx := context.Background()
	hs := &hookStore{Store: other.Store()}
	e := engine.New(hs, engine.Options{Clock: c})
	defer e.Close()
	rec, _, err := e.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "long"}, engine.APICaller)
	if err != nil {
		t.Fatal(err)
	}
	sid := rec.Session.ID
	var settled string
	hs.after = func() bool {
		// The other node starts and settles the Turn, and its notice
		// reaches this engine, all before the admission's report.
		turn, _, err := other.StartNextTurn(ctx, sid)
		if err != nil || turn == nil {
			return false
		}
		if _, _, err := other.SettleTurn(ctx, sid, turn.ID, 1, engine.Settlement{Status: "completed", Result: []byte(`{"ok":true}`)}, false); err != nil {
			t.Error(err)
		}
		settled = turn.ID
		e.Remote(ctx, store.Notice{Node: "other", Kind: helmrtype.EventTurnCompleted, SessionID: sid, TurnID: turn.ID})
		return true
	}
	hs.armed.Store(true)
	ts, _, err := e.Enqueue(ctx, sid, helmrtype.EnqueueRequest{Input: text("hi")}, engine.APICaller)
	if err != nil {
		t.Fatal(err)
	}
	if settled != ts.ID {
		t.Fatalf("the other node settled %q, the admission was %q", settled, ts.ID)
	}
	r, err := e.WaitTurn(ctx, sid, ts.ID, 2*time.Second)
	if err != nil || r.Status != helmrtype.WaitSettled || r.Outcome.Status != "completed" {
		t.Fatalf("wait on a Turn settled elsewhere before its admission was reported: %+v %v", r, err)
	}
}
