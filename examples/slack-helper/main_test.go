package main

import (
	"context"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtest"
	"github.com/helmr-go/helmr/helmrtype"
)

// TestThread is one Slack thread's conversation, without Slack: a help
// answer, a deploy that waits for the Approve button, a rejected one, and
// the status of the thread, all Turns of one Session.
func TestThread(t *testing.T) {
	env := helmrtest.New(t, helper)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	rec, err := env.Client.Sessions.Create(ctx, "helper", helmrtest.Text("<@U0BOT> hello"), helmrclient.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	respond := func(turn *helmrclient.TurnRef) string {
		t.Helper()
		out, err := turn.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != "completed" {
			t.Fatalf("outcome %+v", out)
		}
		return out.Response.PlainText()
	}
	if got := respond(rec.Turn); got != "Hi! Ask me to `deploy VERSION` (someone approves it first) or for the `status` of this thread." {
		t.Fatalf("help: %q", got)
	}

	for _, c := range []struct{ version, option, want string }{
		{"v1.2.3", "approve", "Deployed v1.2.3."},
		{"v1.2.4", "reject", "Not deploying v1.2.4: it was rejected."},
	} {
		turn, err := rec.Session.Enqueue(ctx, helmrtest.Text("<@U0BOT> deploy "+c.version), helmrclient.EnqueueOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q := waitAsk(ctx, t, turn)
		if q.Question.Prompt.PlainText() != "Deploy "+c.version+" to production?" || len(q.Question.Answer.Options) != 2 {
			t.Fatalf("question %+v", q.Question)
		}
		if _, err := turn.Asks().Respond(ctx, q.ID, map[string]any{"selected": []string{c.option}}, "click-"+c.version); err != nil {
			t.Fatal(err)
		}
		if got := respond(turn); got != c.want {
			t.Fatalf("deploy %s, %s: %q", c.version, c.option, got)
		}
	}

	turn, err := rec.Session.Enqueue(ctx, helmrtest.Text("status"), helmrclient.EnqueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := respond(turn); got != "Deployed: v1.2.3. Rejected: v1.2.4." {
		t.Fatalf("status: %q", got)
	}
}

func waitAsk(ctx context.Context, t *testing.T, turn *helmrclient.TurnRef) helmrtype.AskState {
	t.Helper()
	for {
		page, err := turn.Asks().List(ctx, helmrclient.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Asks) > 0 && page.Asks[0].Status == helmrtype.AskPending {
			return page.Asks[0]
		}
		select {
		case <-ctx.Done():
			t.Fatal("no question asked")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
