package supervisor

import (
	"context"
	"encoding/json"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/obs"
	"github.com/helmr-go/helmr/internal/protocol"
)

// startMCP carries out a runtime MCP request (mcp.scope or mcp.call) in
// the background: calls such as wait_turn block, and the connection keeps
// serving meanwhile. The process counts as busy (never suspended) while a
// call is in flight. ctx ends with the connection.
func (s *Supervisor) startMCP(ctx context.Context, p *proc, m *protocol.Msg) {
	p.mu.Lock()
	acts := s.applyLocked(p, event{kind: evCallStarted})
	traceParent := p.trace
	if p.running != m.TurnID {
		traceParent = ""
	}
	p.mu.Unlock()
	s.carry(p, acts)
	// A Turn this call admits (a child Session's) links to the calling
	// Turn's span.
	if sc, ok := obs.TurnSpanContext(traceParent, m.TurnID); ok {
		ctx = obs.Link(ctx, sc)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var res json.RawMessage
		var err error
		switch {
		case m.MCP == nil:
			err = helmrtype.Errorf(helmrtype.CodeInvalidRequest, "%s needs mcp", m.Type)
		case m.Type == protocol.TypeMCPScope:
			res, err = s.deleg.Scope(ctx, p.sessionID, m.MCP.Scope)
		default:
			res, err = s.deleg.Call(ctx, p.sessionID, m.TurnID, m.MCP.Scope, m.MCP.Tool, m.MCP.Args)
		}
		r := &protocol.Msg{Type: protocol.TypeMCPResult, CallID: m.CallID, Result: res}
		if err != nil {
			r.Error, r.Result = toError(err), nil
		}
		// Busy no more, and thawed (were it frozen) before the result.
		s.step(p, event{kind: evCallEnded})
		if ctx.Err() == nil {
			if serr := s.send(p, r); serr != nil {
				s.log.Debug("mcp.result", "session", p.sessionID, "err", serr)
			}
		}
	}()
}
