// Package mcp is the runtime MCP server of a session process: a loopback
// HTTP endpoint (MCP streamable HTTP) with one random bearer credential per
// scope, whose tools forward each call over the session protocol to the
// control plane, which checks and carries it out (internal/delegation).
// This file is the tool catalogue both ends share.
package mcp

import (
	"encoding/json"

	"github.com/helmr-go/helmr/helmrtype"
)

// Tool names.
const (
	ToolStart            = "start"
	ToolSpawn            = "spawn"
	ToolEnqueue          = "enqueue"
	ToolSendTurn         = "send_turn"
	ToolInspectSession   = "inspect_session"
	ToolListSessions     = "list_sessions"
	ToolInspectTurn      = "inspect_turn"
	ToolWaitTurn         = "wait_turn"
	ToolInterruptTurn    = "interrupt_turn"
	ToolInterruptSession = "interrupt_session"
	ToolResumeSession    = "resume_session"
	ToolCloseSession     = "close_session"
	ToolCancelSession    = "cancel_session"
	ToolListAgents       = "list_agents"
	ToolListComputers    = "list_computers"
)

// Tool describes one runtime MCP tool.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the arguments.
	InputSchema json.RawMessage
	// Operations lists the policy operations of which any one makes the
	// tool available.
	Operations []string
}

// Available reports whether a scope with grants g offers the tool.
func (t *Tool) Available(g *helmrtype.MCPGrants) bool {
	for _, op := range t.Operations {
		if g.Has(op) {
			return true
		}
	}
	return false
}

// CreateArgs are the arguments of start and spawn.
type CreateArgs struct {
	Agent          string          `json:"agent"`
	Input          json.RawMessage `json:"input"`
	IdempotencyKey string          `json:"idempotency_key"`
	ComputerID     string          `json:"computer_id,omitempty"`
}

// SessionArgs name one Session (inspect_session, interrupt_session,
// close_session, cancel_session).
type SessionArgs struct {
	SessionID      string `json:"session_id"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// EnqueueArgs are the arguments of enqueue.
type EnqueueArgs struct {
	SessionID      string          `json:"session_id"`
	Input          json.RawMessage `json:"input"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// SendTurnArgs are the arguments of send_turn: a message to one running Turn.
type SendTurnArgs struct {
	SessionID      string          `json:"session_id"`
	TurnID         string          `json:"turn_id"`
	Content        json.RawMessage `json:"content"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// TurnArgs name one Turn (inspect_turn, interrupt_turn; wait_turn with Timeout).
type TurnArgs struct {
	SessionID      string `json:"session_id"`
	TurnID         string `json:"turn_id"`
	Timeout        string `json:"timeout,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// ResumeArgs are the arguments of resume_session.
type ResumeArgs struct {
	SessionID      string `json:"session_id"`
	HoldID         string `json:"hold_id"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// ListSessionsArgs are the arguments of list_sessions.
type ListSessionsArgs struct {
	Agent  string `json:"agent,omitempty"`
	Status string `json:"status,omitempty"`
	Cursor string `json:"cursor,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// NoArgs are the arguments of list_agents and list_computers.
type NoArgs struct{}

// Schema fragments.
const (
	sessionID = `"session_id":{"type":"string","description":"The target Session's ID."}`
	turnID    = `"turn_id":{"type":"string","description":"The target Turn's ID."}`
	idemOpt   = `"idempotency_key":{"type":"string","maxLength":256,"description":"Makes a retry safe: the same key and arguments return the first answer."}`
	input     = `"input":{"description":"The Turn's input: a text Agent takes Content ([{\"type\":\"text\",\"text\":\"…\"}]); a typed Agent takes JSON matching its input schema (see list_agents)."}`
)

func schema(props string, required ...string) json.RawMessage {
	req, _ := json.Marshal(required)
	if required == nil {
		req = []byte("[]")
	}
	return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `,"additionalProperties":false}`)
}

func createSchema() json.RawMessage {
	return schema(`"agent":{"type":"string","description":"The Agent key to create a Session of."},`+input+`,`+
		`"idempotency_key":{"type":"string","minLength":1,"maxLength":256,"description":"Required: a retry with the same key returns the first Session instead of creating another."},`+
		`"computer_id":{"type":"string","description":"Place the Session on this existing Computer (the caller's, when the scope allows); omit for a new Computer."}`,
		"agent", "input", "idempotency_key")
}

// Tools is the catalogue, in the order tools/list shows them.
var Tools = []Tool{
	{Name: ToolStart, Operations: []string{helmrtype.MCPStart}, InputSchema: createSchema(),
		Description: "Start a new independent root Session of an Agent on the Environment's current Deployment, with its first Turn. Returns {session_id, turn_id, sequence, created}."},
	{Name: ToolSpawn, Operations: []string{helmrtype.MCPSpawn}, InputSchema: createSchema(),
		Description: "Spawn a child Session owned by the caller, on the caller's Deployment, with its first Turn. Cancelling or interrupting the caller's Session reaches its children. Returns {session_id, turn_id, sequence, created}."},
	{Name: ToolEnqueue, Operations: []string{helmrtype.MCPEnqueue}, InputSchema: schema(sessionID+`,`+input+`,`+idemOpt, "session_id", "input"),
		Description: "Queue a new Turn at the end of a Session's FIFO. Returns the Turn."},
	{Name: ToolSendTurn, Operations: []string{helmrtype.MCPSendTurn},
		InputSchema: schema(sessionID+`,`+turnID+`,"content":{"description":"The message: Content ([{\"type\":\"text\",\"text\":\"…\"}])."},`+idemOpt, "session_id", "turn_id", "content"),
		Description: "Send a message to one running Turn. Acceptance is not delivery. Returns {id, status}."},
	{Name: ToolInspectSession, Operations: []string{helmrtype.MCPInspectSession}, InputSchema: schema(sessionID, "session_id"),
		Description: "Read a Session: status, holds, initial Turn."},
	{Name: ToolListSessions, Operations: []string{helmrtype.MCPInspectSession},
		InputSchema: schema(`"agent":{"type":"string"},"status":{"type":"string","enum":["open","closing","closed"]},"cursor":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":100}`),
		Description: "List the Sessions the caller started or spawned, oldest first."},
	{Name: ToolInspectTurn, Operations: []string{helmrtype.MCPInspectTurn}, InputSchema: schema(sessionID+`,`+turnID, "session_id", "turn_id"),
		Description: "Read a Turn: status, result or error."},
	{Name: ToolWaitTurn, Operations: []string{helmrtype.MCPInspectTurn},
		InputSchema: schema(sessionID+`,`+turnID+`,"timeout":{"type":"string","description":"How long to wait, as \"30s\", \"5m\" (default 60s, at most 10m)."}`, "session_id", "turn_id"),
		Description: "Wait for a Turn to settle, up to timeout. Returns {status: \"settled\", outcome} or {status: \"timeout\"}; waiting never cancels the Turn."},
	{Name: ToolInterruptTurn, Operations: []string{helmrtype.MCPInterruptTurn}, InputSchema: schema(sessionID+`,`+turnID+`,`+idemOpt, "session_id", "turn_id"),
		Description: "Interrupt one running Turn of a Session the caller owns (no hold)."},
	{Name: ToolInterruptSession, Operations: []string{helmrtype.MCPInterruptSession}, InputSchema: schema(sessionID+`,`+idemOpt, "session_id"),
		Description: "Hold a Session the caller owns and everything it owns: running Turns are interrupted, queued ones wait. Returns the hold_id to resume with."},
	{Name: ToolResumeSession, Operations: []string{helmrtype.MCPResumeSession},
		InputSchema: schema(sessionID+`,"hold_id":{"type":"string","description":"A hold this caller placed with interrupt_session."},`+idemOpt, "session_id", "hold_id"),
		Description: "Release exactly one hold the caller placed with interrupt_session."},
	{Name: ToolCloseSession, Operations: []string{helmrtype.MCPCloseSession}, InputSchema: schema(sessionID+`,`+idemOpt, "session_id"),
		Description: "Close a Session the caller owns: it admits no new Turns and closes once its retained work drains."},
	{Name: ToolCancelSession, Operations: []string{helmrtype.MCPCancelSession}, InputSchema: schema(sessionID+`,`+idemOpt, "session_id"),
		Description: "Cancel a Session the caller owns and its owned tree: queued work is discarded, running work is asked to stop."},
	{Name: ToolListAgents, Operations: []string{helmrtype.MCPStart, helmrtype.MCPSpawn}, InputSchema: schema(""),
		Description: "List the Agents this scope may start or spawn, with their input schemas and placements."},
	{Name: ToolListComputers, Operations: []string{helmrtype.MCPListComputers}, InputSchema: schema(""),
		Description: "List the existing Computers a created Session may be placed on."},
}

// Lookup returns the tool named name.
func Lookup(name string) (*Tool, bool) {
	for i := range Tools {
		if Tools[i].Name == name {
			return &Tools[i], true
		}
	}
	return nil, false
}
