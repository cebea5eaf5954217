package storetest

import (
	"context"
	"testing"

	"github.com/helmr-go/helmr/internal/store"
)

func testSlack(t *testing.T, s store.Store) {
	app := &store.SlackApp{ID: "sla-1", Name: "Acme", TeamID: "T1", BotUserID: "UBOT", Mode: "socket", MentionAgent: "helper",
		Sealed: []byte{1, 2, 3, 0, 255}, CreatedAt: stored(at(1))}
	u := &store.SlackUser{TeamID: "T1", UserID: "U1", Identity: "ada", Role: "responder", CreatedAt: stored(at(2))}
	th := &store.SlackThread{SessionID: "ses-b", AppID: "sla-1", ChannelID: "C1", CreatedAt: stored(at(3))}
	th2 := &store.SlackThread{SessionID: "ses-a", AppID: "sla-1", ChannelID: "C1", CreatedAt: stored(at(4))}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "InsertSlackApp", tx.InsertSlackApp(ctx, app))
		same := *app
		same.ID = "sla-2"
		wantErr(t, "InsertSlackApp(same team)", tx.InsertSlackApp(ctx, &same), store.ErrDuplicate)
		wantOK(t, "PutSlackUser", tx.PutSlackUser(ctx, u))
		wantOK(t, "PutSlackUser(other)", tx.PutSlackUser(ctx, &store.SlackUser{TeamID: "T2", UserID: "U1", Identity: "bob", Role: "viewer", CreatedAt: stored(at(2))}))
		wantOK(t, "InsertSlackThread", tx.InsertSlackThread(ctx, th))
		wantOK(t, "InsertSlackThread(2)", tx.InsertSlackThread(ctx, th2))
		wantErr(t, "InsertSlackThread(same session)", tx.InsertSlackThread(ctx, th), store.ErrDuplicate)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetSlackApp(ctx, "sla-1")
		wantOK(t, "GetSlackApp", err)
		check(t, "GetSlackApp", *got, *app)
		got, err = tx.GetSlackAppByTeam(ctx, "T1")
		wantOK(t, "GetSlackAppByTeam", err)
		check(t, "GetSlackAppByTeam", *got, *app)
		_, err = tx.GetSlackAppByTeam(ctx, "T9")
		wantErr(t, "GetSlackAppByTeam(missing)", err, store.ErrNotFound)
		apps, err := tx.ListSlackApps(ctx)
		wantOK(t, "ListSlackApps", err)
		check(t, "ListSlackApps", apps, []store.SlackApp{*app})
		gu, err := tx.GetSlackUser(ctx, "T1", "U1")
		wantOK(t, "GetSlackUser", err)
		check(t, "GetSlackUser", *gu, *u)
		us, err := tx.ListSlackUsers(ctx, "T1")
		wantOK(t, "ListSlackUsers(T1)", err)
		check(t, "ListSlackUsers(T1)", len(us), 1)
		us, err = tx.ListSlackUsers(ctx, "")
		wantOK(t, "ListSlackUsers(all)", err)
		check(t, "ListSlackUsers(all)", len(us), 2)
		ths, err := tx.ListSlackThreads(ctx, "", 10)
		wantOK(t, "ListSlackThreads", err)
		check(t, "ListSlackThreads", ths, []store.SlackThread{*th2, *th})
		pending, err := tx.GetSlackThreadByTS(ctx, "sla-1", "C1", "")
		wantOK(t, "GetSlackThreadByTS(unposted)", err)
		check(t, "GetSlackThreadByTS(unposted: the oldest)", *pending, *th2)
		_, err = tx.GetSlackThreadByTS(ctx, "sla-1", "C2", "")
		wantErr(t, "GetSlackThreadByTS(no unposted in C2)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		up := *th
		up.ThreadTS, up.Cursor = "1700000000.000100", 7
		wantOK(t, "UpdateSlackThread", tx.UpdateSlackThread(ctx, &up))
		dup := *th2
		dup.ThreadTS = up.ThreadTS
		wantErr(t, "UpdateSlackThread(taken thread)", tx.UpdateSlackThread(ctx, &dup), store.ErrDuplicate)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantErr(t, "UpdateSlackThread(missing)", tx.UpdateSlackThread(ctx, &store.SlackThread{SessionID: "ses-z"}), store.ErrNotFound)
		done := *th2
		done.Done = true
		wantOK(t, "UpdateSlackThread(done)", tx.UpdateSlackThread(ctx, &done))
		_, err := tx.GetSlackThreadByTS(ctx, "sla-1", "C1", "")
		wantErr(t, "GetSlackThreadByTS(unposted but done)", err, store.ErrNotFound)
		u2 := *u
		u2.Role = "viewer"
		wantOK(t, "PutSlackUser(replace)", tx.PutSlackUser(ctx, &u2))
		p := &store.SlackPost{SessionID: "ses-b", Key: "turn:1", TS: "1700000000.000200", Text: "hel", UpdatedAt: stored(at(5))}
		wantOK(t, "PutSlackPost", tx.PutSlackPost(ctx, p))
		p2 := *p
		p2.Text, p2.UpdatedAt = "hello", stored(at(6))
		wantOK(t, "PutSlackPost(replace)", tx.PutSlackPost(ctx, &p2))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetSlackThreadByTS(ctx, "sla-1", "C1", "1700000000.000100")
		wantOK(t, "GetSlackThreadByTS", err)
		want := *th
		want.ThreadTS, want.Cursor = "1700000000.000100", 7
		check(t, "GetSlackThreadByTS", *got, want)
		ths, err := tx.ListSlackThreads(ctx, "", 10)
		wantOK(t, "ListSlackThreads(after done)", err)
		check(t, "ListSlackThreads(after done)", ths, []store.SlackThread{want})
		ths, err = tx.ListSlackThreads(ctx, "ses-b", 10)
		wantOK(t, "ListSlackThreads(after ses-b)", err)
		check(t, "ListSlackThreads(after ses-b)", len(ths), 0)
		gu, err := tx.GetSlackUser(ctx, "T1", "U1")
		wantOK(t, "GetSlackUser", err)
		check(t, "GetSlackUser(replaced)", gu.Role, "viewer")
		p, err := tx.GetSlackPost(ctx, "ses-b", "turn:1")
		wantOK(t, "GetSlackPost", err)
		check(t, "GetSlackPost", *p, store.SlackPost{SessionID: "ses-b", Key: "turn:1", TS: "1700000000.000200", Text: "hello", UpdatedAt: stored(at(6))})
		_, err = tx.GetSlackPost(ctx, "ses-b", "turn:2")
		wantErr(t, "GetSlackPost(missing)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "DeleteSlackUser", tx.DeleteSlackUser(ctx, "T1", "U1"))
		wantErr(t, "DeleteSlackUser(again)", tx.DeleteSlackUser(ctx, "T1", "U1"), store.ErrNotFound)
		wantOK(t, "DeleteSlackApp", tx.DeleteSlackApp(ctx, "sla-1"))
		wantErr(t, "DeleteSlackApp(again)", tx.DeleteSlackApp(ctx, "sla-1"), store.ErrNotFound)
		return nil
	})
}
