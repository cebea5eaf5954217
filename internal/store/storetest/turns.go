package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/helmr-go/helmr/internal/store"
)

func testTurns(t *testing.T, s store.Store) {
	full := &store.Turn{
		ID:                 "turn-1",
		SessionID:          "ses-1",
		Sequence:           1,
		Status:             "completed",
		Input:              raw(`[{"type":"text","text":"hi"}]`),
		Source:             raw(`{"kind":"api_key"}`),
		CreatedAt:          at(10),
		StartedAt:          ptr(at(11)),
		TerminalAt:         ptr(at(12)),
		Result:             raw(`{"answer":42,"list":[1,2.5,"x"],"nested":{"ok":true}}`),
		Response:           raw(`[{"type":"json","value":{"a":null}}]`),
		ResponseStaged:     true,
		ErrorCode:          "handler_failed",
		ErrorMessage:       "it broke: \"quoted\" and ünïcode",
		OutputBytes:        123456,
		LastOp:             77,
		Waited:             true,
		Messaged:           true,
		InterruptRequested: true,
		TraceParent:        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}
	// Nil JSON and nil times stay nil.
	minimal := &store.Turn{ID: "turn-2", SessionID: "ses-1", Sequence: 2, Status: "queued", CreatedAt: at(13)}
	// JSON null and empty values are not nil.
	empties := &store.Turn{ID: "turn-3", SessionID: "ses-1", Sequence: 3, Status: "queued",
		Input: raw(`null`), Source: raw(`{}`), Result: raw(`""`), Response: raw(`[]`), CreatedAt: at(14)}
	other := &store.Turn{ID: "turn-4", SessionID: "ses-2", Sequence: 1, Status: "running", Input: raw(`1`), CreatedAt: at(15)}
	all := []*store.Turn{full, minimal, empties, other}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, tr := range all {
			wantOK(t, "InsertTurn("+tr.ID+")", tx.InsertTurn(ctx, tr))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, want := range all {
			got, err := tx.GetTurn(ctx, want.SessionID, want.ID)
			if err != nil {
				t.Errorf("GetTurn(%s): %v", want.ID, err)
				continue
			}
			check(t, "GetTurn("+want.ID+")", *got, storedTurn(*want))
		}
		_, err := tx.GetTurn(ctx, "ses-1", "turn-missing")
		wantErr(t, "GetTurn(missing)", err, store.ErrNotFound)
		_, err = tx.GetTurn(ctx, "ses-2", "turn-1")
		wantErr(t, "GetTurn(other Session's Turn)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		err := tx.InsertTurn(ctx, newTurn("ses-3", "turn-1", 1, "queued"))
		wantErr(t, "InsertTurn(same id, other Session)", err, store.ErrDuplicate)
		err = tx.InsertTurn(ctx, newTurn("ses-1", "turn-9", 2, "queued"))
		wantErr(t, "InsertTurn(same Session and sequence)", err, store.ErrDuplicate)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.GetTurn(ctx, "ses-1", "turn-9")
		wantErr(t, "GetTurn(refused duplicate)", err, store.ErrNotFound)
		_, err = tx.GetTurn(ctx, "ses-3", "turn-1")
		wantErr(t, "GetTurn(refused duplicate id)", err, store.ErrNotFound)
		got, err := tx.GetTurn(ctx, "ses-1", "turn-2")
		if err != nil {
			t.Fatalf("GetTurn: %v", err)
		}
		check(t, "GetTurn after refused duplicates", *got, storedTurn(*minimal))
		return nil
	})
}

func testUpdateTurn(t *testing.T, s store.Store) {
	tr := newTurn("ses-1", "turn-1", 1, "queued")
	// The trace context is written at admission and kept by every update.
	tr.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sibling := newTurn("ses-1", "turn-2", 2, "queued")
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "InsertTurn", tx.InsertTurn(ctx, tr))
		wantOK(t, "InsertTurn(sibling)", tx.InsertTurn(ctx, sibling))
		return nil
	})
	// queued → running → completed with every mutable field set.
	running := *tr
	running.Status = "running"
	running.StartedAt = ptr(at(20))
	running.Response = raw(`[{"type":"text","text":"draft"}]`)
	running.OutputBytes = 10
	running.LastOp = 3
	running.Waited = false
	running.Messaged = true
	running.InterruptRequested = false
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateTurn(running)", tx.UpdateTurn(ctx, &running))
		got, err := tx.GetTurn(ctx, tr.SessionID, tr.ID)
		if err != nil {
			t.Fatalf("GetTurn in the writing Update: %v", err)
		}
		check(t, "GetTurn in the writing Update", *got, storedTurn(running))
		return nil
	})
	done := running
	done.Status = "failed"
	done.TerminalAt = ptr(at(21))
	done.Result = raw(`{"partial":true}`)
	done.Response = raw(`[{"type":"text","text":"final"}]`)
	done.ResponseStaged = true
	done.ErrorCode = "deadline_exceeded"
	done.ErrorMessage = "took too long"
	done.OutputBytes = 1 << 40
	done.LastOp = 1 << 33
	done.Waited = true
	done.Messaged = false
	done.InterruptRequested = true
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateTurn(failed)", tx.UpdateTurn(ctx, &done))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetTurn(ctx, tr.SessionID, tr.ID)
		if err != nil {
			t.Fatalf("GetTurn: %v", err)
		}
		check(t, "updated Turn", *got, storedTurn(done))
		got, err = tx.GetTurn(ctx, sibling.SessionID, sibling.ID)
		if err != nil {
			t.Fatalf("GetTurn(sibling): %v", err)
		}
		check(t, "sibling Turn", *got, storedTurn(*sibling))
		return nil
	})
	// Pointers and JSON go back to nil.
	cleared := done
	cleared.StartedAt, cleared.TerminalAt, cleared.Result, cleared.Response = nil, nil, nil, nil
	cleared.ResponseStaged, cleared.ErrorCode, cleared.ErrorMessage = false, "", ""
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateTurn(cleared)", tx.UpdateTurn(ctx, &cleared))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetTurn(ctx, tr.SessionID, tr.ID)
		if err != nil {
			t.Fatalf("GetTurn: %v", err)
		}
		check(t, "cleared Turn", *got, storedTurn(cleared))
		return nil
	})
}

func testListTurns(t *testing.T, s store.Store) {
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, seq := range []int64{3, 1, 5, 2, 4} {
			wantOK(t, "InsertTurn", tx.InsertTurn(ctx, newTurn("ses-a", fmt.Sprintf("a-%d", seq), seq, "completed")))
		}
		for _, seq := range []int64{1, 2} {
			wantOK(t, "InsertTurn", tx.InsertTurn(ctx, newTurn("ses-b", fmt.Sprintf("b-%d", seq), seq, "completed")))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []struct {
			session string
			after   int64
			limit   int
			want    []string
		}{
			{"ses-a", 0, 100, []string{"a-1", "a-2", "a-3", "a-4", "a-5"}},
			{"ses-a", 0, 2, []string{"a-1", "a-2"}},
			{"ses-a", 2, 2, []string{"a-3", "a-4"}},
			{"ses-a", 4, 100, []string{"a-5"}},
			{"ses-a", 5, 100, nil},
			{"ses-b", 0, 100, []string{"b-1", "b-2"}},
			{"ses-none", 0, 100, nil},
		} {
			ts, err := tx.ListTurns(ctx, c.session, c.after, c.limit)
			if err != nil {
				t.Errorf("ListTurns(%s, %d, %d): %v", c.session, c.after, c.limit, err)
				continue
			}
			checkIDs(t, fmt.Sprintf("ListTurns(%s, %d, %d)", c.session, c.after, c.limit), turnIDs(ts), c.want)
		}
		ts, err := tx.ListTurns(ctx, "ses-a", 2, 1)
		if err != nil || len(ts) != 1 {
			t.Fatalf("ListTurns = %v, %v", ts, err)
		}
		check(t, "listed Turn", ts[0], storedTurn(*newTurn("ses-a", "a-3", 3, "completed")))
		for session, want := range map[string]int64{"ses-a": 5, "ses-b": 2, "ses-none": 0} {
			n, err := tx.MaxTurnSequence(ctx, session)
			if err != nil || n != want {
				t.Errorf("MaxTurnSequence(%s) = %d, %v; want %d", session, n, err, want)
			}
		}
		return nil
	})
	// Without a sequence, InsertTurn assigns the Session's next one.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []struct {
			session, id string
			want        int64
		}{{"ses-a", "a-6", 6}, {"ses-a", "a-7", 7}, {"ses-new", "new-1", 1}} {
			tr := newTurn(c.session, c.id, 0, "queued")
			if err := tx.InsertTurn(ctx, tr); err != nil || tr.Sequence != c.want {
				t.Errorf("InsertTurn(%s, no sequence) assigned %d, %v; want %d", c.id, tr.Sequence, err, c.want)
			}
			got, err := tx.GetTurn(ctx, c.session, c.id)
			if err != nil || got.Sequence != c.want {
				t.Errorf("GetTurn(%s) = %+v, %v; want sequence %d", c.id, got, err, c.want)
			}
		}
		dup := newTurn("ses-a", "a-7", 0, "queued")
		wantErr(t, "InsertTurn(same id, no sequence)", tx.InsertTurn(ctx, dup), store.ErrDuplicate)
		if n, err := tx.MaxTurnSequence(ctx, "ses-a"); err != nil || n != 7 {
			t.Errorf("MaxTurnSequence after a refused insert = %d, %v; want 7", n, err)
		}
		return nil
	})
}

func testTurnsByStatus(t *testing.T, s store.Store) {
	type row struct {
		session string
		seq     int64
		status  string
	}
	rows := []row{
		{"ses-a", 1, "completed"}, {"ses-a", 2, "running"}, {"ses-a", 3, "queued"}, {"ses-a", 4, "queued"},
		{"ses-b", 1, "failed"}, {"ses-b", 2, "queued"},
		{"ses-c", 1, "completed"}, {"ses-c", 2, "cancelled"},
		{"ses-d", 1, "interrupted"}, {"ses-d", 2, "running"},
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, r := range slices.Backward(rows) {
			wantOK(t, "InsertTurn", tx.InsertTurn(ctx, newTurn(r.session, fmt.Sprintf("%s-%d", r.session, r.seq), r.seq, r.status)))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []struct{ session, want string }{
			{"ses-a", "ses-a-2"}, // running wins over queued
			{"ses-b", "ses-b-2"}, // oldest queued
			{"ses-d", "ses-d-2"},
		} {
			got, err := tx.ActiveTurn(ctx, c.session)
			if err != nil || got.ID != c.want {
				t.Errorf("ActiveTurn(%s) = %v, %v; want %s", c.session, got, err, c.want)
			}
		}
		got, err := tx.ActiveTurn(ctx, "ses-b")
		if err != nil {
			t.Fatalf("ActiveTurn: %v", err)
		}
		check(t, "ActiveTurn row", *got, storedTurn(*newTurn("ses-b", "ses-b-2", 2, "queued")))
		_, err = tx.ActiveTurn(ctx, "ses-c")
		wantErr(t, "ActiveTurn(none)", err, store.ErrNotFound)
		_, err = tx.ActiveTurn(ctx, "ses-none")
		wantErr(t, "ActiveTurn(no Session)", err, store.ErrNotFound)

		for status, want := range map[string][]string{
			"queued":    {"ses-a-3", "ses-a-4", "ses-b-2"},
			"running":   {"ses-a-2", "ses-d-2"},
			"cancelled": {"ses-c-2"},
			"unknown":   nil,
		} {
			ts, err := tx.TurnsWithStatus(ctx, status)
			if err != nil {
				t.Errorf("TurnsWithStatus(%s): %v", status, err)
				continue
			}
			for _, tr := range ts {
				if tr.Status != status {
					t.Errorf("TurnsWithStatus(%s) returned %s in status %s", status, tr.ID, tr.Status)
				}
			}
			ids := turnIDs(ts)
			slices.Sort(ids)
			checkIDs(t, "TurnsWithStatus("+status+")", ids, want)
		}

		ids, err := tx.SessionsWithWork(ctx)
		if err != nil {
			t.Fatalf("SessionsWithWork: %v", err)
		}
		slices.Sort(ids)
		checkIDs(t, "SessionsWithWork", ids, []string{"ses-a", "ses-b", "ses-d"})
		return nil
	})
	// Work drains as Turns settle.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, id := range []string{"ses-a-2", "ses-a-3", "ses-a-4"} {
			tr, err := tx.GetTurn(ctx, "ses-a", id)
			if err != nil {
				t.Fatalf("GetTurn: %v", err)
			}
			tr.Status = "completed"
			wantOK(t, "UpdateTurn", tx.UpdateTurn(ctx, tr))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		ids, err := tx.SessionsWithWork(ctx)
		if err != nil {
			t.Fatalf("SessionsWithWork: %v", err)
		}
		slices.Sort(ids)
		checkIDs(t, "SessionsWithWork after settling", ids, []string{"ses-b", "ses-d"})
		return nil
	})
}

func testMessages(t *testing.T, s store.Store) {
	m := &store.Message{ID: "msg-1", SessionID: "ses-1", TurnID: "turn-1",
		Content: raw(`[{"type":"text","text":"more"},{"type":"json","value":[1,{"b":false}]}]`),
		Source:  raw(`{"kind":"session","requester_session_id":"ses-0"}`), Status: "admitted", CreatedAt: at(30)}
	empty := &store.Message{ID: "msg-2", SessionID: "ses-1", TurnID: "turn-1",
		Content: raw(`[]`), Source: raw(`{}`), Status: "admitted", CreatedAt: at(31)}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "InsertMessage", tx.InsertMessage(ctx, m))
		wantOK(t, "InsertMessage(empty)", tx.InsertMessage(ctx, empty))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, want := range []*store.Message{m, empty} {
			got, err := tx.GetMessage(ctx, want.ID)
			if err != nil {
				t.Errorf("GetMessage(%s): %v", want.ID, err)
				continue
			}
			check(t, "GetMessage("+want.ID+")", *got, storedMessage(*want))
		}
		_, err := tx.GetMessage(ctx, "msg-missing")
		wantErr(t, "GetMessage(missing)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		dup := *empty
		dup.ID = m.ID
		wantErr(t, "InsertMessage(same id)", tx.InsertMessage(ctx, &dup), store.ErrDuplicate)
		return nil
	})
	// A message marks its Turn, so that the Turn's start and settlement
	// look for it.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		tr := newTurn("ses-1", "turn-m", 9, "queued")
		wantOK(t, "InsertTurn", tx.InsertTurn(ctx, tr))
		wantOK(t, "InsertMessage", tx.InsertMessage(ctx, &store.Message{ID: "msg-m", SessionID: "ses-1", TurnID: tr.ID,
			Content: raw(`[]`), Source: raw(`{}`), Status: "admitted", CreatedAt: at(32)}))
		if got, err := tx.GetTurn(ctx, "ses-1", tr.ID); err != nil || !got.Messaged {
			t.Errorf("GetTurn after InsertMessage = %+v, %v; want Messaged", got, err)
		}
		return nil
	})
	delivered := *m
	delivered.Status = "delivered"
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateMessage", tx.UpdateMessage(ctx, &delivered))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetMessage(ctx, m.ID)
		if err != nil {
			t.Fatalf("GetMessage: %v", err)
		}
		check(t, "updated Message", *got, storedMessage(delivered))
		got, err = tx.GetMessage(ctx, empty.ID)
		if err != nil {
			t.Fatalf("GetMessage: %v", err)
		}
		check(t, "other Message", *got, storedMessage(*empty))
		return nil
	})
}

func testPendingMessages(t *testing.T, s store.Store) {
	// IDs deliberately sort against creation time: order is oldest first.
	msgs := []struct {
		id, turn, status string
		at               int
	}{
		{"msg-9", "turn-1", "admitted", 1},
		{"msg-8", "turn-1", "delivered", 2},
		{"msg-7", "turn-1", "admitted", 3},
		{"msg-6", "turn-1", "rejected", 4},
		{"msg-5", "turn-2", "admitted", 5},
		{"msg-4", "turn-1", "admitted", 6},
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, i := range []int{3, 5, 0, 2, 4, 1} {
			c := msgs[i]
			m := &store.Message{ID: c.id, SessionID: "ses-1", TurnID: c.turn, Content: raw(`[{"type":"text","text":"` + c.id + `"}]`),
				Source: raw(`{"kind":"user"}`), Status: c.status, CreatedAt: at(c.at)}
			wantOK(t, "InsertMessage", tx.InsertMessage(ctx, m))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		ms, err := tx.PendingMessages(ctx, "turn-1")
		if err != nil {
			t.Fatalf("PendingMessages: %v", err)
		}
		checkIDs(t, "PendingMessages(turn-1)", messageIDs(ms), []string{"msg-9", "msg-7", "msg-4"})
		if len(ms) > 0 {
			check(t, "pending Message", ms[0], store.Message{ID: "msg-9", SessionID: "ses-1", TurnID: "turn-1",
				Content: raw(`[{"type":"text","text":"msg-9"}]`), Source: raw(`{"kind":"user"}`), Status: "admitted", CreatedAt: stored(at(1))})
		}
		ms, err = tx.PendingMessages(ctx, "turn-2")
		if err != nil {
			t.Fatalf("PendingMessages: %v", err)
		}
		checkIDs(t, "PendingMessages(turn-2)", messageIDs(ms), []string{"msg-5"})
		ms, err = tx.PendingMessages(ctx, "turn-none")
		if err != nil {
			t.Fatalf("PendingMessages: %v", err)
		}
		checkIDs(t, "PendingMessages(turn-none)", messageIDs(ms), nil)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		m, err := tx.GetMessage(ctx, "msg-9")
		if err != nil {
			t.Fatalf("GetMessage: %v", err)
		}
		m.Status = "delivered"
		wantOK(t, "UpdateMessage", tx.UpdateMessage(ctx, m))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		ms, err := tx.PendingMessages(ctx, "turn-1")
		if err != nil {
			t.Fatalf("PendingMessages: %v", err)
		}
		checkIDs(t, "PendingMessages(turn-1) after delivery", messageIDs(ms), []string{"msg-7", "msg-4"})
		return nil
	})
}

func testEvents(t *testing.T, s store.Store) {
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		n, err := tx.LastEventSequence(ctx, "ses-a")
		if err != nil || n != 0 {
			t.Errorf("LastEventSequence on an empty store = %d, %v; want 0", n, err)
		}
		es, err := tx.ListEvents(ctx, "ses-a", 0, 100)
		if err != nil || len(es) != 0 {
			t.Errorf("ListEvents on an empty store = %v, %v; want none", es, err)
		}
		return nil
	})
	var want []store.Event
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for i, e := range []*store.Event{
			{SessionID: "ses-a", Kind: "session.created", Data: raw(`{"agent":"a"}`), CreatedAt: at(40)},
			{SessionID: "ses-b", Kind: "session.created", Data: raw(`{"agent":"b"}`), CreatedAt: at(41)},
			{SessionID: "ses-a", TurnID: "turn-1", Kind: "turn.queued", Data: raw(`{"n":[1,2,3]}`), CreatedAt: at(42)},
			// A preset sequence is ignored; the store assigns it.
			{SessionID: "ses-a", TurnID: "turn-1", Kind: "turn.running", Data: raw(`{}`), Sequence: 99, CreatedAt: at(43)},
		} {
			wantOK(t, "AppendEvent", tx.AppendEvent(ctx, e))
			wantSeq := []int64{1, 1, 2, 3}[i]
			if e.Sequence != wantSeq {
				t.Errorf("AppendEvent #%d assigned sequence %d, want %d", i, e.Sequence, wantSeq)
			}
			if e.SessionID == "ses-a" {
				w := *e
				w.CreatedAt = stored(e.CreatedAt)
				want = append(want, w)
			}
		}
		n, err := tx.LastEventSequence(ctx, "ses-a")
		if err != nil || n != 3 {
			t.Errorf("LastEventSequence in the writing Update = %d, %v; want 3", n, err)
		}
		return nil
	})
	// Sequences continue across Updates; nil data is stored as {}.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		e := &store.Event{SessionID: "ses-a", TurnID: "turn-1", Kind: "turn.completed", CreatedAt: at(44)}
		wantOK(t, "AppendEvent", tx.AppendEvent(ctx, e))
		if e.Sequence != 4 {
			t.Errorf("AppendEvent in a later Update assigned sequence %d, want 4", e.Sequence)
		}
		w := *e
		w.Data = raw(`{}`)
		w.CreatedAt = stored(e.CreatedAt)
		want = append(want, w)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		es, err := tx.ListEvents(ctx, "ses-a", 0, 100)
		if err != nil {
			t.Fatalf("ListEvents: %v", err)
		}
		check(t, "ListEvents(ses-a)", es, want)
		for _, c := range []struct {
			session      string
			after        int64
			limit        int
			want         []int64
			wantLastSeq  int64
			checkLastSeq bool
		}{
			{"ses-a", 1, 2, []int64{2, 3}, 4, true},
			{"ses-a", 3, 100, []int64{4}, 0, false},
			{"ses-a", 4, 100, nil, 0, false},
			{"ses-a", 0, 1, []int64{1}, 0, false},
			{"ses-b", 0, 100, []int64{1}, 1, true},
			{"ses-none", 0, 100, nil, 0, true},
		} {
			es, err := tx.ListEvents(ctx, c.session, c.after, c.limit)
			if err != nil {
				t.Errorf("ListEvents(%s, %d, %d): %v", c.session, c.after, c.limit, err)
				continue
			}
			if got := eventSeqs(es); !slices.Equal(got, append([]int64{}, c.want...)) {
				t.Errorf("ListEvents(%s, %d, %d) sequences = %v, want %v", c.session, c.after, c.limit, got, c.want)
			}
			for _, e := range es {
				if e.SessionID != c.session {
					t.Errorf("ListEvents(%s) returned an event of %s", c.session, e.SessionID)
				}
			}
			if c.checkLastSeq {
				n, err := tx.LastEventSequence(ctx, c.session)
				if err != nil || n != c.wantLastSeq {
					t.Errorf("LastEventSequence(%s) = %d, %v; want %d", c.session, n, err, c.wantLastSeq)
				}
			}
		}
		return nil
	})
}
