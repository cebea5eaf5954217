package main

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtest"
	"github.com/helmr-go/helmr/helmrtype"
)

// tokenID reads the Token the Turn announced in its output.
func tokenID(t *testing.T, ctx context.Context, c *helmrclient.Client, sessionID string) string {
	t.Helper()
	for {
		page, err := c.Sessions.Ref(sessionID).Events.List(ctx, helmrclient.EventListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Records {
			var d struct{ Content helmrtype.Content }
			json.Unmarshal(e.Data, &d)
			for _, p := range d.Content {
				var info struct{ Token string }
				if e.Kind == "turn.output" && json.Unmarshal(p.Value, &info) == nil && info.Token != "" {
					return info.Token
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("no token in the output")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestWebhook(t *testing.T) {
	env := helmrtest.New(t, ciwait)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec, err := env.Client.Sessions.Create(ctx, "ciwait", helmrtest.Text("build 7"), helmrclient.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := tokenID(t, ctx, env.Client, rec.Session.ID())
	if _, err := env.Client.Tokens.Complete(ctx, id, Build{Status: "passed", URL: "https://ci.example/7"}); err != nil {
		t.Fatal(err)
	}
	// A second, different completion never overwrites the first.
	if _, err := env.Client.Tokens.Complete(ctx, id, Build{Status: "failed"}); !errors.Is(err, helmrtype.CodeTokenCompletionConflict) {
		t.Fatalf("second completion: %v", err)
	}
	out, err := rec.Turn.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != "completed" || out.Response.PlainText() != "CI finished: passed" {
		t.Fatalf("outcome %+v", out)
	}
}
