package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtest"
)

func TestPlanner(t *testing.T) {
	env := helmrtest.New(t, planner, worker)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec, err := env.Client.Sessions.Create(ctx, "planner", helmrtest.Text("alpha beta"), helmrclient.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := rec.Turn.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var reports []Report
	if out.Status != "completed" || json.Unmarshal(out.Result, &reports) != nil {
		t.Fatalf("outcome %+v", out)
	}
	if len(reports) != 2 || reports[0].Upper != "ALPHA" || reports[1].Letters != 4 {
		t.Fatalf("reports %+v", reports)
	}
	if out.Response.PlainText() != "2 workers done" {
		t.Fatalf("response %q", out.Response.PlainText())
	}
	// The workers are the planner's children, and stay open after its Turn.
	page, err := env.Client.Sessions.List(ctx, helmrclient.SessionListOptions{ParentSessionID: rec.Session.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Sessions) != 2 || page.Sessions[0].Status != "open" {
		t.Fatalf("children %+v", page.Sessions)
	}
}
