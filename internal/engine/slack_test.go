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

// staleThreadStore answers the next lookup of a Slack thread by its ts
// with ErrNotFound, once, while hide is set: what a PostgreSQL write
// transaction's first read sees when another node records the thread's
// ts just after it (each statement sees what was committed before it).
type staleThreadStore struct {
	store.Store
	hide atomic.Bool
}

func (s *staleThreadStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Update(ctx, func(tx store.Tx) error { return fn(staleThreadTx{tx, s}) })
}

type staleThreadTx struct {
	store.Tx
	s *staleThreadStore
}

func (t staleThreadTx) GetSlackThreadByTS(ctx context.Context, appID, channelID, threadTS string) (*store.SlackThread, error) {
	if threadTS != "" && t.s.hide.CompareAndSwap(true, false) {
		return nil, store.ErrNotFound
	}
	return t.Tx.GetSlackThreadByTS(ctx, appID, channelID, threadTS)
}

// A reply in a Session's thread that arrives while another node records
// the thread's ts (its first read misses the ts; by the time it looks for
// a thread still being posted, the ts is there) becomes the Session's
// Turn; it was dropped as a message outside every thread (seen as a rare
// failure of e2e's TestSlackTwoNodes). A mention of the bot in that
// thread opens no Session (its message event speaks for the post).
func TestSlackReplyWhileItsThreadIsRecordedElsewhere(t *testing.T) {
	t.Run("reply", func(t *testing.T) { slackReplyWhileRecorded(t, false) })
	t.Run("mention", func(t *testing.T) { slackReplyWhileRecorded(t, true) })
}

func slackReplyWhileRecorded(t *testing.T, mention bool) {
	c := &testClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	other := openLong(t, c)
	ctx := context.Background()
	app := &store.SlackApp{Name: "helmr", TeamID: "T1", BotUserID: "UBOT", Mode: helmrtype.SlackModeSocket, MentionAgent: "long", Sealed: []byte("sealed")}
	if _, err := other.ConnectSlackApp(ctx, app); err != nil {
		t.Fatal(err)
	}
	rec, _, err := other.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "long", Slack: &helmrtype.SlackChannelRequest{ChannelID: "C1"}}, engine.APICaller)
	if err != nil {
		t.Fatal(err)
	}
	sid := rec.Session.ID
	th, err := other.SlackThread(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	th.ThreadTS = "1767225600.000100"
	if err := other.SlackProjected(ctx, th); err != nil {
		t.Fatal(err)
	}

	ss := &staleThreadStore{Store: other.Store()}
	e := engine.New(ss, engine.Options{Clock: c})
	defer e.Close()
	ss.hide.Store(true)
	out, err := e.HandleSlackMessage(ctx, engine.SlackInbound{AppID: app.ID, EventID: "Ev1", TeamID: "T1", ChannelID: "C1",
		ThreadTS: th.ThreadTS, MessageTS: "1767225601.000200", UserID: "U1", Text: "hello", Mention: mention})
	if err != nil {
		t.Fatal(err)
	}
	if ss.hide.Load() {
		t.Fatal("the thread's first lookup was not made")
	}
	if mention {
		if out.Action != engine.SlackIgnore {
			t.Fatalf("a mention in Session %s's thread: outcome %+v, want ignore", sid, out)
		}
		return
	}
	if out.Action != engine.SlackEnqueue || out.SessionID != sid || out.TurnID == "" {
		t.Fatalf("outcome %+v, want a Turn of Session %s", out, sid)
	}
	if _, err := e.GetTurn(ctx, sid, out.TurnID); err != nil {
		t.Fatalf("the reply's Turn: %v", err)
	}
}
