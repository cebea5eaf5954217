package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/helmr-go/helmr/internal/store"
)

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// testExpireTurnPayloads: settled Turns before the cutoff lose their input,
// result, response, messages' content and the payload fields of their
// events, oldest settlement first and at most limit per call; their
// status, error, timings and other events stay, and so does every other
// Turn.
func testExpireTurnPayloads(t *testing.T, s store.Store) {
	sid, other := uuid.Must(uuid.NewV7()).String(), uuid.Must(uuid.NewV7()).String()
	id := func() string { return uuid.Must(uuid.NewV7()).String() }
	completed := &store.Turn{ID: id(), SessionID: sid, Sequence: 1, Status: "completed",
		Input: raw(`[{"type":"text","text":"secret"}]`), Source: raw(`{"kind":"api_key"}`),
		CreatedAt: at(1), StartedAt: ptr(at(2)), TerminalAt: ptr(at(10)),
		Result: raw(`{"answer":42}`), Response: raw(`[{"type":"text","text":"done"}]`), ResponseStaged: true,
		OutputBytes: 12, LastOp: 3, Messaged: true}
	failed := &store.Turn{ID: id(), SessionID: sid, Sequence: 2, Status: "failed", Input: raw(`"x"`), Source: raw(`{"kind":"user"}`),
		CreatedAt: at(3), StartedAt: ptr(at(4)), TerminalAt: ptr(at(11)), ErrorCode: "handler_failed", ErrorMessage: "broke"}
	recent := &store.Turn{ID: id(), SessionID: sid, Sequence: 3, Status: "completed", Input: raw(`"later"`), Source: raw(`{}`),
		CreatedAt: at(5), StartedAt: ptr(at(6)), TerminalAt: ptr(at(30)), Result: raw(`1`)}
	running := &store.Turn{ID: id(), SessionID: sid, Sequence: 4, Status: "running", Input: raw(`"now"`), Source: raw(`{}`),
		CreatedAt: at(7), StartedAt: ptr(at(8)), Messaged: true}
	elsewhere := &store.Turn{ID: id(), SessionID: other, Sequence: 1, Status: "interrupted", Input: raw(`"y"`), Source: raw(`{}`),
		CreatedAt: at(1), TerminalAt: ptr(at(12)), ErrorCode: "interrupted"}
	turns := []*store.Turn{completed, failed, recent, running, elsewhere}

	type ev struct {
		turn *store.Turn
		kind string
		data string
		// want is the data after the expiry of turn ("" when unchanged).
		want string
	}
	const stamp = `"payload_expired_at":"%s"`
	exp := fmt.Sprintf(stamp, store.PayloadExpiredStamp(at(40)))
	events := []ev{
		{nil, "session.created", `{"input":"not a turn's"}`, ""},
		{completed, "turn.queued", `{"sequence":1,"input":[{"type":"text","text":"secret"}],"source":{"kind":"api_key"}}`,
			`{"sequence":1,"source":{"kind":"api_key"},` + exp + `}`},
		{completed, "turn.running", `{}`, ""},
		{completed, "turn.output", `{"content":[{"type":"text","text":"nul \u0000 and ünïcode"}]}`, `{` + exp + `}`},
		{completed, "message.admitted", `{"message_id":"m1","content":[{"type":"text","text":"more"}],"source":{"kind":"user","note":"a\u0000b"}}`,
			`{"message_id":"m1","source":{"kind":"user","note":"a\u0000b"},` + exp + `}`},
		{completed, "ask.created", `{"ask_id":"a1","question":{"text":"ok?"}}`, ""},
		{completed, "turn.completed", `{"result":{"answer":42},"response":[{"type":"text","text":"done"}]}`, `{` + exp + `}`},
		{failed, "turn.queued", `{"sequence":2,"input":"x","source":{"kind":"user"}}`, `{"sequence":2,"source":{"kind":"user"},` + exp + `}`},
		{failed, "turn.failed", `{"error":{"code":"handler_failed","message":"broke"}}`, ""},
		{recent, "turn.queued", `{"sequence":3,"input":"later"}`, ""},
		{recent, "turn.completed", `{"result":1}`, ""},
		{running, "turn.queued", `{"sequence":4,"input":"now"}`, ""},
		{running, "turn.output", `{"content":[]}`, ""},
		{elsewhere, "turn.queued", `{"sequence":1,"input":"y"}`, `{"sequence":1,` + exp + `}`},
	}
	msgs := []*store.Message{
		{ID: id(), SessionID: sid, TurnID: completed.ID, Content: raw(`[{"type":"text","text":"more"}]`), Source: raw(`{}`), Status: "delivered", CreatedAt: at(3)},
		{ID: id(), SessionID: sid, TurnID: running.ID, Content: raw(`[{"type":"text","text":"kept"}]`), Source: raw(`{}`), Status: "admitted", CreatedAt: at(9)},
	}
	var appended []store.Event
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, tr := range turns {
			wantOK(t, "InsertTurn", tx.InsertTurn(ctx, tr))
		}
		for _, m := range msgs {
			wantOK(t, "InsertMessage", tx.InsertMessage(ctx, m))
		}
		for i, e := range events {
			se := &store.Event{SessionID: sid, Kind: e.kind, Data: raw(e.data), CreatedAt: at(20 + i)}
			if e.turn != nil {
				se.SessionID, se.TurnID = e.turn.SessionID, e.turn.ID
			}
			wantOK(t, "AppendEvent", tx.AppendEvent(ctx, se))
			appended = append(appended, *se)
		}
		return nil
	})

	expire := func(limit int) int {
		t.Helper()
		var n int
		update(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			n, err = tx.ExpireTurnPayloads(ctx, at(20), at(40), limit)
			wantOK(t, "ExpireTurnPayloads", err)
			return nil
		})
		return n
	}
	// Oldest settlement first: completed (10), failed (11), then elsewhere (12).
	if n := expire(2); n != 2 {
		t.Fatalf("ExpireTurnPayloads(limit 2) = %d, want 2", n)
	}
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetTurn(ctx, elsewhere.SessionID, elsewhere.ID)
		if err != nil {
			t.Fatalf("GetTurn: %v", err)
		}
		check(t, "Turn beyond the first batch", *got, storedTurn(*elsewhere))
		return nil
	})
	if n := expire(10); n != 1 {
		t.Fatalf("second ExpireTurnPayloads = %d, want 1", n)
	}
	if n := expire(10); n != 0 {
		t.Fatalf("third ExpireTurnPayloads = %d, want 0: every Turn before the cutoff has expired", n)
	}
	if n := expire(0); n != 0 {
		t.Fatalf("ExpireTurnPayloads(limit 0) = %d, want 0", n)
	}

	gone := func(tr store.Turn) store.Turn {
		tr.Input, tr.Result, tr.Response, tr.ResponseStaged, tr.PayloadExpiredAt = nil, nil, nil, false, ptr(at(40))
		return storedTurn(tr)
	}
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []struct {
			tr   *store.Turn
			want store.Turn
		}{
			{completed, gone(*completed)},
			{failed, gone(*failed)},
			{elsewhere, gone(*elsewhere)},
			{recent, storedTurn(*recent)},
			{running, storedTurn(*running)},
		} {
			got, err := tx.GetTurn(ctx, c.tr.SessionID, c.tr.ID)
			if err != nil {
				t.Fatalf("GetTurn(%d): %v", c.tr.Sequence, err)
			}
			check(t, fmt.Sprintf("Turn %s/%d after the expiry", c.tr.Status, c.tr.Sequence), *got, c.want)
		}
		for i, sess := range []string{sid, other} {
			es, err := tx.ListEvents(ctx, sess, 0, 100)
			if err != nil {
				t.Fatalf("ListEvents: %v", err)
			}
			for _, g := range es {
				var e ev
				var before store.Event
				for j, w := range appended {
					if w.SessionID == g.SessionID && w.Sequence == g.Sequence {
						e, before = events[j], w
					}
				}
				if g.Kind != before.Kind || g.TurnID != before.TurnID || !g.CreatedAt.Equal(stored(before.CreatedAt)) {
					t.Errorf("session %d event %d = %s/%s at %v, want %s/%s at %v", i, g.Sequence, g.Kind, g.TurnID, g.CreatedAt,
						before.Kind, before.TurnID, before.CreatedAt)
				}
				want := e.want
				if want == "" {
					want = e.data
				}
				if !jsonEqual(g.Data, raw(want)) {
					t.Errorf("%s event of Turn %v after the expiry = %s, want %s", e.kind, e.turn != nil, g.Data, want)
				}
			}
		}
		m, err := tx.GetMessage(ctx, msgs[0].ID)
		if err != nil || !jsonEqual(m.Content, raw(`[]`)) || m.Status != "delivered" {
			t.Errorf("message of an expired Turn = %+v, %v; want content [] and its status kept", m, err)
		}
		m, err = tx.GetMessage(ctx, msgs[1].ID)
		if err != nil || !jsonEqual(m.Content, msgs[1].Content) {
			t.Errorf("message of a running Turn = %+v, %v; want it kept", m, err)
		}
		return nil
	})

	// A later Update of an expired Turn (its status, say) leaves the
	// expiry as it is.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetTurn(ctx, completed.SessionID, completed.ID)
		if err != nil {
			return err
		}
		got.LastOp++
		return tx.UpdateTurn(ctx, got)
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetTurn(ctx, completed.SessionID, completed.ID)
		if err != nil || got.PayloadExpiredAt == nil || !got.PayloadExpiredAt.Equal(at(40).Truncate(1000)) {
			t.Errorf("expired Turn after UpdateTurn = %+v, %v; want PayloadExpiredAt kept", got, err)
		}
		return nil
	})
}

// testConcurrentPayloadExpiry: Updates that expire at once, in small
// batches, each expire every Turn exactly once and none fails.
func testConcurrentPayloadExpiry(t *testing.T, s store.Store) {
	const turns, workers = 40, 4
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for i := range turns {
			sid := fmt.Sprintf("ses-%d", i%5)
			tr := &store.Turn{ID: uuid.Must(uuid.NewV7()).String(), SessionID: sid, Status: "completed", Input: raw(`"in"`),
				Source: raw(`{}`), Result: raw(`"out"`), CreatedAt: at(i), TerminalAt: ptr(at(i + 1))}
			wantOK(t, "InsertTurn", tx.InsertTurn(ctx, tr))
			wantOK(t, "AppendEvent", tx.AppendEvent(ctx, &store.Event{SessionID: sid, TurnID: tr.ID, Kind: "turn.completed",
				Data: raw(`{"result":"out"}`), CreatedAt: at(i + 1)}))
		}
		return nil
	})
	var mu sync.Mutex
	total := 0
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var n int
				err := s.Update(t.Context(), func(tx store.Tx) error {
					var err error
					n, err = tx.ExpireTurnPayloads(t.Context(), at(1000), at(1000), 3)
					return err
				})
				if err != nil {
					t.Errorf("concurrent ExpireTurnPayloads: %v", err)
					return
				}
				mu.Lock()
				total += n
				mu.Unlock()
				if n == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	if total != turns {
		t.Errorf("concurrent expiries expired %d Turns in all, want %d", total, turns)
	}
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for i := range 5 {
			ts, err := tx.ListTurns(ctx, fmt.Sprintf("ses-%d", i), 0, 100)
			if err != nil {
				return err
			}
			for _, tr := range ts {
				if tr.PayloadExpiredAt == nil || tr.Input != nil || tr.Result != nil {
					t.Errorf("Turn %s after concurrent expiries = %+v", tr.ID, tr)
				}
			}
		}
		return nil
	})
}
