package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/helmr-go/helmr/internal/store"
)

func storedToken(tk store.Token) store.Token {
	tk.CreatedAt = stored(tk.CreatedAt)
	tk.ExpiresAt = storedPtr(tk.ExpiresAt)
	tk.ResolvedAt = storedPtr(tk.ResolvedAt)
	return tk
}

func tokenIDs(ts []store.Token) []string {
	ids := []string{}
	for _, tk := range ts {
		ids = append(ids, tk.ID)
	}
	return ids
}

func newToken(id, sessionID, status, key string, n int) *store.Token {
	return &store.Token{ID: id, SessionID: sessionID, TurnID: "turn-1", Status: status,
		SecretHash: "sha256:" + id, IdempotencyKey: key, CreatedAt: at(n)}
}

func testTokens(t *testing.T, s store.Store) {
	full := &store.Token{
		ID:             "tok-1",
		SessionID:      "ses-1",
		TurnID:         "turn-1",
		Status:         "completed",
		Tags:           raw(`["approval","ünïcode"]`),
		Metadata:       raw(`{"order":{"id":42,"lines":[1,2.5,"x"]}}`),
		Data:           raw(`{"approved":true,"by":"u-1"}`),
		SecretHash:     "sha256:abcd",
		IdempotencyKey: "approve-42",
		CreatedAt:      at(80),
		ExpiresAt:      ptr(at(90)),
		ResolvedAt:     ptr(at(81)),
		Schema:         raw(`{"type":"object","required":["approved"]}`),
	}
	// Nil JSON and nil times stay nil.
	minimal := &store.Token{ID: "tok-2", SessionID: "ses-1", Status: "pending", CreatedAt: at(82)}
	// JSON null and empty values are not nil.
	empties := &store.Token{ID: "tok-3", SessionID: "ses-1", TurnID: "turn-1", Status: "pending",
		Tags: raw(`[]`), Metadata: raw(`{}`), Data: raw(`null`), CreatedAt: at(83)}
	all := []*store.Token{full, minimal, empties}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, tk := range all {
			wantOK(t, "InsertToken("+tk.ID+")", tx.InsertToken(ctx, tk))
		}
		// Tokens without a key never collide.
		wantOK(t, "InsertToken(no key)", tx.InsertToken(ctx, newToken("tok-4", "ses-1", "pending", "", 84)))
		// The same key in another Session is another Token.
		wantOK(t, "InsertToken(same key, other Session)", tx.InsertToken(ctx, newToken("tok-5", "ses-2", "pending", full.IdempotencyKey, 85)))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, want := range all {
			got, err := tx.GetToken(ctx, want.ID)
			if err != nil {
				t.Errorf("GetToken(%s): %v", want.ID, err)
				continue
			}
			check(t, "GetToken("+want.ID+")", *got, storedToken(*want))
		}
		_, err := tx.GetToken(ctx, "tok-missing")
		wantErr(t, "GetToken(missing)", err, store.ErrNotFound)

		got, err := tx.GetTokenByKey(ctx, "ses-1", full.IdempotencyKey)
		if err != nil {
			t.Fatalf("GetTokenByKey: %v", err)
		}
		check(t, "GetTokenByKey", *got, storedToken(*full))
		got, err = tx.GetTokenByKey(ctx, "ses-2", full.IdempotencyKey)
		if err != nil || got.ID != "tok-5" {
			t.Errorf("GetTokenByKey(ses-2) = %+v, %v; want tok-5", got, err)
		}
		_, err = tx.GetTokenByKey(ctx, "ses-3", full.IdempotencyKey)
		wantErr(t, "GetTokenByKey(other Session)", err, store.ErrNotFound)
		_, err = tx.GetTokenByKey(ctx, "ses-1", "other")
		wantErr(t, "GetTokenByKey(other key)", err, store.ErrNotFound)
		_, err = tx.GetTokenByKey(ctx, "ses-1", "")
		wantErr(t, "GetTokenByKey(empty key)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantErr(t, "InsertToken(same Session and key)", tx.InsertToken(ctx, newToken("tok-6", "ses-1", "pending", full.IdempotencyKey, 86)), store.ErrDuplicate)
		// Insert, and on ErrDuplicate read the existing Token, in one Update.
		got, err := tx.GetTokenByKey(ctx, "ses-1", full.IdempotencyKey)
		if err != nil || got.ID != full.ID {
			t.Errorf("GetTokenByKey after ErrDuplicate = %+v, %v; want %s", got, err, full.ID)
		}
		dup := *minimal
		dup.ID = full.ID
		dup.IdempotencyKey = "fresh"
		wantErr(t, "InsertToken(same id)", tx.InsertToken(ctx, &dup), store.ErrDuplicate)
		wantOK(t, "InsertToken after errors", tx.InsertToken(ctx, newToken("tok-7", "ses-1", "pending", "k7", 87)))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.GetToken(ctx, "tok-6")
		wantErr(t, "GetToken(refused duplicate key)", err, store.ErrNotFound)
		_, err = tx.GetTokenByKey(ctx, "ses-1", "fresh")
		wantErr(t, "GetTokenByKey(refused duplicate id)", err, store.ErrNotFound)
		got, err := tx.GetToken(ctx, full.ID)
		if err != nil {
			t.Fatalf("GetToken: %v", err)
		}
		check(t, "GetToken after refused duplicates", *got, storedToken(*full))
		got, err = tx.GetTokenByKey(ctx, "ses-1", "k7")
		if err != nil || got.ID != "tok-7" {
			t.Errorf("GetTokenByKey(k7) = %+v, %v", got, err)
		}
		return nil
	})
	// A wait gives the pending Token its schema; a later one replaces it.
	for _, sc := range []string{`{"type":"string"}`, `{"type":"object","properties":{"ok":{"type":"boolean"}}}`} {
		schemed := *minimal
		schemed.Schema = raw(sc)
		update(t, s, func(ctx context.Context, tx store.Tx) error {
			wantOK(t, "UpdateToken(schema)", tx.UpdateToken(ctx, &schemed))
			return nil
		})
		view(t, s, func(ctx context.Context, tx store.Tx) error {
			got, err := tx.GetToken(ctx, minimal.ID)
			if err != nil {
				t.Fatalf("GetToken after a schema: %v", err)
			}
			check(t, "GetToken after a schema", *got, storedToken(schemed))
			return nil
		})
	}
	// pending → completed with every mutable field set.
	completed := *minimal
	completed.Status = "completed"
	completed.Tags = raw(`["late"]`)
	completed.Metadata = raw(`{"m":1}`)
	completed.Data = raw(`{"result":[1,2,3]}`)
	completed.ExpiresAt = ptr(at(99))
	completed.ResolvedAt = ptr(at(88))
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateToken", tx.UpdateToken(ctx, &completed))
		got, err := tx.GetToken(ctx, minimal.ID)
		if err != nil {
			t.Fatalf("GetToken in the writing Update: %v", err)
		}
		check(t, "GetToken in the writing Update", *got, storedToken(completed))
		missing := *minimal
		missing.ID = "tok-missing"
		wantErr(t, "UpdateToken(missing)", tx.UpdateToken(ctx, &missing), store.ErrNotFound)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetToken(ctx, minimal.ID)
		if err != nil {
			t.Fatalf("GetToken: %v", err)
		}
		check(t, "updated Token", *got, storedToken(completed))
		got, err = tx.GetToken(ctx, empties.ID)
		if err != nil {
			t.Fatalf("GetToken: %v", err)
		}
		check(t, "other Token", *got, storedToken(*empties))
		_, err = tx.GetToken(ctx, "tok-missing")
		wantErr(t, "GetToken(refused update)", err, store.ErrNotFound)
		return nil
	})
	// JSON and times go back to nil.
	cleared := *full
	cleared.Status, cleared.Tags, cleared.Metadata, cleared.Data, cleared.ExpiresAt, cleared.ResolvedAt = "cancelled", nil, nil, nil, nil, nil
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateToken(cleared)", tx.UpdateToken(ctx, &cleared))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetToken(ctx, full.ID)
		if err != nil {
			t.Fatalf("GetToken: %v", err)
		}
		check(t, "cleared Token", *got, storedToken(cleared))
		// The key still finds it.
		got, err = tx.GetTokenByKey(ctx, "ses-1", full.IdempotencyKey)
		if err != nil || got.ID != full.ID {
			t.Errorf("GetTokenByKey after UpdateToken = %+v, %v", got, err)
		}
		return nil
	})
}

func testListTokensByStatus(t *testing.T, s store.Store) {
	// IDs sort by creation; inserted out of order, across Sessions.
	tokens := []*store.Token{
		newToken("tok-1", "ses-1", "completed", "", 1),
		newToken("tok-2", "ses-1", "pending", "", 2),
		newToken("tok-3", "ses-2", "pending", "k", 3),
		newToken("tok-4", "ses-1", "cancelled", "", 4),
		newToken("tok-5", "ses-3", "expired", "", 5),
		newToken("tok-6", "ses-1", "pending", "", 6),
		newToken("tok-7", "ses-2", "pending", "", 7),
	}
	tokens[5].Schema = raw(`{"type":"object"}`)
	tokens[5].ExpiresAt = ptr(at(60))
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, i := range []int{4, 0, 6, 2, 5, 1, 3} {
			wantOK(t, "InsertToken", tx.InsertToken(ctx, tokens[i]))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []struct {
			status, before string
			limit          int
			want           []string
		}{
			{"pending", "", 100, []string{"tok-7", "tok-6", "tok-3", "tok-2"}},
			{"pending", "", 2, []string{"tok-7", "tok-6"}},
			{"pending", "tok-6", 2, []string{"tok-3", "tok-2"}},
			{"pending", "tok-2", 100, nil},
			{"completed", "", 100, []string{"tok-1"}},
			{"cancelled", "", 100, []string{"tok-4"}},
			{"expired", "", 100, []string{"tok-5"}},
			{"", "", 3, []string{"tok-7", "tok-6", "tok-5"}},
			{"", "tok-5", 100, []string{"tok-4", "tok-3", "tok-2", "tok-1"}},
			{"none", "", 100, nil},
		} {
			ts, err := tx.ListTokensByStatus(ctx, c.status, c.before, c.limit)
			if err != nil {
				t.Errorf("ListTokensByStatus(%q, %q, %d): %v", c.status, c.before, c.limit, err)
				continue
			}
			checkIDs(t, fmt.Sprintf("ListTokensByStatus(%q, %q, %d)", c.status, c.before, c.limit), tokenIDs(ts), c.want)
		}
		ts, err := tx.ListTokensByStatus(ctx, "pending", "tok-7", 1)
		if err != nil || len(ts) != 1 {
			t.Fatalf("ListTokensByStatus = %v, %v", ts, err)
		}
		check(t, "listed Token", ts[0], storedToken(*tokens[5]))
		return nil
	})
	// A completed Token leaves the pending list.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		tk, err := tx.GetToken(ctx, "tok-6")
		if err != nil {
			t.Fatalf("GetToken: %v", err)
		}
		tk.Status, tk.Data, tk.ResolvedAt = "completed", raw(`{}`), ptr(at(9))
		wantOK(t, "UpdateToken", tx.UpdateToken(ctx, tk))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		ts, err := tx.ListTokensByStatus(ctx, "pending", "", 100)
		if err != nil {
			t.Fatalf("ListTokensByStatus: %v", err)
		}
		checkIDs(t, "ListTokensByStatus(pending) after a completion", tokenIDs(ts), []string{"tok-7", "tok-3", "tok-2"})
		ts, err = tx.ListTokensByStatus(ctx, "completed", "", 100)
		if err != nil {
			t.Fatalf("ListTokensByStatus: %v", err)
		}
		checkIDs(t, "ListTokensByStatus(completed) after a completion", tokenIDs(ts), []string{"tok-6", "tok-1"})
		return nil
	})
}

func testExpiringTokens(t *testing.T, s store.Store) {
	withExpiry := func(tk *store.Token, n int) *store.Token {
		tk.ExpiresAt = ptr(at(n))
		return tk
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, tk := range []*store.Token{
			withExpiry(newToken("tok-1", "ses-1", "pending", "", 1), 30),
			withExpiry(newToken("tok-2", "ses-2", "pending", "k", 2), 10),
			newToken("tok-3", "ses-1", "pending", "", 3), // no expiry
			withExpiry(newToken("tok-4", "ses-1", "completed", "", 4), 5),
			withExpiry(newToken("tok-5", "ses-1", "expired", "", 5), 6),
			withExpiry(newToken("tok-6", "ses-3", "pending", "", 6), 20),
			withExpiry(newToken("tok-7", "ses-1", "cancelled", "", 7), 7),
			// Same expiry as tok-6: ties go by ID.
			withExpiry(newToken("tok-0", "ses-1", "pending", "", 8), 20),
		} {
			wantOK(t, "InsertToken("+tk.ID+")", tx.InsertToken(ctx, tk))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		ts, err := tx.ExpiringTokens(ctx)
		if err != nil {
			t.Fatalf("ExpiringTokens: %v", err)
		}
		checkIDs(t, "ExpiringTokens", tokenIDs(ts), []string{"tok-2", "tok-0", "tok-6", "tok-1"})
		if len(ts) > 0 {
			check(t, "expiring Token", ts[0], storedToken(*withExpiry(newToken("tok-2", "ses-2", "pending", "k", 2), 10)))
		}
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for id, f := range map[string]func(*store.Token){
			"tok-2": func(tk *store.Token) { tk.Status, tk.ResolvedAt = "expired", ptr(at(10)) },
			"tok-6": func(tk *store.Token) { tk.Status, tk.Data, tk.ResolvedAt = "completed", raw(`{}`), ptr(at(11)) },
			"tok-1": func(tk *store.Token) { tk.ExpiresAt = ptr(at(1)) },  // sooner
			"tok-3": func(tk *store.Token) { tk.ExpiresAt = ptr(at(25)) }, // gains an expiry
			"tok-0": func(tk *store.Token) { tk.ExpiresAt = nil },         // loses it
		} {
			tk, err := tx.GetToken(ctx, id)
			if err != nil {
				t.Fatalf("GetToken(%s): %v", id, err)
			}
			f(tk)
			wantOK(t, "UpdateToken("+id+")", tx.UpdateToken(ctx, tk))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		ts, err := tx.ExpiringTokens(ctx)
		if err != nil {
			t.Fatalf("ExpiringTokens: %v", err)
		}
		checkIDs(t, "ExpiringTokens after updates", tokenIDs(ts), []string{"tok-1", "tok-3"})
		return nil
	})
}

func storedWait(w store.Wait) store.Wait {
	w.Deadline = storedPtr(w.Deadline)
	w.CreatedAt = stored(w.CreatedAt)
	w.ResolvedAt = storedPtr(w.ResolvedAt)
	return w
}

func waitIDs(ws []store.Wait) []string {
	ids := []string{}
	for _, w := range ws {
		ids = append(ids, w.ID)
	}
	return ids
}

func testWaits(t *testing.T, s store.Store) {
	timer := &store.Wait{ID: "wait-1", SessionID: "ses-1", TurnID: "turn-1", Kind: "timer", Status: "waiting",
		Deadline: ptr(at(100)), CreatedAt: at(90)}
	// Durations keep every microsecond, up to long ones.
	token := &store.Wait{ID: "wait-2", SessionID: "ses-1", TurnID: "turn-1", Kind: "token", TargetID: "tok-1", Status: "waiting",
		Deadline: ptr(at(200)), IdleTimeout: 90*time.Second + 123456*time.Microsecond, CreatedAt: at(91)}
	resolved := &store.Wait{ID: "wait-3", SessionID: "ses-2", TurnID: "turn-2", Kind: "ask", TargetID: "ask-1", Status: "resolved",
		IdleTimeout: 400 * 24 * time.Hour, Outcome: raw(`{"kind":"answered","answer":{"a":[1,"ü"]}}`), CreatedAt: at(92), ResolvedAt: ptr(at(93))}
	// JSON null is not nil; a microsecond is kept.
	empties := &store.Wait{ID: "wait-4", SessionID: "ses-2", TurnID: "turn-2", Kind: "ask", TargetID: "ask-2", Status: "resolved",
		IdleTimeout: time.Microsecond, Outcome: raw(`null`), CreatedAt: at(94), ResolvedAt: ptr(at(95))}
	all := []*store.Wait{timer, token, resolved, empties}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, w := range all {
			wantOK(t, "InsertWait("+w.ID+")", tx.InsertWait(ctx, w))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, want := range all {
			got, err := tx.GetWait(ctx, want.ID)
			if err != nil {
				t.Errorf("GetWait(%s): %v", want.ID, err)
				continue
			}
			check(t, "GetWait("+want.ID+")", *got, storedWait(*want))
		}
		_, err := tx.GetWait(ctx, "wait-missing")
		wantErr(t, "GetWait(missing)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		dup := *resolved
		dup.ID = timer.ID
		wantErr(t, "InsertWait(same id)", tx.InsertWait(ctx, &dup), store.ErrDuplicate)
		got, err := tx.GetWait(ctx, timer.ID)
		if err != nil {
			t.Fatalf("GetWait after ErrDuplicate: %v", err)
		}
		check(t, "GetWait after refused duplicate", *got, storedWait(*timer))
		return nil
	})
	// waiting → resolved with every mutable field set.
	done := *token
	done.Status = "resolved"
	done.Deadline = ptr(at(150))
	done.IdleTimeout = 5*time.Minute + time.Microsecond
	done.Outcome = raw(`{"kind":"completed","data":{"ok":true}}`)
	done.ResolvedAt = ptr(at(96))
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateWait", tx.UpdateWait(ctx, &done))
		got, err := tx.GetWait(ctx, token.ID)
		if err != nil {
			t.Fatalf("GetWait in the writing Update: %v", err)
		}
		check(t, "GetWait in the writing Update", *got, storedWait(done))
		missing := *token
		missing.ID = "wait-missing"
		wantErr(t, "UpdateWait(missing)", tx.UpdateWait(ctx, &missing), store.ErrNotFound)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetWait(ctx, token.ID)
		if err != nil {
			t.Fatalf("GetWait: %v", err)
		}
		check(t, "updated Wait", *got, storedWait(done))
		got, err = tx.GetWait(ctx, timer.ID)
		if err != nil {
			t.Fatalf("GetWait: %v", err)
		}
		check(t, "other Wait", *got, storedWait(*timer))
		_, err = tx.GetWait(ctx, "wait-missing")
		wantErr(t, "GetWait(refused update)", err, store.ErrNotFound)
		return nil
	})
	// Times, the duration and JSON go back to zero and nil.
	cleared := done
	cleared.Status, cleared.Deadline, cleared.IdleTimeout, cleared.Outcome, cleared.ResolvedAt = "waiting", nil, 0, nil, nil
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateWait(cleared)", tx.UpdateWait(ctx, &cleared))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetWait(ctx, token.ID)
		if err != nil {
			t.Fatalf("GetWait: %v", err)
		}
		check(t, "cleared Wait", *got, storedWait(cleared))
		return nil
	})
}

func testOpenWaits(t *testing.T, s store.Store) {
	// IDs deliberately sort against creation time: order is oldest first.
	type row struct {
		id, session, kind, target, status string
		at                                int
	}
	rows := []row{
		{"wait-9", "ses-1", "timer", "", "waiting", 1},
		{"wait-8", "ses-2", "token", "tok-1", "waiting", 2},
		{"wait-7", "ses-1", "token", "tok-1", "resolved", 3},
		{"wait-6", "ses-1", "token", "tok-1", "waiting", 4},
		{"wait-5", "ses-3", "ask", "ask-1", "waiting", 5},
		{"wait-4", "ses-1", "ask", "ask-1", "resolved", 6},
		{"wait-3", "ses-2", "timer", "", "waiting", 7},
		{"wait-2", "ses-1", "token", "tok-2", "waiting", 8},
	}
	newWait := func(r row) *store.Wait {
		w := &store.Wait{ID: r.id, SessionID: r.session, TurnID: "turn-" + r.session, Kind: r.kind, TargetID: r.target,
			Status: r.status, Deadline: ptr(at(100 - r.at)), IdleTimeout: time.Duration(r.at) * time.Second, CreatedAt: at(r.at)}
		if r.status == "resolved" {
			w.Outcome, w.ResolvedAt = raw(`{"kind":"x"}`), ptr(at(50))
		}
		return w
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, i := range []int{3, 7, 0, 5, 1, 6, 2, 4} {
			wantOK(t, "InsertWait("+rows[i].id+")", tx.InsertWait(ctx, newWait(rows[i])))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []struct {
			session string
			want    []string
		}{
			{"ses-1", []string{"wait-9", "wait-6", "wait-2"}},
			{"ses-2", []string{"wait-8", "wait-3"}},
			{"ses-3", []string{"wait-5"}},
			{"ses-none", nil},
			{"", []string{"wait-9", "wait-8", "wait-6", "wait-5", "wait-3", "wait-2"}},
		} {
			ws, err := tx.OpenWaits(ctx, c.session)
			if err != nil {
				t.Errorf("OpenWaits(%q): %v", c.session, err)
				continue
			}
			checkIDs(t, fmt.Sprintf("OpenWaits(%q)", c.session), waitIDs(ws), c.want)
		}
		for _, c := range []struct {
			target string
			want   []string
		}{
			{"tok-1", []string{"wait-8", "wait-6"}},
			{"tok-2", []string{"wait-2"}},
			{"ask-1", []string{"wait-5"}},
			{"tok-none", nil},
		} {
			ws, err := tx.WaitsOn(ctx, c.target)
			if err != nil {
				t.Errorf("WaitsOn(%s): %v", c.target, err)
				continue
			}
			checkIDs(t, "WaitsOn("+c.target+")", waitIDs(ws), c.want)
		}
		// Listed rows carry every field.
		ws, err := tx.OpenWaits(ctx, "ses-2")
		if err != nil || len(ws) == 0 {
			t.Fatalf("OpenWaits(ses-2) = %v, %v", ws, err)
		}
		check(t, "open Wait", ws[0], storedWait(*newWait(rows[1])))
		ws, err = tx.WaitsOn(ctx, "ask-1")
		if err != nil || len(ws) == 0 {
			t.Fatalf("WaitsOn(ask-1) = %v, %v", ws, err)
		}
		check(t, "Wait on ask-1", ws[0], storedWait(*newWait(rows[4])))
		return nil
	})
	// A resolved wait is no longer open, nor waiting on its target.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		w, err := tx.GetWait(ctx, "wait-6")
		if err != nil {
			t.Fatalf("GetWait: %v", err)
		}
		w.Status, w.Outcome, w.ResolvedAt = "resolved", raw(`{"kind":"completed"}`), ptr(at(60))
		wantOK(t, "UpdateWait", tx.UpdateWait(ctx, w))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		ws, err := tx.OpenWaits(ctx, "ses-1")
		if err != nil {
			t.Fatalf("OpenWaits: %v", err)
		}
		checkIDs(t, "OpenWaits(ses-1) after resolving", waitIDs(ws), []string{"wait-9", "wait-2"})
		ws, err = tx.OpenWaits(ctx, "")
		if err != nil {
			t.Fatalf("OpenWaits: %v", err)
		}
		checkIDs(t, "OpenWaits(\"\") after resolving", waitIDs(ws), []string{"wait-9", "wait-8", "wait-5", "wait-3", "wait-2"})
		ws, err = tx.WaitsOn(ctx, "tok-1")
		if err != nil {
			t.Fatalf("WaitsOn: %v", err)
		}
		checkIDs(t, "WaitsOn(tok-1) after resolving", waitIDs(ws), []string{"wait-8"})
		return nil
	})
}

func storedHold(h store.Hold) store.Hold {
	h.CreatedAt, h.ReleasedAt, h.RecoveredAt = stored(h.CreatedAt), storedPtr(h.ReleasedAt), storedPtr(h.RecoveredAt)
	return h
}

func testHolds(t *testing.T, s store.Store) {
	interrupt := &store.Hold{ID: "hold-1", SessionID: "ses-1", Kind: "interrupt", CanRelease: true, CreatedAt: at(70), IssuerSessionID: "ses-0"}
	failed := &store.Hold{ID: "hold-2", SessionID: "ses-2", Kind: "process_failed", CanRelease: true,
		Reason: "the session process exited with status 7", CreatedAt: at(71)}
	other := &store.Hold{ID: "hold-3", SessionID: "ses-3", Kind: "storage_pressure", CreatedAt: at(72)}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, h := range []*store.Hold{interrupt, failed, other} {
			wantOK(t, "InsertHold("+h.ID+")", tx.InsertHold(ctx, h))
		}
		wantErr(t, "InsertHold(duplicate)", tx.InsertHold(ctx, interrupt), store.ErrDuplicate)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetHold(ctx, failed.ID)
		if err != nil {
			t.Fatalf("GetHold: %v", err)
		}
		check(t, "GetHold", *got, storedHold(*failed))
		_, err = tx.GetHold(ctx, "hold-missing")
		wantErr(t, "GetHold(missing)", err, store.ErrNotFound)
		hs, err := tx.ActiveHolds(ctx, []string{"ses-2", "ses-1"})
		if err != nil {
			t.Fatalf("ActiveHolds: %v", err)
		}
		check(t, "ActiveHolds(ses-1, ses-2)", hs, []store.Hold{storedHold(*interrupt), storedHold(*failed)})
		if hs, err := tx.ActiveHolds(ctx, nil); err != nil || len(hs) != 0 {
			t.Errorf("ActiveHolds(none) = %v, %v", hs, err)
		}
		if hs, err := tx.HoldsToRecover(ctx, "ses-2"); err != nil || len(hs) != 0 {
			t.Errorf("HoldsToRecover before release = %v, %v", hs, err)
		}
		return nil
	})
	// Released holds are no longer active; a released process_failed hold
	// waits for its reconstruction.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		interrupt.ReleasedAt, failed.ReleasedAt = ptr(at(73)), ptr(at(74))
		wantOK(t, "UpdateHold(interrupt)", tx.UpdateHold(ctx, interrupt))
		wantOK(t, "UpdateHold(failed)", tx.UpdateHold(ctx, failed))
		wantErr(t, "UpdateHold(missing)", tx.UpdateHold(ctx, &store.Hold{ID: "hold-missing"}), store.ErrNotFound)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		if hs, err := tx.ActiveHolds(ctx, []string{"ses-1", "ses-2", "ses-3"}); err != nil || len(hs) != 1 || hs[0].ID != other.ID {
			t.Errorf("ActiveHolds after release = %v, %v", hs, err)
		}
		hs, err := tx.HoldsToRecover(ctx, "ses-2")
		if err != nil {
			t.Fatalf("HoldsToRecover: %v", err)
		}
		check(t, "HoldsToRecover", hs, []store.Hold{storedHold(*failed)})
		if hs, err := tx.HoldsToRecover(ctx, "ses-1"); err != nil || len(hs) != 0 {
			t.Errorf("HoldsToRecover of an interrupt hold = %v, %v", hs, err)
		}
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		failed.RecoveredAt = ptr(at(75))
		wantOK(t, "UpdateHold(recovered)", tx.UpdateHold(ctx, failed))
		return nil
	})
	// Within one Update, ActiveHolds follows the holds that the same
	// transaction inserts, releases and makes active again.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		active := func(what string, want ...string) {
			t.Helper()
			hs, err := tx.ActiveHolds(ctx, []string{"ses-4", "ses-1"})
			var ids []string
			for _, h := range hs {
				ids = append(ids, h.ID)
			}
			if err != nil || fmt.Sprint(ids) != fmt.Sprint(want) {
				t.Errorf("ActiveHolds(ses-4, ses-1) %s = %v, %v; want %v", what, ids, err, want)
			}
		}
		active("without holds")
		h := &store.Hold{ID: "hold-4", SessionID: "ses-4", Kind: "interrupt", CanRelease: true, CreatedAt: at(76)}
		wantOK(t, "InsertHold", tx.InsertHold(ctx, h))
		active("after InsertHold", "hold-4")
		h.ReleasedAt = ptr(at(77))
		wantOK(t, "UpdateHold(released)", tx.UpdateHold(ctx, h))
		active("after its release")
		interrupt.ReleasedAt = nil
		wantOK(t, "UpdateHold(active again)", tx.UpdateHold(ctx, interrupt))
		active("after a hold is active again", "hold-1")
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		if hs, err := tx.HoldsToRecover(ctx, "ses-2"); err != nil || len(hs) != 0 {
			t.Errorf("HoldsToRecover after recovery = %v, %v", hs, err)
		}
		got, err := tx.GetHold(ctx, failed.ID)
		if err == nil {
			check(t, "GetHold(recovered)", *got, storedHold(*failed))
		}
		return nil
	})
}

// ActiveHoldsOfKind returns the unreleased holds of one kind on every
// Session, oldest first; a released one is gone at once.
func testActiveHoldsOfKind(t *testing.T, s store.Store) {
	hs := []*store.Hold{
		{ID: "hold-1", SessionID: "ses-2", Kind: "storage_pressure", Reason: "disk", CreatedAt: at(71)},
		{ID: "hold-2", SessionID: "ses-1", Kind: "storage_pressure", Reason: "disk", CreatedAt: at(70)},
		{ID: "hold-3", SessionID: "ses-1", Kind: "interrupt", CanRelease: true, CreatedAt: at(69)},
		{ID: "hold-4", SessionID: "ses-3", Kind: "storage_pressure", CreatedAt: at(60), ReleasedAt: ptr(at(61))},
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, h := range hs {
			wantOK(t, "InsertHold("+h.ID+")", tx.InsertHold(ctx, h))
		}
		return nil
	})
	list := func(kind string) []store.Hold {
		var out []store.Hold
		view(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			if out, err = tx.ActiveHoldsOfKind(ctx, kind); err != nil {
				t.Fatalf("ActiveHoldsOfKind(%s): %v", kind, err)
			}
			return nil
		})
		return out
	}
	check(t, "ActiveHoldsOfKind(storage_pressure)", list("storage_pressure"), []store.Hold{storedHold(*hs[1]), storedHold(*hs[0])})
	check(t, "ActiveHoldsOfKind(interrupt)", list("interrupt"), []store.Hold{storedHold(*hs[2])})
	if got := list("process_failed"); len(got) != 0 {
		t.Errorf("ActiveHoldsOfKind(process_failed) = %v, want none", got)
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		hs[1].ReleasedAt = ptr(at(72))
		return tx.UpdateHold(ctx, hs[1])
	})
	check(t, "ActiveHoldsOfKind after a release", list("storage_pressure"), []store.Hold{storedHold(*hs[0])})
}
