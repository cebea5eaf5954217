// Command digest is an Agent fired by cron: every minute a trigger admits a
// fresh Session whose one Turn writes a digest of what it is asked about.
// Run it with `helmr dev examples/digest`, then watch the fires with
// `helmr schedule list` and `helmr session list --agent digest`.
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/helmr-go/helmr"
)

var box = helmr.Template(helmr.TemplateSpec{ID: "digest",
	Image:     helmr.Image("digest").FromHost(),
	Resources: helmr.Resources{CPU: 0.5, Memory: "256MiB", Disk: "64MiB"}})

// DigestInput is what each fire asks for.
type DigestInput struct {
	Topic string `json:"topic"`
}

// DigestResult is what a digest returns.
type DigestResult struct {
	Topic     string    `json:"topic"`
	Scheduled bool      `json:"scheduled"`
	At        time.Time `json:"at"`
}

var digest = helmr.Agent(helmr.AgentSpec[DigestInput, DigestResult, struct{}]{
	ID: "digest", Template: box,
	// A fired Session has one Turn: it closes soon after.
	CloseAfterIdle: "1m",
	Triggers: []helmr.Trigger{
		helmr.Cron("every-minute", "* * * * *", helmr.CronOptions{Input: DigestInput{Topic: "builds"}}),
		helmr.Cron("weekday-morning", "0 9 * * 1-5", helmr.CronOptions{Timezone: "Europe/Paris", Input: DigestInput{Topic: "the week"}}),
	},
	Turn: func(ctx context.Context, t *helmr.Turn[DigestInput], ac *helmr.AgentContext[struct{}]) (DigestResult, error) {
		now := time.Now().UTC()
		if _, err := t.Output.Write(ctx, fmt.Sprintf("Digest of %s at %s\n", t.Input.Topic, now.Format(time.RFC3339))); err != nil {
			return DigestResult{}, err
		}
		if err := t.Respond(ctx, "Nothing new on "+t.Input.Topic); err != nil {
			return DigestResult{}, err
		}
		return DigestResult{Topic: t.Input.Topic, Scheduled: t.Source.Kind == "schedule", At: now}, nil
	},
})

func main() { helmr.Main(digest) }
