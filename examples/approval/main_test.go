package main

import (
	"context"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtest"
	"github.com/helmr-go/helmr/helmrtype"
)

func TestApproval(t *testing.T) {
	env := helmrtest.New(t, deployer)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec, err := env.Client.Sessions.Create(ctx, "deployer", helmrtest.Text("v1.2.3"), helmrclient.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	asks := rec.Turn.Asks()
	var q helmrtype.AskState
	for {
		page, err := asks.List(ctx, helmrclient.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Asks) > 0 {
			q = page.Asks[0]
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if q.Question.Prompt.PlainText() != "Deploy v1.2.3 to production?" || q.Status != helmrtype.AskPending {
		t.Fatalf("question %+v", q)
	}
	answer := map[string]any{"selected": []string{"approve"}, "text": "go ahead"}
	if _, err := asks.Respond(ctx, q.ID, answer, "approval-1"); err != nil {
		t.Fatal(err)
	}
	out, err := rec.Turn.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != "completed" || out.Response.PlainText() != "Deployed v1.2.3" {
		t.Fatalf("outcome %+v", out)
	}
}
