package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/helmr-go/helmr"
	"github.com/helmr-go/helmr/helmrtype"
)

// workspace is the Computer's /workspace as this process sees it: its
// host directory when it runs unsandboxed (HELMR_WORKSPACE says which).
func workspace() string {
	if w := os.Getenv("HELMR_WORKSPACE"); w != "" {
		return w
	}
	return "/workspace"
}

// files reads and writes files in its Computer: "write NAME TEXT" writes
// /workspace/NAME, "read NAME" returns its content, "probe PATH" returns
// what reading PATH gave ("error: …" when it failed).
var files = helmr.Agent(helmr.AgentSpec[text, string, struct{}]{ID: "files", Template: box,
	Turn: func(ctx context.Context, t *helmr.Turn[text], _ *helmr.AgentContext[struct{}]) (string, error) {
		op, rest, _ := strings.Cut(t.Input.PlainText(), " ")
		switch op {
		case "write":
			name, body, _ := strings.Cut(rest, " ")
			return "ok", os.WriteFile(filepath.Join(workspace(), name), []byte(body), 0o644)
		case "read":
			b, err := os.ReadFile(filepath.Join(workspace(), rest))
			return string(b), err
		case "probe":
			b, err := os.ReadFile(rest)
			if err != nil {
				return "error: " + err.Error(), nil
			}
			return string(b), nil
		}
		return "", os.ErrInvalid
	}})

// colocated is driver with a maximum that may place files Sessions on its
// own Computer.
var colocated = helmr.Agent(helmr.AgentSpec[driveInput, driveResult, struct{}]{ID: "colocated", Template: box, Turn: drive,
	RuntimeMCP: &helmr.RuntimeMCPPolicy{Allow: []helmr.RuntimeMCPRule{
		{Operation: helmrtype.MCPSpawn, Agents: []string{"files"}, Computer: helmrtype.PlacementCaller},
		{Operation: helmrtype.MCPInspectTurn, Agents: []string{"files"}},
		{Operation: helmrtype.MCPListComputers},
	}}})
