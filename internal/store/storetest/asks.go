package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/helmr-go/helmr/internal/store"
)

func storedAsk(a store.Ask) store.Ask {
	a.CreatedAt = stored(a.CreatedAt)
	a.ResolvedAt = storedPtr(a.ResolvedAt)
	return a
}

func askIDs(as []store.Ask) []string {
	ids := []string{}
	for _, a := range as {
		ids = append(ids, a.ID)
	}
	return ids
}

func newAsk(id, turnID, status string, n int) *store.Ask {
	return &store.Ask{ID: id, SessionID: "ses-1", TurnID: turnID, Status: status,
		Question: raw(`{"text":"` + id + `?"}`), CreatedAt: at(n)}
}

func testAsks(t *testing.T, s store.Store) {
	full := &store.Ask{
		ID:          "ask-1",
		SessionID:   "ses-1",
		TurnID:      "turn-1",
		Status:      "responded",
		Question:    raw(`{"text":"Ship it?","choices":["yes","no"],"nested":{"n":[1,2.5]}}`),
		Answer:      raw(`{"choice":"yes","note":"ünïcode \"quoted\""}`),
		RespondedBy: raw(`{"kind":"user","id":"u-1"}`),
		ResponseID:  "resp-1",
		CreatedAt:   at(70),
		ResolvedAt:  ptr(at(71)),
	}
	// Nil JSON and nil times stay nil.
	minimal := &store.Ask{ID: "ask-2", SessionID: "ses-1", TurnID: "turn-1", Status: "pending", CreatedAt: at(72)}
	// JSON null and empty values are not nil.
	empties := &store.Ask{ID: "ask-3", SessionID: "ses-1", TurnID: "turn-1", Status: "pending",
		Question: raw(`null`), Answer: raw(`{}`), RespondedBy: raw(`""`), CreatedAt: at(73)}
	all := []*store.Ask{full, minimal, empties}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, a := range all {
			wantOK(t, "InsertAsk("+a.ID+")", tx.InsertAsk(ctx, a))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, want := range all {
			got, err := tx.GetAsk(ctx, want.ID)
			if err != nil {
				t.Errorf("GetAsk(%s): %v", want.ID, err)
				continue
			}
			check(t, "GetAsk("+want.ID+")", *got, storedAsk(*want))
		}
		_, err := tx.GetAsk(ctx, "ask-missing")
		wantErr(t, "GetAsk(missing)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		dup := *minimal
		dup.ID = full.ID
		wantErr(t, "InsertAsk(same id)", tx.InsertAsk(ctx, &dup), store.ErrDuplicate)
		// The transaction goes on after the refused insert.
		got, err := tx.GetAsk(ctx, full.ID)
		if err != nil {
			t.Fatalf("GetAsk after ErrDuplicate: %v", err)
		}
		check(t, "GetAsk after refused duplicate", *got, storedAsk(*full))
		return nil
	})
	// pending → responded with every mutable field set.
	responded := *minimal
	responded.Status = "responded"
	responded.Answer = raw(`{"text":"later"}`)
	responded.RespondedBy = raw(`{"kind":"session","id":"ses-9"}`)
	responded.ResponseID = "resp-2"
	responded.ResolvedAt = ptr(at(74))
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateAsk", tx.UpdateAsk(ctx, &responded))
		got, err := tx.GetAsk(ctx, minimal.ID)
		if err != nil {
			t.Fatalf("GetAsk in the writing Update: %v", err)
		}
		check(t, "GetAsk in the writing Update", *got, storedAsk(responded))
		missing := *minimal
		missing.ID = "ask-missing"
		wantErr(t, "UpdateAsk(missing)", tx.UpdateAsk(ctx, &missing), store.ErrNotFound)
		// The transaction goes on after ErrNotFound.
		wantOK(t, "InsertAsk after ErrNotFound", tx.InsertAsk(ctx, newAsk("ask-4", "turn-1", "pending", 75)))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetAsk(ctx, minimal.ID)
		if err != nil {
			t.Fatalf("GetAsk: %v", err)
		}
		check(t, "updated Ask", *got, storedAsk(responded))
		got, err = tx.GetAsk(ctx, full.ID)
		if err != nil {
			t.Fatalf("GetAsk: %v", err)
		}
		check(t, "other Ask", *got, storedAsk(*full))
		_, err = tx.GetAsk(ctx, "ask-missing")
		wantErr(t, "GetAsk(refused update)", err, store.ErrNotFound)
		if _, err := tx.GetAsk(ctx, "ask-4"); err != nil {
			t.Errorf("GetAsk(ask-4) written after ErrNotFound: %v", err)
		}
		return nil
	})
	// JSON and times go back to nil.
	cleared := responded
	cleared.Status, cleared.Answer, cleared.RespondedBy, cleared.ResponseID, cleared.ResolvedAt = "cancelled", nil, nil, "", nil
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateAsk(cleared)", tx.UpdateAsk(ctx, &cleared))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetAsk(ctx, minimal.ID)
		if err != nil {
			t.Fatalf("GetAsk: %v", err)
		}
		check(t, "cleared Ask", *got, storedAsk(cleared))
		return nil
	})
}

func testListAsks(t *testing.T, s store.Store) {
	// IDs sort by creation; inserted out of order.
	asks := []*store.Ask{
		newAsk("ask-1", "turn-1", "responded", 1),
		newAsk("ask-2", "turn-1", "pending", 2),
		newAsk("ask-3", "turn-2", "pending", 3),
		newAsk("ask-4", "turn-1", "cancelled", 4),
		newAsk("ask-5", "turn-1", "pending", 5),
		newAsk("ask-6", "turn-1", "pending", 6),
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, i := range []int{4, 0, 2, 5, 1, 3} {
			wantOK(t, "InsertAsk", tx.InsertAsk(ctx, asks[i]))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []struct {
			turn, after string
			limit       int
			want        []string
		}{
			{"turn-1", "", 100, []string{"ask-1", "ask-2", "ask-4", "ask-5", "ask-6"}},
			{"turn-1", "", 2, []string{"ask-1", "ask-2"}},
			{"turn-1", "ask-2", 2, []string{"ask-4", "ask-5"}},
			{"turn-1", "ask-3", 100, []string{"ask-4", "ask-5", "ask-6"}},
			{"turn-1", "ask-6", 100, nil},
			{"turn-2", "", 100, []string{"ask-3"}},
			{"turn-none", "", 100, nil},
		} {
			as, err := tx.ListAsks(ctx, c.turn, c.after, c.limit)
			if err != nil {
				t.Errorf("ListAsks(%s, %q, %d): %v", c.turn, c.after, c.limit, err)
				continue
			}
			checkIDs(t, fmt.Sprintf("ListAsks(%s, %q, %d)", c.turn, c.after, c.limit), askIDs(as), c.want)
		}
		as, err := tx.ListAsks(ctx, "turn-1", "ask-1", 1)
		if err != nil || len(as) != 1 {
			t.Fatalf("ListAsks = %v, %v", as, err)
		}
		check(t, "listed Ask", as[0], storedAsk(*asks[1]))

		as, err = tx.PendingAsks(ctx, "turn-1")
		if err != nil {
			t.Fatalf("PendingAsks: %v", err)
		}
		checkIDs(t, "PendingAsks(turn-1)", askIDs(as), []string{"ask-2", "ask-5", "ask-6"})
		if len(as) > 0 {
			check(t, "pending Ask", as[0], storedAsk(*asks[1]))
		}
		as, err = tx.PendingAsks(ctx, "turn-2")
		if err != nil {
			t.Fatalf("PendingAsks: %v", err)
		}
		checkIDs(t, "PendingAsks(turn-2)", askIDs(as), []string{"ask-3"})
		as, err = tx.PendingAsks(ctx, "turn-none")
		if err != nil {
			t.Fatalf("PendingAsks: %v", err)
		}
		checkIDs(t, "PendingAsks(turn-none)", askIDs(as), nil)
		for _, c := range []struct {
			status, before string
			limit          int
			want           []string
		}{
			{"pending", "", 100, []string{"ask-6", "ask-5", "ask-3", "ask-2"}},
			{"pending", "", 2, []string{"ask-6", "ask-5"}},
			{"pending", "ask-5", 2, []string{"ask-3", "ask-2"}},
			{"pending", "ask-2", 100, nil},
			{"responded", "", 100, []string{"ask-1"}},
			{"", "ask-5", 100, []string{"ask-4", "ask-3", "ask-2", "ask-1"}},
			{"none", "", 100, nil},
		} {
			as, err := tx.ListAsksByStatus(ctx, c.status, c.before, c.limit)
			if err != nil {
				t.Errorf("ListAsksByStatus(%q, %q, %d): %v", c.status, c.before, c.limit, err)
				continue
			}
			checkIDs(t, fmt.Sprintf("ListAsksByStatus(%q, %q, %d)", c.status, c.before, c.limit), askIDs(as), c.want)
		}
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		a, err := tx.GetAsk(ctx, "ask-5")
		if err != nil {
			t.Fatalf("GetAsk: %v", err)
		}
		a.Status, a.Answer, a.ResolvedAt = "responded", raw(`"ok"`), ptr(at(9))
		wantOK(t, "UpdateAsk", tx.UpdateAsk(ctx, a))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		as, err := tx.PendingAsks(ctx, "turn-1")
		if err != nil {
			t.Fatalf("PendingAsks: %v", err)
		}
		checkIDs(t, "PendingAsks(turn-1) after a response", askIDs(as), []string{"ask-2", "ask-6"})
		as, err = tx.ListAsks(ctx, "turn-1", "ask-4", 1)
		if err != nil || len(as) != 1 || as[0].Status != "responded" || string(as[0].Answer) != `"ok"` {
			t.Errorf("ListAsks after a response = %+v, %v", as, err)
		}
		return nil
	})
}
