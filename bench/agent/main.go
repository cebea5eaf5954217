// Command agent is the agent program the benchmark runs: a text Agent that
// writes one output fragment, responds and returns a small result.
package main

import (
	"context"

	"github.com/helmr-go/helmr"
)

var box = helmr.Template(helmr.TemplateSpec{ID: "bench", Image: helmr.Image("bench").FromHost()})

var echo = helmr.Agent(helmr.AgentSpec[helmr.InputContent, map[string]int64, struct{}]{ID: "echo", Template: box,
	Turn: func(ctx context.Context, t *helmr.Turn[helmr.InputContent], _ *helmr.AgentContext[struct{}]) (map[string]int64, error) {
		if _, err := t.Output.Write(ctx, "ok "); err != nil {
			return nil, err
		}
		if err := t.Respond(ctx, t.Input.PlainText()); err != nil {
			return nil, err
		}
		return map[string]int64{"seq": t.Sequence}, nil
	}})

func main() { helmr.Main(echo) }
