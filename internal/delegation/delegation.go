// Package delegation carries out runtime MCP calls in the control plane:
// a session process's MCP server (internal/mcp) forwards each scope request
// and tool call over the session protocol, and this package decodes it,
// checks the scope, and calls the engine, which checks ownership and
// lifecycle.
package delegation

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/mcp"
)

// DefaultWait and MaxWait bound wait_turn.
const (
	DefaultWait = 60 * time.Second
	MaxWait     = 10 * time.Minute
)

// Dispatcher carries out runtime MCP requests against an engine.
type Dispatcher struct{ eng *engine.Engine }

// New returns a Dispatcher for eng.
func New(eng *engine.Engine) *Dispatcher { return &Dispatcher{eng: eng} }

// Scope resolves the scope a Session's process asks for: policy empty is
// the Agent's maximum; otherwise it must be valid, name Agents of the
// Session's pinned manifest, and be within the maximum. It returns the
// normalized policy's JSON.
func (d *Dispatcher) Scope(ctx context.Context, sessionID string, policy json.RawMessage) (json.RawMessage, error) {
	max, agents, err := d.eng.RuntimeMCPMaximum(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(policy)) == 0 {
		return json.Marshal(max)
	}
	p, err := helmrtype.ParseRuntimeMCPPolicy(policy)
	if err != nil {
		return nil, err
	}
	if err := p.Check(agents); err != nil {
		return nil, err
	}
	if ok, what := p.Grants().SubsetOf(max.Grants()); !ok {
		return nil, helmrtype.Errorf(helmrtype.CodeForbidden, "the policy widens the Agent's runtime MCP maximum: it grants %s", what)
	}
	return json.Marshal(p.Normalize())
}

// decode reads a tool's arguments strictly: unknown fields are refused.
func decode(args json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "arguments: %v", err)
	}
	if dec.More() {
		return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "arguments: trailing data")
	}
	return nil
}

func required(name, v string) error {
	if v == "" {
		return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "%s is required", name)
	}
	return nil
}

// Call carries out one tool call of Session sessionID, made during its
// running Turn turnID ("" outside a Turn) under scope (a policy within the
// Session's maximum), and returns the tool's JSON result.
func (d *Dispatcher) Call(ctx context.Context, sessionID, turnID string, scope json.RawMessage, tool string, args json.RawMessage) (json.RawMessage, error) {
	t, ok := mcp.Lookup(tool)
	if !ok {
		return nil, helmrtype.Errorf(helmrtype.CodeNotFound, "no runtime MCP tool %q", tool)
	}
	p, err := helmrtype.ParseRuntimeMCPPolicy(scope)
	if err != nil {
		return nil, err
	}
	del, err := d.eng.NewDelegator(ctx, sessionID, turnID, p)
	if err != nil {
		return nil, err
	}
	if !t.Available(del.Grants) {
		return nil, helmrtype.Errorf(helmrtype.CodeForbidden, "the scope does not grant %s", tool)
	}
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	out, err := d.call(ctx, del, tool, args)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

func (d *Dispatcher) call(ctx context.Context, del *engine.Delegator, tool string, args json.RawMessage) (any, error) {
	switch tool {
	case mcp.ToolStart, mcp.ToolSpawn:
		var a mcp.CreateArgs
		if err := decode(args, &a); err != nil {
			return nil, err
		}
		if err := required("agent", a.Agent); err != nil {
			return nil, err
		}
		return d.eng.CreateFor(ctx, del, tool, a.Agent, a.Input, a.IdempotencyKey, a.ComputerID)
	case mcp.ToolEnqueue:
		var a mcp.EnqueueArgs
		if err := d.target(ctx, del, tool, args, &a, &a.SessionID); err != nil {
			return nil, err
		}
		t, _, err := d.eng.Enqueue(ctx, a.SessionID, helmrtype.EnqueueRequest{Input: a.Input, IdempotencyKey: a.IdempotencyKey}, del.Caller())
		return t, err
	case mcp.ToolSendTurn:
		var a mcp.SendTurnArgs
		if err := d.target(ctx, del, tool, args, &a, &a.SessionID); err != nil {
			return nil, err
		}
		if err := required("turn_id", a.TurnID); err != nil {
			return nil, err
		}
		return d.eng.SendMessage(ctx, a.SessionID, a.TurnID, helmrtype.MessageRequest{Content: a.Content, IdempotencyKey: a.IdempotencyKey}, del.Caller())
	case mcp.ToolInspectSession:
		var a mcp.SessionArgs
		if err := d.target(ctx, del, tool, args, &a, &a.SessionID); err != nil {
			return nil, err
		}
		return d.eng.GetSession(ctx, a.SessionID)
	case mcp.ToolListSessions:
		return d.listSessions(ctx, del, args)
	case mcp.ToolInspectTurn, mcp.ToolWaitTurn:
		var a mcp.TurnArgs
		if err := d.target(ctx, del, tool, args, &a, &a.SessionID); err != nil {
			return nil, err
		}
		if err := required("turn_id", a.TurnID); err != nil {
			return nil, err
		}
		if tool == mcp.ToolInspectTurn {
			return d.eng.GetTurn(ctx, a.SessionID, a.TurnID)
		}
		wait := DefaultWait
		if a.Timeout != "" {
			w, err := helmrtype.ParseDuration(a.Timeout)
			if err != nil {
				return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "timeout: %v", err)
			}
			wait = min(w, MaxWait)
		}
		return d.eng.WaitTurn(ctx, a.SessionID, a.TurnID, wait)
	case mcp.ToolInterruptTurn:
		var a mcp.TurnArgs
		if err := d.target(ctx, del, tool, args, &a, &a.SessionID); err != nil {
			return nil, err
		}
		if err := required("turn_id", a.TurnID); err != nil {
			return nil, err
		}
		return d.eng.InterruptTurn(ctx, a.SessionID, a.TurnID, helmrtype.ControlRequest{IdempotencyKey: a.IdempotencyKey})
	case mcp.ToolInterruptSession:
		var a mcp.SessionArgs
		if err := decode(args, &a); err != nil {
			return nil, err
		}
		if err := required("session_id", a.SessionID); err != nil {
			return nil, err
		}
		return d.eng.InterruptFor(ctx, del, a.SessionID, helmrtype.ControlRequest{IdempotencyKey: a.IdempotencyKey})
	case mcp.ToolResumeSession:
		var a mcp.ResumeArgs
		if err := decode(args, &a); err != nil {
			return nil, err
		}
		if err := required("session_id", a.SessionID); err != nil {
			return nil, err
		}
		return d.eng.ResumeFor(ctx, del, a.SessionID, helmrtype.ResumeRequest{HoldID: a.HoldID, IdempotencyKey: a.IdempotencyKey})
	case mcp.ToolCloseSession, mcp.ToolCancelSession:
		var a mcp.SessionArgs
		if err := d.target(ctx, del, tool, args, &a, &a.SessionID); err != nil {
			return nil, err
		}
		req := helmrtype.ControlRequest{IdempotencyKey: a.IdempotencyKey}
		if tool == mcp.ToolCloseSession {
			return d.eng.CloseSession(ctx, a.SessionID, req)
		}
		return d.eng.CancelSession(ctx, a.SessionID, req)
	case mcp.ToolListAgents:
		if err := decode(args, &mcp.NoArgs{}); err != nil {
			return nil, err
		}
		return d.listAgents(ctx, del)
	case mcp.ToolListComputers:
		if err := decode(args, &mcp.NoArgs{}); err != nil {
			return nil, err
		}
		computers := []map[string]any{}
		if id := del.Session.ComputerID; id != "" {
			computers = append(computers, map[string]any{"id": id, "caller": true})
		}
		return map[string]any{"computers": computers}, nil
	}
	return nil, helmrtype.Errorf(helmrtype.CodeNotFound, "no runtime MCP tool %q", tool)
}

// target decodes args into a and checks that the Delegator may use tool on
// the Session *sessionID names.
func (d *Dispatcher) target(ctx context.Context, del *engine.Delegator, tool string, args json.RawMessage, a any, sessionID *string) error {
	if err := decode(args, a); err != nil {
		return err
	}
	if err := required("session_id", *sessionID); err != nil {
		return err
	}
	_, err := d.eng.Target(ctx, del, tool, *sessionID)
	return err
}

func (d *Dispatcher) listSessions(ctx context.Context, del *engine.Delegator, args json.RawMessage) (any, error) {
	var a mcp.ListSessionsArgs
	if err := decode(args, &a); err != nil {
		return nil, err
	}
	q := engine.SessionQuery{RequesterSessionID: del.Session.ID, Agent: a.Agent, Cursor: a.Cursor, Limit: a.Limit}
	if a.Status != "" {
		q.Statuses = []string{a.Status}
	}
	page, err := d.eng.ListSessions(ctx, q)
	if err != nil {
		return nil, err
	}
	// Only Sessions of Agents the scope may inspect are shown.
	page.Sessions = slices.DeleteFunc(page.Sessions, func(s helmrtype.Session) bool {
		return !del.Grants.CanTarget(helmrtype.MCPInspectSession, s.Agent)
	})
	return page, nil
}

// agentEntry is one Agent in list_agents: what it takes and how the scope
// may create it.
type agentEntry struct {
	Agent       string          `json:"agent"`
	InputKind   string          `json:"input_kind"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	// Spawn and Start list the placements ("new", "caller") each allows.
	Spawn []string `json:"spawn,omitempty"`
	Start []string `json:"start,omitempty"`
}

func (d *Dispatcher) listAgents(ctx context.Context, del *engine.Delegator) (any, error) {
	out := []agentEntry{}
	for _, id := range del.Grants.CreatableAgents() {
		e := agentEntry{Agent: id}
		for _, op := range []string{helmrtype.MCPSpawn, helmrtype.MCPStart} {
			var places []string
			for _, pl := range []string{helmrtype.PlacementNew, helmrtype.PlacementCaller} {
				if del.Grants.CanCreate(op, id, pl) {
					places = append(places, pl)
				}
			}
			if places == nil {
				continue
			}
			// spawn creates on the caller's Deployment, start on the current one.
			dep := del.Session.DeploymentID
			if op == helmrtype.MCPStart {
				dep = ""
			}
			info, err := d.eng.GetAgent(ctx, id, dep)
			if err != nil {
				continue // not on that Deployment: this operation cannot create it
			}
			e.InputKind, e.InputSchema = info.InputKind, info.InputSchema
			if op == helmrtype.MCPSpawn {
				e.Spawn = places
			} else {
				e.Start = places
			}
		}
		if e.Spawn != nil || e.Start != nil {
			out = append(out, e)
		}
	}
	return map[string]any{"agents": out}, nil
}
