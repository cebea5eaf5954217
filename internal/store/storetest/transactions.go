package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/helmr-go/helmr/internal/store"
)

// fixture is one row in every table, to see whether later writes change them.
func insertFixture(t *testing.T, s store.Store) {
	t.Helper()
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "PutMeta", tx.PutMeta(ctx, "m", "v1"))
		wantOK(t, "InsertSession", tx.InsertSession(ctx, newSession("ses-1", "a", "k")))
		wantOK(t, "InsertTurn", tx.InsertTurn(ctx, newTurn("ses-1", "turn-1", 1, "queued")))
		wantOK(t, "InsertMessage", tx.InsertMessage(ctx, &store.Message{ID: "msg-1", SessionID: "ses-1", TurnID: "turn-1",
			Content: raw(`[]`), Source: raw(`{}`), Status: "admitted", CreatedAt: at(1)}))
		wantOK(t, "AppendEvent", tx.AppendEvent(ctx, &store.Event{SessionID: "ses-1", Kind: "session.created", CreatedAt: at(1)}))
		wantOK(t, "PutProcess", tx.PutProcess(ctx, &store.Process{SessionID: "ses-1", LaunchID: "launch-1", PID: 10, LaunchedAt: at(1)}))
		wantOK(t, "InsertAsk", tx.InsertAsk(ctx, newAsk("ask-1", "turn-1", "pending", 1)))
		wantOK(t, "InsertToken", tx.InsertToken(ctx, newToken("tok-1", "ses-1", "pending", "k1", 1)))
		wantOK(t, "InsertWait", tx.InsertWait(ctx, &store.Wait{ID: "wait-1", SessionID: "ses-1", TurnID: "turn-1", Kind: "token",
			TargetID: "tok-1", Status: "waiting", CreatedAt: at(1)}))
		wantOK(t, "InsertComputer", tx.InsertComputer(ctx, newComputer("cmp-1", "ck", "available", 1)))
		wantOK(t, "InsertCommand", tx.InsertCommand(ctx, &store.Command{ID: "cmd-1", ComputerID: "cmp-1", Argv: []string{"true"},
			Status: "queued", CreatedAt: at(1)}))
		wantOK(t, "AppendCommandLog", tx.AppendCommandLog(ctx, &store.CommandLog{CommandID: "cmd-1", Sequence: 1, Stream: "stdout",
			Data: []byte("x"), At: at(1)}))
		return nil
	})
}

// writeEverything calls every write method of tx and returns their errors.
func writeEverything(ctx context.Context, tx store.Tx) []error {
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	add(tx.PutMeta(ctx, "m", "v2"))
	add(tx.PutMeta(ctx, "n", "new"))
	add(tx.InsertAPIKey(ctx, &store.APIKey{ID: "key-9", Name: "x", Hash: "h9", CreatedAt: at(9)}))
	add(tx.InsertDeployment(ctx, &store.Deployment{ID: "dep-9", Digest: "d9", Manifest: raw(`{}`), BinaryPath: "b", CreatedAt: at(9)}))
	add(tx.InsertSession(ctx, newSession("ses-9", "a", "k9")))
	changed := newSession("ses-1", "a", "k")
	changed.Status = "closed"
	add(tx.UpdateSession(ctx, changed))
	add(tx.InsertTurn(ctx, newTurn("ses-1", "turn-9", 2, "queued")))
	tr := newTurn("ses-1", "turn-1", 1, "running")
	add(tx.UpdateTurn(ctx, tr))
	add(tx.InsertMessage(ctx, &store.Message{ID: "msg-9", SessionID: "ses-1", TurnID: "turn-1",
		Content: raw(`[]`), Source: raw(`{}`), Status: "admitted", CreatedAt: at(9)}))
	add(tx.UpdateMessage(ctx, &store.Message{ID: "msg-1", SessionID: "ses-1", TurnID: "turn-1",
		Content: raw(`[]`), Source: raw(`{}`), Status: "delivered", CreatedAt: at(1)}))
	add(tx.AppendEvent(ctx, &store.Event{SessionID: "ses-1", Kind: "x", CreatedAt: at(9)}))
	add(tx.AppendEvent(ctx, &store.Event{SessionID: "ses-9", Kind: "x", CreatedAt: at(9)}))
	add(tx.InsertIdempotency(ctx, &store.Idempotency{Scope: "s", Key: "k", Digest: "d", Response: raw(`{}`), CreatedAt: at(9)}))
	add(tx.PutProcess(ctx, &store.Process{SessionID: "ses-9", LaunchID: "launch-9", PID: 9, LaunchedAt: at(9)}))
	add(tx.DeleteProcess(ctx, "ses-1", "launch-1"))
	add(tx.InsertAsk(ctx, newAsk("ask-9", "turn-1", "pending", 9)))
	responded := newAsk("ask-1", "turn-1", "responded", 1)
	responded.Answer, responded.ResolvedAt = raw(`"yes"`), ptr(at(9))
	add(tx.UpdateAsk(ctx, responded))
	add(tx.InsertToken(ctx, newToken("tok-9", "ses-1", "pending", "k9", 9)))
	completed := newToken("tok-1", "ses-1", "completed", "k1", 1)
	completed.Data, completed.ResolvedAt = raw(`{}`), ptr(at(9))
	add(tx.UpdateToken(ctx, completed))
	add(tx.InsertWait(ctx, &store.Wait{ID: "wait-9", SessionID: "ses-1", TurnID: "turn-1", Kind: "timer", Status: "waiting",
		Deadline: ptr(at(10)), CreatedAt: at(9)}))
	add(tx.UpdateWait(ctx, &store.Wait{ID: "wait-1", SessionID: "ses-1", TurnID: "turn-1", Kind: "token",
		TargetID: "tok-1", Status: "resolved", Outcome: raw(`{}`), CreatedAt: at(1), ResolvedAt: ptr(at(9))}))
	add(tx.InsertComputer(ctx, newComputer("cmp-9", "ck9", "available", 9)))
	gone := newComputer("cmp-1", "ck", "deleted", 1)
	gone.DeletedAt = ptr(at(9))
	add(tx.UpdateComputer(ctx, gone))
	add(tx.InsertCommand(ctx, &store.Command{ID: "cmd-9", ComputerID: "cmp-9", Argv: []string{"true"}, Status: "queued", CreatedAt: at(9)}))
	add(tx.UpdateCommand(ctx, &store.Command{ID: "cmd-1", ComputerID: "cmp-1", Argv: []string{"true"}, Status: "running",
		CreatedAt: at(1), StartedAt: ptr(at(9))}))
	add(tx.AppendCommandLog(ctx, &store.CommandLog{CommandID: "cmd-1", Sequence: 2, Stream: "stdout", Data: []byte("y"), At: at(9)}))
	add(tx.SetSessionIdleSince(ctx, "ses-1", ptr(at(9)), ptr(at(19))))
	hold := &store.Hold{ID: "hold-9", SessionID: "ses-1", Kind: "interrupt", CanRelease: true, CreatedAt: at(9)}
	add(tx.InsertHold(ctx, hold))
	hold.ReleasedAt = ptr(at(9))
	add(tx.UpdateHold(ctx, hold))
	add(tx.PutBinary(ctx, "digest-9", []byte("bin")))
	_, _, err := tx.AcquireLease(ctx, "ses-9", "node-9", time.Hour)
	add(err)
	_, err = tx.RenewLeases(ctx, "node-9", time.Hour)
	add(err)
	_, _, err = tx.AcquireLease(ctx, "ses-8", "node-9", time.Hour)
	add(err)
	add(tx.ReleaseLease(ctx, "ses-8", "node-9"))
	_, err = tx.Heartbeat(ctx, "node-9", "inc-9", time.Hour)
	add(err)
	_, err = tx.RequestCommandCancel(ctx, "cmd-1")
	add(err)
	_, err = tx.ExpireTurnPayloads(ctx, at(100), at(100), 10)
	add(err)
	return errs
}

// checkFixtureOnly verifies that the store holds the fixture and nothing of
// writeEverything.
func checkFixtureOnly(t *testing.T, s store.Store) {
	t.Helper()
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		if ses, err := tx.GetSession(ctx, "ses-1"); err != nil || ses.IdleSince != nil || ses.IdleCloseAt != nil {
			t.Errorf("GetSession(ses-1) = %+v, %v; want no idle time", ses, err)
		}
		_, err := tx.GetHold(ctx, "hold-9")
		wantErr(t, "GetHold(hold-9)", err, store.ErrNotFound)
		_, err = tx.GetBinary(ctx, "digest-9")
		wantErr(t, "GetBinary(digest-9)", err, store.ErrNotFound)
		if m, err := tx.Leases(ctx); err != nil || len(m) != 0 {
			t.Errorf("Leases = %v, %v; want none", m, err)
		}
		if m, err := tx.LiveNodes(ctx); err != nil || len(m) != 0 {
			t.Errorf("LiveNodes = %v, %v; want none", m, err)
		}
		if c, err := tx.GetCommand(ctx, "cmd-1"); err != nil || c.CancelRequested {
			t.Errorf("GetCommand(cmd-1) = %+v, %v; want no cancel requested", c, err)
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		if v, err := tx.GetMeta(ctx, "m"); err != nil || v != "v1" {
			t.Errorf("GetMeta(m) = %q, %v; want v1", v, err)
		}
		_, err := tx.GetMeta(ctx, "n")
		wantErr(t, "GetMeta(n)", err, store.ErrNotFound)
		_, err = tx.GetAPIKeyByHash(ctx, "h9")
		wantErr(t, "GetAPIKeyByHash", err, store.ErrNotFound)
		_, err = tx.GetDeployment(ctx, "dep-9")
		wantErr(t, "GetDeployment", err, store.ErrNotFound)
		_, err = tx.GetSession(ctx, "ses-9")
		wantErr(t, "GetSession(ses-9)", err, store.ErrNotFound)
		if ses, err := tx.GetSession(ctx, "ses-1"); err != nil || ses.Status != "open" {
			t.Errorf("GetSession(ses-1) = %+v, %v; want status open", ses, err)
		}
		_, err = tx.GetTurn(ctx, "ses-1", "turn-9")
		wantErr(t, "GetTurn(turn-9)", err, store.ErrNotFound)
		if tr, err := tx.GetTurn(ctx, "ses-1", "turn-1"); err != nil || tr.Status != "queued" {
			t.Errorf("GetTurn(turn-1) = %+v, %v; want status queued", tr, err)
		}
		_, err = tx.GetMessage(ctx, "msg-9")
		wantErr(t, "GetMessage(msg-9)", err, store.ErrNotFound)
		if m, err := tx.GetMessage(ctx, "msg-1"); err != nil || m.Status != "admitted" {
			t.Errorf("GetMessage(msg-1) = %+v, %v; want status admitted", m, err)
		}
		if n, err := tx.LastEventSequence(ctx, "ses-1"); err != nil || n != 1 {
			t.Errorf("LastEventSequence(ses-1) = %d, %v; want 1", n, err)
		}
		if n, err := tx.LastEventSequence(ctx, "ses-9"); err != nil || n != 0 {
			t.Errorf("LastEventSequence(ses-9) = %d, %v; want 0", n, err)
		}
		_, err = tx.GetIdempotency(ctx, "s", "k")
		wantErr(t, "GetIdempotency", err, store.ErrNotFound)
		_, err = tx.GetProcess(ctx, "ses-9")
		wantErr(t, "GetProcess(ses-9)", err, store.ErrNotFound)
		if p, err := tx.GetProcess(ctx, "ses-1"); err != nil || p.LaunchID != "launch-1" {
			t.Errorf("GetProcess(ses-1) = %+v, %v; want launch-1", p, err)
		}
		_, err = tx.GetAsk(ctx, "ask-9")
		wantErr(t, "GetAsk(ask-9)", err, store.ErrNotFound)
		if a, err := tx.GetAsk(ctx, "ask-1"); err != nil || a.Status != "pending" || a.Answer != nil {
			t.Errorf("GetAsk(ask-1) = %+v, %v; want status pending", a, err)
		}
		_, err = tx.GetToken(ctx, "tok-9")
		wantErr(t, "GetToken(tok-9)", err, store.ErrNotFound)
		if tk, err := tx.GetToken(ctx, "tok-1"); err != nil || tk.Status != "pending" || tk.Data != nil {
			t.Errorf("GetToken(tok-1) = %+v, %v; want status pending", tk, err)
		}
		_, err = tx.GetWait(ctx, "wait-9")
		wantErr(t, "GetWait(wait-9)", err, store.ErrNotFound)
		if w, err := tx.GetWait(ctx, "wait-1"); err != nil || w.Status != "waiting" || w.Outcome != nil {
			t.Errorf("GetWait(wait-1) = %+v, %v; want status waiting", w, err)
		}
		_, err = tx.GetComputer(ctx, "cmp-9")
		wantErr(t, "GetComputer(cmp-9)", err, store.ErrNotFound)
		if c, err := tx.GetComputer(ctx, "cmp-1"); err != nil || c.Status != "available" || c.DeletedAt != nil {
			t.Errorf("GetComputer(cmp-1) = %+v, %v; want status available", c, err)
		}
		_, err = tx.GetCommand(ctx, "cmd-9")
		wantErr(t, "GetCommand(cmd-9)", err, store.ErrNotFound)
		if c, err := tx.GetCommand(ctx, "cmd-1"); err != nil || c.Status != "queued" || c.StartedAt != nil {
			t.Errorf("GetCommand(cmd-1) = %+v, %v; want status queued", c, err)
		}
		if ls, err := tx.ListCommandLogs(ctx, "cmd-1", 0, 10); err != nil || len(ls) != 1 || string(ls[0].Data) != "x" {
			t.Errorf("ListCommandLogs(cmd-1) = %+v, %v; want the fixture's one chunk", ls, err)
		}
		return nil
	})
}

func testUpdateErrorWritesNothing(t *testing.T, s store.Store) {
	insertFixture(t, s)
	err := s.Update(t.Context(), func(tx store.Tx) error {
		for i, err := range writeEverything(t.Context(), tx) {
			if err != nil {
				t.Errorf("write #%d in Update: %v", i, err)
			}
		}
		return fmt.Errorf("wrapped: %w", errRollback)
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("Update returned %v, want the error of its fn", err)
	}
	checkFixtureOnly(t, s)
	// The store still takes writes afterwards.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		e := &store.Event{SessionID: "ses-1", Kind: "after", CreatedAt: at(10)}
		wantOK(t, "AppendEvent", tx.AppendEvent(ctx, e))
		if e.Sequence != 2 {
			t.Errorf("AppendEvent after a failed Update assigned sequence %d, want 2", e.Sequence)
		}
		return nil
	})
}

func testUpdateCanceledContext(t *testing.T, s store.Store) {
	insertFixture(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := s.Update(ctx, func(tx store.Tx) error {
		writeEverything(ctx, tx)
		return nil
	})
	if err == nil {
		t.Fatal("Update with a canceled context succeeded")
	}
	checkFixtureOnly(t, s)
}

// testTxUsableAfterError: a refused insert or a missing row does not spoil
// the transaction; the engine relies on "insert, and on ErrDuplicate read the
// existing row" within one Update. (A PostgreSQL store needs a savepoint
// around statements that may fail.)
func testTxUsableAfterError(t *testing.T, s store.Store) {
	insertFixture(t, s)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantErr(t, "InsertSession(duplicate key)", tx.InsertSession(ctx, newSession("ses-2", "a", "k")), store.ErrDuplicate)
		existing, err := tx.GetSessionByKey(ctx, "a", "k")
		if err != nil || existing.ID != "ses-1" {
			t.Errorf("GetSessionByKey after ErrDuplicate = %v, %v", existing, err)
		}
		_, err = tx.GetTurn(ctx, "ses-1", "turn-missing")
		wantErr(t, "GetTurn(missing)", err, store.ErrNotFound)
		wantErr(t, "InsertTurn(duplicate)", tx.InsertTurn(ctx, newTurn("ses-1", "turn-1", 1, "queued")), store.ErrDuplicate)
		wantOK(t, "InsertTurn after errors", tx.InsertTurn(ctx, newTurn("ses-1", "turn-2", 2, "queued")))
		e := &store.Event{SessionID: "ses-1", Kind: "turn.queued", CreatedAt: at(2)}
		wantOK(t, "AppendEvent after errors", tx.AppendEvent(ctx, e))
		if e.Sequence != 2 {
			t.Errorf("AppendEvent assigned %d, want 2", e.Sequence)
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.GetTurn(ctx, "ses-1", "turn-2"); err != nil {
			t.Errorf("GetTurn(turn-2) written after errors in the same Update: %v", err)
		}
		if n, err := tx.LastEventSequence(ctx, "ses-1"); err != nil || n != 2 {
			t.Errorf("LastEventSequence = %d, %v; want 2", n, err)
		}
		_, err := tx.GetSession(ctx, "ses-2")
		wantErr(t, "GetSession(refused)", err, store.ErrNotFound)
		return nil
	})
}

func testViewIsReadOnly(t *testing.T, s store.Store) {
	insertFixture(t, s)
	err := s.View(t.Context(), func(tx store.Tx) error {
		for i, err := range writeEverything(t.Context(), tx) {
			if err == nil {
				t.Errorf("write #%d in View succeeded", i)
			}
		}
		// Reads still work after refused writes.
		if v, err := tx.GetMeta(t.Context(), "m"); err != nil || v != "v1" {
			t.Errorf("GetMeta after refused writes = %q, %v", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	checkFixtureOnly(t, s)
	err = s.View(t.Context(), func(tx store.Tx) error { return fmt.Errorf("wrapped: %w", errRollback) })
	if !errors.Is(err, errRollback) {
		t.Errorf("View returned %v, want the error of its fn", err)
	}
}

// testRead: Read refuses writes like View, and each of its reads sees what
// was committed before it, including Updates that commit while it runs.
func testRead(t *testing.T, s store.Store) {
	insertFixture(t, s)
	err := s.Read(t.Context(), func(tx store.Tx) error {
		if v, err := tx.GetMeta(t.Context(), "m"); err != nil || v != "v1" {
			t.Errorf("GetMeta = %q, %v", v, err)
		}
		for i, err := range writeEverything(t.Context(), tx) {
			if err == nil {
				t.Errorf("write #%d in Read succeeded", i)
			}
		}
		if _, err := tx.GetSession(t.Context(), "ses-none"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetSession(ses-none) in Read = %v, want ErrNotFound", err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	checkFixtureOnly(t, s)
	err = s.Read(t.Context(), func(tx store.Tx) error {
		update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.PutMeta(ctx, "m", "v2") })
		if v, err := tx.GetMeta(t.Context(), "m"); err != nil || (v != "v2" && v != "v1") {
			t.Errorf("GetMeta after a concurrent Update = %q, %v", v, err)
		}
		return fmt.Errorf("wrapped: %w", errRollback)
	})
	if !errors.Is(err, errRollback) {
		t.Errorf("Read returned %v, want the error of its fn", err)
	}
	err = s.Read(t.Context(), func(tx store.Tx) error {
		if v, err := tx.GetMeta(t.Context(), "m"); err != nil || v != "v2" {
			t.Errorf("GetMeta in a Read after an Update = %q, %v; want v2", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
}

// testViewIsSnapshot: a View does not see Updates that commit while it runs.
func testViewIsSnapshot(t *testing.T, s store.Store) {
	insertFixture(t, s)
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		if v, err := tx.GetMeta(ctx, "m"); err != nil || v != "v1" {
			t.Fatalf("GetMeta = %q, %v", v, err)
		}
		update(t, s, func(ctx context.Context, tx store.Tx) error {
			wantOK(t, "PutMeta", tx.PutMeta(ctx, "m", "v2"))
			wantOK(t, "AppendEvent", tx.AppendEvent(ctx, &store.Event{SessionID: "ses-1", Kind: "x", CreatedAt: at(2)}))
			return nil
		})
		if v, err := tx.GetMeta(ctx, "m"); err != nil || v != "v1" {
			t.Errorf("GetMeta in the View after a concurrent Update = %q, %v; want v1", v, err)
		}
		if n, err := tx.LastEventSequence(ctx, "ses-1"); err != nil || n != 1 {
			t.Errorf("LastEventSequence in the View after a concurrent Update = %d, %v; want 1", n, err)
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		if v, err := tx.GetMeta(ctx, "m"); err != nil || v != "v2" {
			t.Errorf("GetMeta in a later View = %q, %v; want v2", v, err)
		}
		return nil
	})
}

// testConcurrentUpdates runs many Updates at once, so that a store that
// commits them in groups commits many together, some of them failing. Each
// goroutine appends to its own Session and to a shared one.
func testConcurrentUpdates(t *testing.T, s store.Store) {
	const (
		workers = 50
		rounds  = 8
		shared  = "ses-shared"
	)
	own := func(w int) string { return fmt.Sprintf("ses-w%02d", w) }
	// failsAt says which round of a worker runs an Update that fails after
	// writing (-1: none).
	failsAt := func(w int) int {
		if w%5 == 2 {
			return w % rounds
		}
		return -1
	}

	// The first Update blocks until every worker is about to call Update,
	// so that their Updates queue up behind it.
	var ready sync.WaitGroup
	ready.Add(workers)
	blocked := make(chan error, 1)
	go func() {
		blocked <- s.Update(t.Context(), func(tx store.Tx) error {
			ready.Wait()
			return tx.PutMeta(t.Context(), "gate", "open")
		})
	}()

	type result struct {
		worker, round int
		fails         bool
		err           error
	}
	results := make(chan result, workers*(rounds+1))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			first := true
			for r := range rounds {
				// A failing Update runs before the round's successful one.
				runs := []bool{false}
				if r == failsAt(w) {
					runs = []bool{true, false}
				}
				for _, fails := range runs {
					if first {
						ready.Done()
						first = false
					}
					err := s.Update(t.Context(), func(tx store.Tx) error {
						data := raw(fmt.Sprintf(`{"worker":%d,"round":%d,"fails":%t}`, w, r, fails))
						for _, ses := range []string{own(w), shared} {
							e := &store.Event{SessionID: ses, Kind: "test", Data: data, CreatedAt: at(r)}
							if err := tx.AppendEvent(t.Context(), e); err != nil {
								return err
							}
						}
						if fails {
							return errRollback
						}
						return nil
					})
					results <- result{w, r, fails, err}
				}
			}
		})
	}
	wg.Wait()
	close(results)
	if err := <-blocked; err != nil {
		t.Fatalf("blocking Update: %v", err)
	}
	for res := range results {
		switch {
		case res.fails && !errors.Is(res.err, errRollback):
			t.Errorf("worker %d round %d: failing Update returned %v, want its own error", res.worker, res.round, res.err)
		case !res.fails && res.err != nil:
			t.Errorf("worker %d round %d: Update: %v", res.worker, res.round, res.err)
		}
	}

	type payload struct {
		Worker int  `json:"worker"`
		Round  int  `json:"round"`
		Fails  bool `json:"fails"`
	}
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		if v, err := tx.GetMeta(ctx, "gate"); err != nil || v != "open" {
			t.Errorf("GetMeta(gate) = %q, %v", v, err)
		}
		for w := range workers {
			es, err := tx.ListEvents(ctx, own(w), 0, 1000)
			if err != nil {
				t.Fatalf("ListEvents: %v", err)
			}
			if len(es) != rounds {
				t.Errorf("%s has %d events, want %d", own(w), len(es), rounds)
			}
			for i, e := range es {
				var p payload
				if err := json.Unmarshal(e.Data, &p); err != nil {
					t.Fatalf("event data %s: %v", e.Data, err)
				}
				if e.Sequence != int64(i+1) || p != (payload{Worker: w, Round: i}) {
					t.Errorf("%s event %d: sequence %d, data %s; want sequence %d of round %d", own(w), i, e.Sequence, e.Data, i+1, i)
				}
			}
		}
		es, err := tx.ListEvents(ctx, shared, 0, 1000)
		if err != nil {
			t.Fatalf("ListEvents: %v", err)
		}
		if len(es) != workers*rounds {
			t.Errorf("shared Session has %d events, want %d", len(es), workers*rounds)
		}
		next := make([]int, workers) // next round expected of each worker
		for i, e := range es {
			var p payload
			if err := json.Unmarshal(e.Data, &p); err != nil {
				t.Fatalf("event data %s: %v", e.Data, err)
			}
			if e.Sequence != int64(i+1) {
				t.Errorf("shared event %d has sequence %d", i, e.Sequence)
			}
			if p.Fails || p.Worker < 0 || p.Worker >= workers || p.Round != next[p.Worker] {
				t.Errorf("shared event %d: %s; want worker's round %d of a successful Update", e.Sequence, e.Data, next[max(0, min(p.Worker, workers-1))])
				continue
			}
			next[p.Worker]++
		}
		if n, err := tx.LastEventSequence(ctx, shared); err != nil || n != workers*rounds {
			t.Errorf("LastEventSequence(shared) = %d, %v; want %d", n, err, workers*rounds)
		}
		return nil
	})
}

// testUUIDIDs uses real UUIDv7 IDs, as the engine does: a store may encode
// them compactly, and every read must give them back exactly and in order.
func testUUIDIDs(t *testing.T, s store.Store) {
	sid := uuid.Must(uuid.NewV7()).String()
	var ids []string
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "InsertSession", tx.InsertSession(ctx, newSession(sid, "agent", "")))
		for i := 1; i <= 3; i++ {
			id := uuid.Must(uuid.NewV7()).String()
			ids = append(ids, id)
			wantOK(t, "InsertTurn", tx.InsertTurn(ctx, newTurn(sid, id, int64(i), "queued")))
			wantOK(t, "AppendEvent", tx.AppendEvent(ctx, &store.Event{SessionID: sid, TurnID: id, Kind: "turn.queued", CreatedAt: at(i)}))
		}
		return tx.AppendEvent(ctx, &store.Event{SessionID: sid, Kind: "session.note", CreatedAt: at(4)})
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for i, id := range ids {
			got, err := tx.GetTurn(ctx, sid, id)
			if err != nil || got.ID != id || got.SessionID != sid || got.Sequence != int64(i+1) {
				t.Errorf("GetTurn(%s) = %+v, %v", id, got, err)
			}
		}
		turns, err := tx.ListTurns(ctx, sid, 0, 10)
		if err != nil || len(turns) != 3 || turns[0].ID != ids[0] || turns[2].ID != ids[2] {
			t.Errorf("ListTurns = %+v, %v", turns, err)
		}
		active, err := tx.ActiveTurn(ctx, sid)
		if err != nil || active.ID != ids[0] {
			t.Errorf("ActiveTurn = %+v, %v", active, err)
		}
		evs, err := tx.ListEvents(ctx, sid, 0, 10)
		if err != nil || len(evs) != 4 || evs[0].SessionID != sid || evs[1].TurnID != ids[1] || evs[3].TurnID != "" {
			t.Errorf("ListEvents = %+v, %v", evs, err)
		}
		work, err := tx.SessionsWithWork(ctx)
		if err != nil || len(work) != 1 || work[0] != sid {
			t.Errorf("SessionsWithWork = %v, %v", work, err)
		}
		if _, err := tx.GetTurn(ctx, uuid.Must(uuid.NewV7()).String(), ids[0]); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetTurn in another session: %v", err)
		}
		return nil
	})
}
