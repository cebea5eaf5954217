package helmr

import (
	"context"

	"github.com/helmr-go/helmr/internal/sessionproc"
)

// SessionInfo identifies the Session a process serves.
type SessionInfo struct {
	ID  string
	Key string
	// ParentID is the parent Session of owned child work, "" for a root.
	ParentID string
}

// Recovery says whether this process is the Session's first ("initial") or
// an explicit reconstruction ("reconstructed") that ran init again.
type Recovery struct {
	Kind   string
	Reason string
}

// InitContext is what init receives; AgentContext embeds it.
type InitContext struct {
	Session      SessionInfo
	ComputerID   string
	DeploymentID string
	Recovery     Recovery
	ctx          context.Context
}

// Context ends when the session process shuts down, including during init.
func (ic *InitContext) Context() context.Context { return ic.ctx }

// AgentContext is what a Turn handler receives besides the Turn.
type AgentContext[S any] struct {
	*InitContext
	// InitResult is what init returned (the zero S without init).
	InitResult S
}

func newInitContext(info *sessionproc.Info) *InitContext {
	return &InitContext{Session: SessionInfo{ID: info.SessionID, Key: info.SessionKey, ParentID: info.ParentID},
		ComputerID: info.ComputerID, DeploymentID: info.DeploymentID,
		Recovery: Recovery{Kind: info.RecoveryKind, Reason: info.RecoveryReason}, ctx: info.Ctx}
}

func newInitContextFromTurn(rt *sessionproc.Turn, _ any) *InitContext {
	return newInitContext(rt.Info())
}
