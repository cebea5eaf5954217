// Command cronagent is the agent program of the benchmark's cron phase: a
// text Agent fired every second by a cron trigger.
package main

import (
	"context"

	"github.com/helmr-go/helmr"
)

var box = helmr.Template(helmr.TemplateSpec{ID: "bench-cron", Image: helmr.Image("bench-cron").FromHost()})

var ticker = helmr.Agent(helmr.AgentSpec[helmr.InputContent, string, struct{}]{ID: "ticker", Template: box,
	CloseAfterIdle: "1s",
	Triggers:       []helmr.Trigger{helmr.Cron("every-second", "* * * * * *", helmr.CronOptions{Input: helmr.Text("tick")})},
	Turn: func(ctx context.Context, t *helmr.Turn[helmr.InputContent], _ *helmr.AgentContext[struct{}]) (string, error) {
		return t.Source.Kind, nil
	}})

func main() { helmr.Main(ticker) }
