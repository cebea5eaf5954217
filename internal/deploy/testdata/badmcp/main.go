// Command badmcp is an agent program whose runtime MCP maximum names an
// Agent it does not define: building its manifest must fail.
package main

import (
	"context"

	"github.com/helmr-go/helmr"
	"github.com/helmr-go/helmr/helmrtype"
)

var box = helmr.Template(helmr.TemplateSpec{ID: "box", Image: helmr.Image("box").FromHost()})

var planner = helmr.Agent(helmr.AgentSpec[helmr.InputContent, string, struct{}]{ID: "planner", Template: box,
	RuntimeMCP: &helmr.RuntimeMCPPolicy{Allow: []helmr.RuntimeMCPRule{{Operation: helmrtype.MCPSpawn, Agents: []string{"ghost"}}}},
	Turn: func(context.Context, *helmr.Turn[helmr.InputContent], *helmr.AgentContext[struct{}]) (string, error) {
		return "", nil
	}})

func main() { helmr.Main(planner) }
