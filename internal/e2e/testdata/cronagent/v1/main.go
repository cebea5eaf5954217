// The cron test agents, first version: "ticker" fires every two seconds
// with the input "tick", and hourly.
package main

import (
	"context"

	"github.com/helmr-go/helmr"
)

var box = helmr.Template(helmr.TemplateSpec{ID: "cronbox", Image: helmr.Image("cronbox").FromHost()})

var ticker = helmr.Agent(helmr.AgentSpec[helmr.InputContent, string, struct{}]{ID: "ticker", Template: box,
	CloseAfterIdle: "1s",
	Triggers: []helmr.Trigger{
		helmr.Cron("often", "*/2 * * * * *", helmr.CronOptions{Input: helmr.Text("tick")}),
		helmr.Cron("hourly", "0 * * * *", helmr.CronOptions{Timezone: "Europe/Paris", Overlap: "allow"}),
	},
	Turn: func(ctx context.Context, t *helmr.Turn[helmr.InputContent], ac *helmr.AgentContext[struct{}]) (string, error) {
		t.Output.Write(ctx, "source "+t.Source.Kind+": "+t.Input.PlainText())
		return t.Source.Kind, nil
	}})

func main() { helmr.Main(ticker) }
