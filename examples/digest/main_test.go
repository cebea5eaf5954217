package main

import (
	"context"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtest"
)

func TestDigest(t *testing.T) {
	env := helmrtest.New(t, digest)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The triggers are Schedules of the Deployment.
	page, err := env.Client.Schedules.List(ctx, helmrclient.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Schedules) != 2 || page.Schedules[0].Name != "every-minute" || page.Schedules[1].Timezone != "Europe/Paris" {
		t.Fatalf("schedules %+v", page.Schedules)
	}
	// What a fire runs, asked for directly.
	started, err := helmrclient.Create(ctx, env.Client, digest, DigestInput{Topic: "builds"}, helmrclient.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := started.Turn.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != "completed" || out.Result.Topic != "builds" || out.Result.Scheduled || out.Response.PlainText() != "Nothing new on builds" {
		t.Fatalf("outcome %+v", out)
	}
}
