package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/helmr-go/helmr"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/timers"
)

// Runtime MCP test agents. driver connects to its runtime MCP server with
// the official Go MCP SDK client and makes the calls its input lists;
// limited is driver with a narrow maximum; worker is what they create.

type driveInput struct {
	// Policy scopes the connection the calls use (nil: the maximum).
	Policy *helmr.RuntimeMCPPolicy `json:"policy,omitempty"`
	// Scopes are asked for first, in order (null: the maximum).
	Scopes []*helmr.RuntimeMCPPolicy `json:"scopes,omitempty"`
	// Write lists files to write in /workspace first (name → content).
	Write map[string]string `json:"write,omitempty"`
	// Calls are made in order; a string argument "$N.path" is replaced by
	// the value at the dotted path (keys, or indexes in arrays) of call
	// N's result.
	Calls []driveCall `json:"calls,omitempty"`
	// Trace starts a span of agent code ("e2e.work") in which the Turn
	// writes output, waits on a timer and makes its calls.
	Trace bool `json:"trace,omitempty"`
	// Park waits on a timer of 1.5 s, hot for only 50 ms (the process is
	// parked and restored), between its connection to the runtime MCP
	// server and its calls, which go through that same connection.
	Park bool `json:"park,omitempty"`
}

type driveCall struct {
	Tool string         `json:"tool"`
	Args map[string]any `json:"args,omitempty"`
}

type scopeResult struct {
	Auth  string `json:"auth,omitempty"`
	URL   string `json:"url,omitempty"`
	Error string `json:"error,omitempty"`
}

type callResult struct {
	Result map[string]any `json:"result,omitempty"`
	// Error is the tool's error envelope, or a protocol error's text.
	Error string `json:"error,omitempty"`
}

type driveResult struct {
	Scopes []scopeResult `json:"scopes,omitempty"`
	Tools  []string      `json:"tools"`
	Calls  []callResult  `json:"calls"`
}

func drive(ctx context.Context, t *helmr.Turn[driveInput], ac *helmr.AgentContext[struct{}]) (res driveResult, err error) {
	var out driveResult
	if t.Input.Trace {
		var sp *helmr.Span
		ctx, sp = helmr.StartSpan(ctx, "e2e.work")
		sp.SetAttribute("e2e.calls", len(t.Input.Calls))
		defer func() { sp.SetError(err); sp.End() }()
		if _, err := t.Output.Write(ctx, "traced\n"); err != nil {
			return out, err
		}
		if err := timers.WaitFor(ctx, 20*time.Millisecond, timers.Options{IdleTimeout: "1s"}); err != nil {
			return out, err
		}
	}
	for name, body := range t.Input.Write {
		if err := os.WriteFile(filepath.Join(workspace(), name), []byte(body), 0o644); err != nil {
			return out, err
		}
	}
	for _, p := range t.Input.Scopes {
		c, err := ac.MCP.ConnectionOptions(ctx, p)
		if err != nil {
			out.Scopes = append(out.Scopes, scopeResult{Error: err.Error()})
			continue
		}
		out.Scopes = append(out.Scopes, scopeResult{Auth: c.Headers["Authorization"], URL: c.URL})
	}
	if t.Input.Calls == nil {
		return out, nil
	}
	conn, err := ac.MCP.ConnectionOptions(ctx, t.Input.Policy)
	if err != nil {
		return out, err
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "driver", Version: "v1"}, nil)
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: conn.URL, HTTPClient: conn.HTTPClient()}, nil)
	if err != nil {
		return out, fmt.Errorf("connect to runtime MCP: %w", err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		return out, err
	}
	for _, tl := range tools.Tools {
		out.Tools = append(out.Tools, tl.Name)
	}
	if t.Input.Park {
		if err := timers.WaitFor(ctx, 1500*time.Millisecond, timers.Options{IdleTimeout: "50ms"}); err != nil {
			return out, err
		}
	}
	for _, c := range t.Input.Calls {
		args := map[string]any{}
		for k, v := range c.Args {
			args[k] = resolveRef(v, out.Calls)
		}
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: c.Tool, Arguments: args})
		var r callResult
		switch {
		case err != nil:
			r.Error = err.Error()
		case res.IsError:
			r.Error = res.Content[0].(*sdk.TextContent).Text
		default:
			json.Unmarshal([]byte(res.Content[0].(*sdk.TextContent).Text), &r.Result)
		}
		out.Calls = append(out.Calls, r)
	}
	return out, nil
}

// resolveRef replaces "$N.path" with the value at path in call N's result.
func resolveRef(v any, done []callResult) any {
	s, ok := v.(string)
	if !ok || !strings.HasPrefix(s, "$") {
		return v
	}
	parts := strings.Split(s[1:], ".")
	i, err := strconv.Atoi(parts[0])
	if err != nil || i >= len(done) || len(parts) < 2 {
		return v
	}
	var cur any = done[i].Result
	for _, p := range parts[1:] {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[p]
		case []any:
			n, err := strconv.Atoi(p)
			if err != nil || n >= len(c) {
				return v
			}
			cur = c[n]
		default:
			return v
		}
	}
	return cur
}

var driver = helmr.Agent(helmr.AgentSpec[driveInput, driveResult, struct{}]{ID: "driver", Template: box, Turn: drive})

var limited = helmr.Agent(helmr.AgentSpec[driveInput, driveResult, struct{}]{ID: "limited", Template: box, Turn: drive,
	RuntimeMCP: &helmr.RuntimeMCPPolicy{Allow: []helmr.RuntimeMCPRule{
		{Operation: helmrtype.MCPSpawn, Agents: []string{"worker", "driver"}},
		{Operation: helmrtype.MCPInspectTurn, Agents: []string{"worker", "driver"}},
		{Operation: helmrtype.MCPInspectSession, Agents: []string{"worker"}},
	}}})

type workIn struct {
	N int `json:"n,omitempty"`
	// Block makes the worker wait until its Turn is cancelled.
	Block bool `json:"block,omitempty"`
}

type workOut struct {
	Square int               `json:"square"`
	Source helmr.InputSource `json:"source"`
	Parent string            `json:"parent"`
}

var worker = helmr.Agent(helmr.AgentSpec[workIn, workOut, struct{}]{ID: "worker", Template: box,
	Turn: func(ctx context.Context, t *helmr.Turn[workIn], ac *helmr.AgentContext[struct{}]) (workOut, error) {
		if t.Input.Block {
			t.Output.Write(ctx, "blocking\n")
			<-ctx.Done()
			return workOut{}, context.Cause(ctx)
		}
		return workOut{Square: t.Input.N * t.Input.N, Source: t.Source, Parent: ac.Session.ParentID}, nil
	}})
