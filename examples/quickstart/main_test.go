package main

import (
	"context"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtest"
)

func TestReviewer(t *testing.T) {
	env := helmrtest.New(t, reviewer, echo)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Typed: the input and result types come from the Agent definition.
	started, err := helmrclient.Create(ctx, env.Client, reviewer, ReviewInput{Issue: 42}, helmrclient.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := started.Turn.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != "completed" || !out.Result.Reviewed || out.Response.PlainText() != "Review complete" {
		t.Fatalf("outcome %+v", out)
	}
}

func TestEcho(t *testing.T) {
	env := helmrtest.New(t, reviewer, echo)
	out := env.Run(t, "echo", helmrtest.Text("hello"))
	if out.Status != "completed" || out.Response.PlainText() != "hello" {
		t.Fatalf("outcome %+v", out)
	}
}
