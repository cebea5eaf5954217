package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
)

// Review and Verdict mirror the typed test agent's contract.
type Review struct {
	Issue int `json:"issue"`
}

type Verdict struct {
	Reviewed bool   `json:"reviewed"`
	Note     string `json:"note,omitempty"`
}

func TestGoClientAgainstServer(t *testing.T) {
	p := startPlane(t, "")
	c := helmrclient.New(p.url, p.key)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	typed, err := helmrclient.Create(ctx, c, helmrclient.Ref[Review, Verdict]("typed"), Review{Issue: 5}, helmrclient.CreateOptions{IdempotencyKey: "typed-1"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := typed.Turn.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != "completed" || !out.HasResult || out.Result != (Verdict{Reviewed: true, Note: "init=42 (checked)"}) {
		t.Fatalf("typed outcome %+v", out)
	}
	again, err := helmrclient.Create(ctx, c, helmrclient.Ref[Review, Verdict]("typed"), Review{Issue: 5}, helmrclient.CreateOptions{IdempotencyKey: "typed-1"})
	if err != nil || again.Session.ID() != typed.Session.ID() || !again.Replayed || typed.Replayed {
		t.Fatalf("replay: %v %+v", err, again)
	}

	// Stream a Session's events live while Turns run; all arrive in order.
	rec, err := c.Sessions.Create(ctx, "echo", helmrclient.Text("first"), helmrclient.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sess := rec.Session
	var last *helmrclient.TurnRef
	for _, in := range []string{"second", "third"} {
		if last, err = sess.Enqueue(ctx, helmrclient.Text(in), helmrclient.EnqueueOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := last.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	want := p.events(sess.ID())
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	var got []helmrtype.SessionEvent
	for ev, err := range sess.Events.Stream(sctx, 0) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
		if len(got) == len(want) {
			break
		}
	}
	for i := range want {
		if got[i].Sequence != want[i].Sequence || got[i].Kind != want[i].Kind {
			t.Fatalf("record %d: %d %s, want %d %s", i, got[i].Sequence, got[i].Kind, want[i].Sequence, want[i].Kind)
		}
	}

	// Typed errors.
	_, err = c.Sessions.Get(ctx, "00000000-0000-7000-8000-000000000000")
	if !errors.Is(err, helmrtype.CodeNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	if _, err := c.Agents.Get(ctx, "typed", helmrclient.AgentGetOptions{}); err != nil {
		t.Fatal(err)
	}
	page, err := c.Agents.List(ctx, helmrclient.AgentListOptions{})
	if err != nil || len(page.Agents) != len(agentBinary(t).Manifest.Agents) {
		t.Fatalf("agents: %v %+v", err, page)
	}
	info, _ := c.Agents.Get(ctx, "typed", helmrclient.AgentGetOptions{})
	if info.InputKind != "json" || len(info.InputSchema) == 0 {
		t.Fatalf("typed agent info %+v", info)
	}
}

func TestEventStreamSurvivesAControlPlaneRestart(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	p := startPlaneAt(t, dir, addr)
	c := helmrclient.New(p.url, p.key, helmrclient.WithRetry(20*time.Millisecond, 200*time.Millisecond, 100))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec, err := c.Sessions.Create(ctx, "echo", helmrclient.Text("before"), helmrclient.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Turn.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	sid := rec.Session.ID()
	got := make(chan helmrtype.SessionEvent, 100)
	errc := make(chan error, 1)
	go func() {
		for ev, err := range rec.Session.Events.Stream(ctx, 0) {
			if err != nil {
				errc <- err
				return
			}
			got <- ev
		}
	}()
	read := func(n int) []helmrtype.SessionEvent {
		var evs []helmrtype.SessionEvent
		for len(evs) < n {
			select {
			case ev := <-got:
				evs = append(evs, ev)
			case err := <-errc:
				t.Fatalf("stream ended: %v", err)
			case <-ctx.Done():
				t.Fatalf("stream stalled after %d records", len(evs))
			}
		}
		return evs
	}
	first := read(len(p.events(sid)))
	// The control plane goes away and comes back on the same address.
	p.stop()
	p2 := startPlaneAt(t, dir, addr)
	var ts helmrtype.TurnState
	p2.must("POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: text("after")}, &ts)
	p2.wait(sid, ts.ID)
	all := p2.events(sid)
	rest := read(len(all) - len(first))
	for i, ev := range append(first, rest...) {
		if ev.Sequence != all[i].Sequence || ev.Kind != all[i].Kind {
			t.Fatalf("record %d: %d %s, want %d %s", i, ev.Sequence, ev.Kind, all[i].Sequence, all[i].Kind)
		}
	}
	select {
	case ev := <-got:
		t.Fatalf("an extra record %d %s", ev.Sequence, ev.Kind)
	default:
	}
}
