// Command planner shows delegation through the runtime MCP server: the
// planner Agent spawns one worker Session per task, waits for all of them
// and returns their results. It holds no API key: its runtime MCP scope
// (spawn and wait on workers, nothing else) is all it can do.
// Run it with `helmr dev examples/planner`; see README.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/helmr-go/helmr"
	"github.com/helmr-go/helmr/helmrtype"
)

var box = helmr.Template(helmr.TemplateSpec{ID: "box",
	Image:     helmr.Image("box").FromHost(),
	Resources: helmr.Resources{CPU: 1, Memory: "512MiB"}})

// Task is a worker's input.
type Task struct {
	Word string `json:"word"`
}

// Report is a worker's result.
type Report struct {
	Word    string `json:"word"`
	Upper   string `json:"upper"`
	Letters int    `json:"letters"`
}

// worker does one small task.
var worker = helmr.Agent(helmr.AgentSpec[Task, Report, struct{}]{
	ID: "worker", Template: box,
	Turn: func(ctx context.Context, t *helmr.Turn[Task], _ *helmr.AgentContext[struct{}]) (Report, error) {
		w := t.Input.Word
		if w == "" {
			return Report{}, errors.New("empty word")
		}
		return Report{Word: w, Upper: strings.ToUpper(w), Letters: len([]rune(w))}, nil
	}})

// scope is what the planner's code may do: spawn workers and watch their
// Turns. It is also the Agent's maximum, so nothing wider can be asked for.
var scope = &helmr.RuntimeMCPPolicy{Allow: []helmr.RuntimeMCPRule{
	{Operation: helmrtype.MCPSpawn, Agents: []string{"worker"}},
	{Operation: helmrtype.MCPInspectTurn, Agents: []string{"worker"}},
}}

// planner splits its text input into words, spawns a worker per word and
// returns the workers' reports in order.
var planner = helmr.Agent(helmr.AgentSpec[helmr.InputContent, []Report, *mcp.ClientSession]{
	ID: "planner", Template: box, RuntimeMCP: scope,
	// init connects once; every Turn of this process reuses the client.
	Init: func(ctx context.Context, ic *helmr.InitContext) (*mcp.ClientSession, error) {
		conn, err := ic.MCP.ConnectionOptions(ctx, nil) // nil: the Agent's maximum
		if err != nil {
			return nil, err
		}
		client := mcp.NewClient(&mcp.Implementation{Name: "planner", Version: "v1"}, nil)
		return client.Connect(ic.Context(), &mcp.StreamableClientTransport{Endpoint: conn.URL, HTTPClient: conn.HTTPClient()}, nil)
	},
	Turn: func(ctx context.Context, t *helmr.Turn[helmr.InputContent], ac *helmr.AgentContext[*mcp.ClientSession]) ([]Report, error) {
		cs := ac.InitResult
		words := strings.Fields(t.Input.PlainText())
		type spawned struct{ SessionID, TurnID string }
		var workers []spawned
		for i, w := range words {
			// The key makes a retried spawn (after a restart, say) return
			// the same worker instead of starting another.
			var r struct {
				SessionID string `json:"session_id"`
				TurnID    string `json:"turn_id"`
			}
			err := callTool(ctx, cs, "spawn", map[string]any{"agent": "worker", "input": Task{Word: w},
				"idempotency_key": fmt.Sprintf("%s/%d", t.ID, i)}, &r)
			if err != nil {
				return nil, err
			}
			workers = append(workers, spawned{r.SessionID, r.TurnID})
			t.Output.Write(ctx, fmt.Sprintf("spawned worker %s for %q\n", r.SessionID, w))
		}
		reports := make([]Report, 0, len(workers))
		for _, w := range workers {
			var res struct {
				Status  string                `json:"status"`
				Outcome helmrtype.TurnOutcome `json:"outcome"`
			}
			for res.Status != "settled" { // wait_turn returns "timeout" after its timeout: wait again
				if err := callTool(ctx, cs, "wait_turn", map[string]any{"session_id": w.SessionID, "turn_id": w.TurnID, "timeout": "5m"}, &res); err != nil {
					return nil, err
				}
			}
			if res.Outcome.Status != "completed" {
				return nil, fmt.Errorf("worker %s: %s %v", w.SessionID, res.Outcome.Status, res.Outcome.Error)
			}
			var r Report
			if err := json.Unmarshal(res.Outcome.Result, &r); err != nil {
				return nil, err
			}
			reports = append(reports, r)
		}
		return reports, t.Respond(ctx, fmt.Sprintf("%d workers done", len(reports)))
	}})

// callTool calls a runtime MCP tool and decodes its JSON result into out.
// A tool error carries the error envelope {"error": {"code", "message"}}.
func callTool(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any, out any) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if res.IsError {
		return fmt.Errorf("%s: %s", name, text)
	}
	return json.Unmarshal([]byte(text), out)
}

func main() { helmr.Main(planner, worker) }
