// The cron test agents, second version: "ticker" fires every three
// seconds with the input "tock", and no longer hourly.
package main

import (
	"context"

	"github.com/helmr-go/helmr"
)

var box = helmr.Template(helmr.TemplateSpec{ID: "cronbox", Image: helmr.Image("cronbox").FromHost()})

var ticker = helmr.Agent(helmr.AgentSpec[helmr.InputContent, string, struct{}]{ID: "ticker", Template: box,
	CloseAfterIdle: "1s",
	Triggers: []helmr.Trigger{
		helmr.Cron("often", "*/3 * * * * *", helmr.CronOptions{Input: helmr.Text("tock")}),
	},
	Turn: func(ctx context.Context, t *helmr.Turn[helmr.InputContent], ac *helmr.AgentContext[struct{}]) (string, error) {
		t.Output.Write(ctx, "source "+t.Source.Kind+": "+t.Input.PlainText())
		return t.Source.Kind, nil
	}})

func main() { helmr.Main(ticker) }
