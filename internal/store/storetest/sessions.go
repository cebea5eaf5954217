package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/helmr-go/helmr/internal/store"
)

func testSessions(t *testing.T, s store.Store) {
	full := &store.Session{
		ID:                 "ses-1",
		DeploymentID:       "dep-1",
		RootSessionID:      "ses-0",
		Agent:              "support",
		Template:           "python",
		ComputerID:         "cmp-1",
		ParentSessionID:    "ses-0",
		RequesterSessionID: "ses-9",
		Key:                "ticket-42",
		Status:             "open",
		CloseAfterIdle:     "never",
		HibernateAfterIdle: "15m",
		MaxTurnDuration:    "1h",
		IdleSince:          ptr(at(7)),
		IdleCloseAt:        ptr(at(17)),
		InitialTurnID:      "turn-1",
		SlackChannelID:     "C0123456789",
		CreatedAt:          at(6),
	}
	minimal := &store.Session{
		ID:                 "ses-2",
		DeploymentID:       "dep-1",
		RootSessionID:      "ses-2",
		Agent:              "support",
		Template:           "default",
		Status:             "closed",
		CloseAfterIdle:     "7d",
		HibernateAfterIdle: "30s",
		CreatedAt:          at(8),
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "InsertSession(full)", tx.InsertSession(ctx, full))
		wantOK(t, "InsertSession(minimal)", tx.InsertSession(ctx, minimal))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, want := range []*store.Session{full, minimal} {
			got, err := tx.GetSession(ctx, want.ID)
			if err != nil {
				t.Errorf("GetSession(%s): %v", want.ID, err)
				continue
			}
			check(t, "GetSession("+want.ID+")", *got, storedSession(*want))
		}
		got, err := tx.GetSessionByKey(ctx, "support", "ticket-42")
		if err != nil {
			t.Fatalf("GetSessionByKey: %v", err)
		}
		check(t, "GetSessionByKey", *got, storedSession(*full))
		_, err = tx.GetSession(ctx, "ses-missing")
		wantErr(t, "GetSession(missing)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		dup := *minimal
		dup.Agent = "other"
		wantErr(t, "InsertSession(same id)", tx.InsertSession(ctx, &dup), store.ErrDuplicate)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetSession(ctx, minimal.ID)
		if err != nil {
			t.Fatalf("GetSession: %v", err)
		}
		check(t, "GetSession after refused duplicate", *got, storedSession(*minimal))
		return nil
	})
}

func testSessionKeys(t *testing.T, s store.Store) {
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "InsertSession(a, k)", tx.InsertSession(ctx, newSession("ses-1", "a", "k")))
		// The same key under another agent is another Session.
		wantOK(t, "InsertSession(b, k)", tx.InsertSession(ctx, newSession("ses-2", "b", "k")))
		// Sessions without a key never collide.
		wantOK(t, "InsertSession(a, '') #1", tx.InsertSession(ctx, newSession("ses-3", "a", "")))
		wantOK(t, "InsertSession(a, '') #2", tx.InsertSession(ctx, newSession("ses-4", "a", "")))
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		err := tx.InsertSession(ctx, newSession("ses-5", "a", "k"))
		wantErr(t, "InsertSession(a, k) again", err, store.ErrDuplicate)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []struct{ agent, key, want string }{{"a", "k", "ses-1"}, {"b", "k", "ses-2"}} {
			got, err := tx.GetSessionByKey(ctx, c.agent, c.key)
			if err != nil || got.ID != c.want {
				t.Errorf("GetSessionByKey(%s, %s) = %v, %v; want %s", c.agent, c.key, got, err, c.want)
			}
		}
		_, err := tx.GetSessionByKey(ctx, "c", "k")
		wantErr(t, "GetSessionByKey(other agent)", err, store.ErrNotFound)
		_, err = tx.GetSessionByKey(ctx, "a", "other")
		wantErr(t, "GetSessionByKey(other key)", err, store.ErrNotFound)
		_, err = tx.GetSessionByKey(ctx, "a", "")
		wantErr(t, "GetSessionByKey(empty key)", err, store.ErrNotFound)
		_, err = tx.GetSession(ctx, "ses-5")
		wantErr(t, "GetSession(refused duplicate key)", err, store.ErrNotFound)
		return nil
	})
}

func testUpdateSession(t *testing.T, s store.Store) {
	ses := newSession("ses-1", "a", "k")
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "InsertSession", tx.InsertSession(ctx, ses))
		wantOK(t, "InsertSession(other)", tx.InsertSession(ctx, newSession("ses-2", "a", "")))
		return nil
	})
	changed := *ses
	changed.ComputerID = "cmp-7"
	changed.Status = "closing"
	changed.IdleSince = ptr(at(9))
	changed.IdleCloseAt = ptr(at(19))
	changed.InitialTurnID = "turn-1"
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateSession", tx.UpdateSession(ctx, &changed))
		got, err := tx.GetSession(ctx, ses.ID)
		if err != nil {
			t.Fatalf("GetSession in the writing Update: %v", err)
		}
		check(t, "GetSession in the writing Update", *got, storedSession(changed))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetSession(ctx, ses.ID)
		if err != nil {
			t.Fatalf("GetSession: %v", err)
		}
		check(t, "updated Session", *got, storedSession(changed))
		other, err := tx.GetSession(ctx, "ses-2")
		if err != nil {
			t.Fatalf("GetSession(other): %v", err)
		}
		check(t, "other Session", *other, storedSession(*newSession("ses-2", "a", "")))
		return nil
	})
	// SetSessionIdleSince changes the idle time and its deadline alone.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "SetSessionIdleSince", tx.SetSessionIdleSince(ctx, ses.ID, ptr(at(11)), ptr(at(21))))
		got, err := tx.GetSession(ctx, ses.ID)
		if err != nil {
			t.Fatalf("GetSession: %v", err)
		}
		want := changed
		want.IdleSince, want.IdleCloseAt = ptr(at(11)), ptr(at(21))
		check(t, "Session after SetSessionIdleSince", *got, storedSession(want))
		wantOK(t, "SetSessionIdleSince(nil)", tx.SetSessionIdleSince(ctx, ses.ID, nil, nil))
		if got, _ := tx.GetSession(ctx, ses.ID); got.IdleSince != nil || got.IdleCloseAt != nil {
			t.Errorf("IdleSince, IdleCloseAt after clearing: %v, %v", got.IdleSince, got.IdleCloseAt)
		}
		return nil
	})
	// IdleSince goes back to nil.
	changed.IdleSince, changed.IdleCloseAt = nil, nil
	changed.Status = "closed"
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateSession(clear idle)", tx.UpdateSession(ctx, &changed))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetSession(ctx, ses.ID)
		if err != nil {
			t.Fatalf("GetSession: %v", err)
		}
		check(t, "Session with IdleSince cleared", *got, storedSession(changed))
		return nil
	})
}

func testListSessions(t *testing.T, s store.Store) {
	type row struct{ id, agent, key, status, parent, requester, computer string }
	rows := []row{
		{"ses-01", "a", "k1", "open", "", "", "cmp-1"},
		{"ses-02", "a", "", "closed", "", "", ""},
		{"ses-03", "b", "k1", "open", "ses-01", "ses-01", "cmp-2"},
		{"ses-04", "a", "k2", "closing", "ses-01", "ses-03", "cmp-1"},
		{"ses-05", "b", "", "open", "ses-03", "ses-01", ""},
		{"ses-06", "a", "", "open", "", "ses-03", "cmp-1"},
		{"ses-07", "c", "k3", "closed", "ses-01", "", "cmp-2"},
		{"ses-08", "a", "k3", "open", "", "", "cmp-1"},
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		// Insert in reverse so that insertion order is not ID order.
		for _, r := range slices.Backward(rows) {
			ses := newSession(r.id, r.agent, r.key)
			ses.Status, ses.ParentSessionID, ses.RequesterSessionID, ses.ComputerID = r.status, r.parent, r.requester, r.computer
			wantOK(t, "InsertSession("+r.id+")", tx.InsertSession(ctx, ses))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []struct {
			name string
			f    store.SessionFilter
			want []string
		}{
			{"all", store.SessionFilter{Limit: 100}, []string{"ses-01", "ses-02", "ses-03", "ses-04", "ses-05", "ses-06", "ses-07", "ses-08"}},
			{"agent", store.SessionFilter{Agent: "a", Limit: 100}, []string{"ses-01", "ses-02", "ses-04", "ses-06", "ses-08"}},
			{"key", store.SessionFilter{Key: "k1", Limit: 100}, []string{"ses-01", "ses-03"}},
			{"agent and key", store.SessionFilter{Agent: "a", Key: "k3", Limit: 100}, []string{"ses-08"}},
			{"one status", store.SessionFilter{Statuses: []string{"closed"}, Limit: 100}, []string{"ses-02", "ses-07"}},
			{"statuses", store.SessionFilter{Statuses: []string{"open", "closing"}, Limit: 100}, []string{"ses-01", "ses-03", "ses-04", "ses-05", "ses-06", "ses-08"}},
			{"parent", store.SessionFilter{ParentSessionID: "ses-01", Limit: 100}, []string{"ses-03", "ses-04", "ses-07"}},
			{"requester", store.SessionFilter{RequesterSessionID: "ses-03", Limit: 100}, []string{"ses-04", "ses-06"}},
			{"parent and requester", store.SessionFilter{ParentSessionID: "ses-01", RequesterSessionID: "ses-01", Limit: 100}, []string{"ses-03"}},
			{"agent and statuses", store.SessionFilter{Agent: "b", Statuses: []string{"open"}, Limit: 100}, []string{"ses-03", "ses-05"}},
			{"no match", store.SessionFilter{Agent: "zzz", Limit: 100}, nil},
			{"limit", store.SessionFilter{Limit: 3}, []string{"ses-01", "ses-02", "ses-03"}},
			{"after", store.SessionFilter{AfterID: "ses-03", Limit: 3}, []string{"ses-04", "ses-05", "ses-06"}},
			{"after last", store.SessionFilter{AfterID: "ses-08", Limit: 3}, nil},
			{"after with filter", store.SessionFilter{Agent: "a", AfterID: "ses-02", Limit: 2}, []string{"ses-04", "ses-06"}},
			{"after with statuses", store.SessionFilter{Statuses: []string{"open"}, AfterID: "ses-05", Limit: 100}, []string{"ses-06", "ses-08"}},
			{"computer", store.SessionFilter{ComputerID: "cmp-1", Limit: 100}, []string{"ses-01", "ses-04", "ses-06", "ses-08"}},
			{"other computer", store.SessionFilter{ComputerID: "cmp-2", Limit: 100}, []string{"ses-03", "ses-07"}},
			{"computer and statuses", store.SessionFilter{ComputerID: "cmp-1", Statuses: []string{"open"}, Limit: 100}, []string{"ses-01", "ses-06", "ses-08"}},
			{"computer and agent", store.SessionFilter{ComputerID: "cmp-2", Agent: "c", Limit: 100}, []string{"ses-07"}},
			{"computer and parent", store.SessionFilter{ComputerID: "cmp-1", ParentSessionID: "ses-01", Limit: 100}, []string{"ses-04"}},
			{"computer after", store.SessionFilter{ComputerID: "cmp-1", AfterID: "ses-01", Limit: 2}, []string{"ses-04", "ses-06"}},
			{"computer after last", store.SessionFilter{ComputerID: "cmp-1", AfterID: "ses-08", Limit: 2}, nil},
			{"no such computer", store.SessionFilter{ComputerID: "cmp-missing", Limit: 100}, nil},
		} {
			ss, err := tx.ListSessions(ctx, c.f)
			if err != nil {
				t.Errorf("ListSessions(%s): %v", c.name, err)
				continue
			}
			checkIDs(t, "ListSessions("+c.name+")", sessionIDs(ss), c.want)
		}
		// Paging through everything with a small page visits each Session once.
		var all []string
		f := store.SessionFilter{Statuses: []string{"open", "closed"}, Limit: 2}
		for range 10 {
			ss, err := tx.ListSessions(ctx, f)
			if err != nil {
				t.Fatalf("ListSessions: %v", err)
			}
			if len(ss) == 0 {
				break
			}
			all = append(all, sessionIDs(ss)...)
			f.AfterID = ss[len(ss)-1].ID
		}
		checkIDs(t, "paged ListSessions", all, []string{"ses-01", "ses-02", "ses-03", "ses-05", "ses-06", "ses-07", "ses-08"})
		// Listed rows carry every field.
		ss, err := tx.ListSessions(ctx, store.SessionFilter{Key: "k2", Limit: 1})
		if err != nil || len(ss) != 1 {
			t.Fatalf("ListSessions(k2) = %v, %v", ss, err)
		}
		want := newSession("ses-04", "a", "k2")
		want.Status, want.ParentSessionID, want.RequesterSessionID, want.ComputerID = "closing", "ses-01", "ses-03", "cmp-1"
		check(t, "listed Session", ss[0], storedSession(*want))
		return nil
	})
}

func testIdempotency(t *testing.T, s store.Store) {
	r := &store.Idempotency{Scope: "key-1:POST /v1/sessions", Key: "abc", Digest: "sha256:dddd",
		Response: raw(`{"session":{"id":"ses-1"},"turn":null}`), CreatedAt: at(50)}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "InsertIdempotency", tx.InsertIdempotency(ctx, r))
		// The same key in another scope is another record.
		other := *r
		other.Scope = "key-2:POST /v1/sessions"
		other.Response = raw(`{}`)
		wantOK(t, "InsertIdempotency(other scope)", tx.InsertIdempotency(ctx, &other))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetIdempotency(ctx, r.Scope, r.Key)
		if err != nil {
			t.Fatalf("GetIdempotency: %v", err)
		}
		want := *r
		want.CreatedAt = stored(r.CreatedAt)
		check(t, "GetIdempotency", *got, want)
		got, err = tx.GetIdempotency(ctx, "key-2:POST /v1/sessions", r.Key)
		if err != nil || string(got.Response) != `{}` {
			t.Errorf("GetIdempotency(other scope) = %v, %v", got, err)
		}
		_, err = tx.GetIdempotency(ctx, r.Scope, "missing")
		wantErr(t, "GetIdempotency(missing key)", err, store.ErrNotFound)
		_, err = tx.GetIdempotency(ctx, "key-3:POST /v1/sessions", r.Key)
		wantErr(t, "GetIdempotency(missing scope)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		dup := *r
		dup.Digest = "sha256:eeee"
		wantErr(t, "InsertIdempotency(same scope and key)", tx.InsertIdempotency(ctx, &dup), store.ErrDuplicate)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetIdempotency(ctx, r.Scope, r.Key)
		if err != nil || got.Digest != r.Digest {
			t.Errorf("GetIdempotency after refused duplicate = %v, %v; want digest %s", got, err, r.Digest)
		}
		return nil
	})
}

// testConcurrentIdempotency: Updates that read one idempotency key and
// then record it, at the same time, run one after the other: exactly one
// records it, the others find its record.
func testConcurrentIdempotency(t *testing.T, s store.Store) {
	ctx := t.Context()
	var wg sync.WaitGroup
	var mu sync.Mutex
	inserted, found := 0, 0
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Update(ctx, func(tx store.Tx) error {
				_, err := tx.GetIdempotency(ctx, "turns.enqueue:ses-1", "key-1")
				if err == nil {
					mu.Lock()
					found++
					mu.Unlock()
					return nil
				}
				if !errors.Is(err, store.ErrNotFound) {
					return err
				}
				time.Sleep(30 * time.Millisecond) // the work the key guards
				if err := tx.InsertIdempotency(ctx, &store.Idempotency{Scope: "turns.enqueue:ses-1", Key: "key-1",
					Digest: fmt.Sprint(i), Response: raw(`{}`), CreatedAt: at(1)}); err != nil {
					return err
				}
				mu.Lock()
				inserted++
				mu.Unlock()
				return nil
			})
			if err != nil {
				t.Errorf("Update: %v", err)
			}
		}()
	}
	wg.Wait()
	if inserted != 1 || found != 3 {
		t.Errorf("%d Updates recorded the key and %d found it; want 1 and 3", inserted, found)
	}
}

// IdleDeadlines lists the open Sessions whose idle close is due by a
// moment, in order of that moment then ID, in pages; busy, closing and
// never-closing Sessions are not listed, and a change of the deadline or
// the status is seen at once.
func testIdleDeadlines(t *testing.T, s store.Store) {
	type row struct {
		id, status string
		closeAt    *time.Time
	}
	rows := []row{
		{"ses-1", "open", ptr(at(5))},
		{"ses-2", "open", ptr(at(3))},
		{"ses-3", "open", ptr(at(5))},
		{"ses-4", "open", nil}, // busy, or never closes
		{"ses-5", "closing", ptr(at(1))},
		{"ses-6", "closed", ptr(at(1))},
		{"ses-7", "open", ptr(at(9))},
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, r := range rows {
			ses := newSession(r.id, "a", "")
			ses.Status, ses.IdleCloseAt = r.status, r.closeAt
			if r.closeAt != nil {
				ses.IdleSince = ptr(at(0))
			}
			wantOK(t, "InsertSession", tx.InsertSession(ctx, ses))
		}
		return nil
	})
	list := func(before time.Time, limit int) []store.IdleDeadline {
		var all []store.IdleDeadline
		view(t, s, func(ctx context.Context, tx store.Tx) error {
			for after := (store.IdleDeadline{}); ; {
				page, err := tx.IdleDeadlines(ctx, before, after, limit)
				if err != nil {
					t.Fatalf("IdleDeadlines: %v", err)
				}
				all = append(all, page...)
				if len(page) < limit {
					return nil
				}
				after = page[len(page)-1]
			}
		})
		return all
	}
	d := func(id string, n int) store.IdleDeadline {
		return store.IdleDeadline{SessionID: id, CloseAt: stored(at(n))}
	}
	want := []store.IdleDeadline{d("ses-2", 3), d("ses-1", 5), d("ses-3", 5)}
	for _, limit := range []int{1, 2, 100} {
		check(t, fmt.Sprintf("IdleDeadlines(by 6, limit %d)", limit), list(at(6), limit), want)
	}
	check(t, "IdleDeadlines(by 5)", list(at(5), 100), want)
	check(t, "IdleDeadlines(by 4)", list(at(4), 100), want[:1])
	if got := list(at(2), 100); len(got) != 0 {
		t.Errorf("IdleDeadlines(by 2) = %v, want none", got)
	}
	// Work clears ses-2's deadline, a close takes ses-1 out, a new idle
	// period moves ses-3's.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "SetSessionIdleSince(nil)", tx.SetSessionIdleSince(ctx, "ses-2", nil, nil))
		wantOK(t, "SetSessionIdleSince", tx.SetSessionIdleSince(ctx, "ses-3", ptr(at(2)), ptr(at(8))))
		ses, err := tx.GetSession(ctx, "ses-1")
		if err != nil {
			t.Fatalf("GetSession: %v", err)
		}
		ses.Status = "closing"
		return tx.UpdateSession(ctx, ses)
	})
	check(t, "IdleDeadlines after changes", list(at(9), 100), []store.IdleDeadline{d("ses-3", 8), d("ses-7", 9)})
}
