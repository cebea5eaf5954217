package sessionproc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/protocol"
)

// Runtime MCP: the process's MCP server (internal/mcp) forwards scope
// requests and tool calls here; they travel as mcp.scope and mcp.call and
// are answered by call_id.

// mcpBackend implements mcp.Backend over the connection.
type mcpBackend struct{ c *Conn }

func (b mcpBackend) ResolveScope(ctx context.Context, policy json.RawMessage) (json.RawMessage, error) {
	return b.c.call(ctx, &protocol.Msg{Type: protocol.TypeMCPScope, MCP: &protocol.MCPCall{Scope: policy}})
}

func (b mcpBackend) Call(ctx context.Context, scope json.RawMessage, tool string, args json.RawMessage) (json.RawMessage, error) {
	m := &protocol.Msg{Type: protocol.TypeMCPCall, MCP: &protocol.MCPCall{Scope: scope, Tool: tool, Args: args}}
	b.c.mu.Lock()
	t := b.c.turn
	if t != nil {
		m.TurnID = t.ID
	}
	b.c.mu.Unlock()
	// The call comes over the MCP server's HTTP, not the Turn's ctx: its
	// span is a child of the Turn's handler span.
	sp := t.startSpan(ctx, protocol.SpanMCP)
	res, err := b.c.call(ctx, m)
	if sp != nil {
		sp.SetAttribute("helmr.mcp.tool", tool)
		if err != nil {
			sp.SetAttribute("helmr.error.code", string(helmrtype.CodeOf(err)))
			sp.SetError(err)
		}
		sp.End()
	}
	return res, err
}

var errCallLost = helmrtype.Errorf(helmrtype.CodeUnavailable, "the connection to the control plane was lost during the call; it may or may not have taken effect: retry with the same idempotency_key")

// call sends a request and waits for its mcp.result.
func (c *Conn) call(ctx context.Context, m *protocol.Msg) (json.RawMessage, error) {
	b := make([]byte, 16)
	rand.Read(b)
	m.CallID = hex.EncodeToString(b)
	ch := make(chan *protocol.Msg, 1)
	c.mu.Lock()
	if c.calls == nil {
		c.calls = map[string]chan *protocol.Msg{}
	}
	c.calls[m.CallID] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.calls, m.CallID)
		c.mu.Unlock()
	}()
	if err := c.write(context.WithoutCancel(ctx), m); err != nil {
		return nil, errCallLost
	}
	select {
	case r := <-ch:
		if r == nil {
			return nil, errCallLost
		}
		if r.Error != nil {
			return nil, r.Error
		}
		return r.Result, nil
	case <-c.closed:
		return nil, errCallLost
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// deliverCall hands an mcp.result to its caller.
func (c *Conn) deliverCall(m *protocol.Msg) {
	c.mu.Lock()
	ch := c.calls[m.CallID]
	delete(c.calls, m.CallID)
	c.mu.Unlock()
	if ch != nil {
		ch <- m
	}
}

// failCalls ends every call in flight when the connection is replaced:
// the new control plane knows nothing of them.
func (c *Conn) failCalls() {
	c.mu.Lock()
	calls := c.calls
	c.calls = nil
	c.mu.Unlock()
	for _, ch := range calls {
		ch <- nil
	}
}
