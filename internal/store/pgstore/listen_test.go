package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/helmr-go/helmr/internal/store"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
)

// TestListen: a node hears the events and Command changes other nodes
// commit, in commit order, and not its own; a rolled-back change is not
// announced.
func TestListen(t *testing.T) {
	url := pgtest.URL(t)
	open := func(node string) *Store {
		s, err := Open(t.Context(), url, Options{NodeID: node})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open("node-a"), open("node-b")
	ctx, cancel := context.WithCancel(t.Context())
	notices := make(chan store.Notice, 100)
	listening := make(chan struct{}, 10)
	done := make(chan error, 1)
	go func() {
		done <- a.Listen(ctx, func(n store.Notice) { notices <- n }, func() { listening <- struct{}{} })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Listen after cancel = %v, want context.Canceled", err)
		}
	})
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		t.Fatal("Listen did not start listening")
	}
	now := time.Now()
	appendEvent := func(s *Store, session, turn, kind string, fail bool) {
		t.Helper()
		err := s.Update(t.Context(), func(tx store.Tx) error {
			if err := tx.AppendEvent(t.Context(), &store.Event{SessionID: session, TurnID: turn, Kind: kind, Data: []byte("{}"), CreatedAt: now}); err != nil {
				return err
			}
			if fail {
				return store.ErrNotFound
			}
			return nil
		})
		if err != nil && !fail {
			t.Fatalf("AppendEvent: %v", err)
		}
	}
	appendEvent(a, "ses-own", "", "turn.queued", false)
	appendEvent(b, "ses-rolled-back", "", "turn.queued", true)
	appendEvent(b, "ses-1", "turn-1", "turn.queued", false)
	appendEvent(b, "ses-1", "turn-1", "turn.running", false)
	if err := b.Update(t.Context(), func(tx store.Tx) error {
		return tx.InsertCommand(t.Context(), &store.Command{ID: "cmd-1", ComputerID: "cmp-1", Argv: []string{"true"}, Status: "queued", CreatedAt: now})
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(t.Context(), func(tx store.Tx) error {
		return tx.Announce(t.Context(), store.Notice{Kind: "schedules.changed"})
	}); err != nil {
		t.Fatal(err)
	}
	want := []store.Notice{
		{Node: "node-b", Kind: "turn.queued", SessionID: "ses-1", TurnID: "turn-1"},
		{Node: "node-b", Kind: "turn.running", SessionID: "ses-1", TurnID: "turn-1"},
		{Node: "node-b", Kind: store.NoticeCommand, CommandID: "cmd-1"},
		{Node: "node-b", Kind: "schedules.changed"},
	}
	for i, w := range want {
		select {
		case got := <-notices:
			if got != w {
				t.Errorf("notice %d = %+v, want %+v", i, got, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("notice %d did not arrive (want %+v)", i, w)
		}
	}
	select {
	case got := <-notices:
		t.Errorf("unexpected notice %+v", got)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestParseNotice(t *testing.T) {
	for _, c := range []struct {
		in   string
		want store.Notice
		ok   bool
	}{
		{"e|n|s|turn.queued|t", store.Notice{Node: "n", SessionID: "s", Kind: "turn.queued", TurnID: "t"}, true},
		{"e||s|turn.queued|", store.Notice{SessionID: "s", Kind: "turn.queued"}, true},
		{"c|n|cmd", store.Notice{Node: "n", Kind: store.NoticeCommand, CommandID: "cmd"}, true},
		{"c|n|cmd|command.cancel", store.Notice{Node: "n", Kind: "command.cancel", CommandID: "cmd"}, true},
		{"c|n|cmd|", store.Notice{}, false},
		{"e|n||k|t", store.Notice{}, false},
		{"n|n|schedules.changed", store.Notice{Node: "n", Kind: "schedules.changed"}, true},
		{"n|n|", store.Notice{}, false},
		{"c|n|", store.Notice{}, false},
		{"x|n|s", store.Notice{}, false},
		{"", store.Notice{}, false},
	} {
		got, ok := ParseNotice(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseNotice(%q) = %+v, %v; want %+v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
