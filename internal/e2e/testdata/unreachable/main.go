// The unreachable test agent: its image is in a registry nobody serves, so
// a control plane refuses to publish it (the image is prepared at
// publication), and one that published it through the engine alone (as
// another node that could pull it then) cannot start its process.
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
