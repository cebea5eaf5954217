// Command unreachable is an agent program whose one Template's image is in
// a registry nobody serves: its Computer cannot start a process. It is a
// program of its own because publishing through the API prepares the
// images first and refuses such a Deployment (image_build_failed): only
// TestComputerUnavailable publishes it, through the engine.
package main

import (
	"context"

	"github.com/helmr-go/helmr"
)

var unreachable = helmr.Agent(helmr.AgentSpec[helmr.InputContent, any, struct{}]{ID: "unreachable",
	Template: helmr.Template(helmr.TemplateSpec{ID: "unreachable", Image: helmr.Image("unreachable").From("127.0.0.1:9/helmr-test/none:1")}),
	Turn: func(ctx context.Context, t *helmr.Turn[helmr.InputContent], ac *helmr.AgentContext[struct{}]) (any, error) {
		return nil, nil
	}})

func main() { helmr.Main(unreachable) }
