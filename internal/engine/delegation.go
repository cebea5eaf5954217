package engine

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store"
)

// Runtime MCP delegation: a Session's agent code creates and steers other
// Sessions through the runtime MCP server. The transport (internal/mcp and
// internal/delegation) checks the call's shape; the engine checks who may
// do what: the caller's pinned maximum and scope, ownership and lifecycle.

// Delegator is a Session acting through runtime MCP, with its scope.
type Delegator struct {
	// Session is the caller, as stored.
	Session *store.Session
	// OriginTurnID is the caller's running Turn the call was made in, ""
	// when it was made outside a Turn (in init, or between Turns).
	OriginTurnID string
	// Grants is the caller's scope, already checked to be within its
	// Agent's maximum.
	Grants *helmrtype.MCPGrants
}

// Caller is the input source of Turns the Delegator creates.
func (d *Delegator) Caller() Caller {
	return Caller{Source: helmrtype.InputSource{Kind: helmrtype.SourceSession, RequesterSessionID: d.Session.ID, OriginTurnID: d.OriginTurnID}}
}

// RuntimeMCPMaximum returns the runtime MCP maximum of a Session's Agent
// on the Deployment it is pinned to; later Deployments never change it.
func (e *Engine) RuntimeMCPMaximum(ctx context.Context, sessionID string) (*helmrtype.RuntimeMCPPolicy, []string, error) {
	var max *helmrtype.RuntimeMCPPolicy
	var agents []string
	err := e.store.View(ctx, func(tx store.Tx) error {
		s, dep, _, err := e.sessionAgentTx(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		max = dep.mcp[s.Agent]
		for _, a := range dep.manifest.Agents {
			agents = append(agents, a.ID)
		}
		return nil
	})
	return max, agents, err
}

// NewDelegator loads the calling Session and checks its scope against its
// maximum. originTurnID is kept only when it names the Session's running
// Turn.
func (e *Engine) NewDelegator(ctx context.Context, sessionID, originTurnID string, scope *helmrtype.RuntimeMCPPolicy) (*Delegator, error) {
	max, agents, err := e.RuntimeMCPMaximum(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if err := scope.Check(agents); err != nil {
		return nil, err
	}
	g := scope.Grants()
	if ok, what := g.SubsetOf(max.Grants()); !ok {
		return nil, helmrtype.Errorf(helmrtype.CodeForbidden, "the scope grants %s, which the Agent's runtime MCP maximum does not", what)
	}
	d := &Delegator{Grants: g}
	err = e.store.View(ctx, func(tx store.Tx) error {
		if d.Session, err = e.getSessionTx(ctx, tx, sessionID); err != nil {
			return err
		}
		if originTurnID != "" {
			if t, err := tx.GetTurn(ctx, sessionID, originTurnID); err == nil && t.Status == helmrtype.TurnRunning {
				d.OriginTurnID = t.ID
			} else if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

func denied(format string, args ...any) error {
	return helmrtype.Errorf(helmrtype.CodeForbidden, format, args...)
}

// DelegatedCreate is what start and spawn return.
type DelegatedCreate struct {
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
	Sequence  int64  `json:"sequence"`
	Created   bool   `json:"created"`
}

// CreateFor starts (op start: a new independent root Session on the
// current Deployment) or spawns (op spawn: a child the caller owns, on the
// caller's pinned Deployment) a Session of agent with its first Turn.
// computerID "" places it on a new Computer; the caller's Computer ID
// places it there when the scope grants "caller" placement. Only root
// Sessions may create Sessions, and idempotencyKey is required.
func (e *Engine) CreateFor(ctx context.Context, d *Delegator, op, agent string, input json.RawMessage, idempotencyKey, computerID string) (*DelegatedCreate, error) {
	if op != helmrtype.MCPStart && op != helmrtype.MCPSpawn {
		return nil, invalid("operation %q does not create Sessions", op)
	}
	if idempotencyKey == "" {
		return nil, invalid("idempotency_key is required: a retried %s then creates nothing twice", op)
	}
	if !hasInput(input) {
		return nil, &helmrtype.Error{Code: helmrtype.CodeInputInvalid, Message: "input is required: " + op + " creates the Session with its first Turn"}
	}
	caller := d.Session
	if caller.ParentSessionID != "" {
		return nil, denied("only root Sessions may %s Sessions; session %s is owned by %s and reports to it instead", op, caller.ID, caller.ParentSessionID)
	}
	placement := helmrtype.PlacementNew
	if computerID != "" {
		if caller.ComputerID == "" || computerID != caller.ComputerID {
			return nil, denied("computer %s is not eligible: %s may place a Session only on a new Computer or on the caller's (%s)", computerID, op, caller.ComputerID)
		}
		placement = helmrtype.PlacementCaller
	}
	if !d.Grants.CanCreate(op, agent, placement) {
		return nil, denied("the scope does not grant %s of Agent %q on a %s Computer", op, agent, placement)
	}
	req := helmrtype.SessionCreateRequest{Agent: agent, Input: input, IdempotencyKey: idempotencyKey, ComputerID: computerID}
	opts := createOpts{scope: "mcp." + op + ":" + caller.ID, computerID: computerID, creator: caller}
	if op == helmrtype.MCPSpawn {
		opts.deploymentID, opts.owner = caller.DeploymentID, caller
	}
	r, replay, err := e.createSession(ctx, req, d.Caller(), opts)
	if err != nil {
		return nil, err
	}
	out := &DelegatedCreate{SessionID: r.Session.ID, Created: !replay}
	if r.Turn != nil {
		out.TurnID, out.Sequence = r.Turn.ID, r.Turn.Sequence
	}
	return out, nil
}

// controlOps are the targeted operations only an owner may use.
var controlOps = map[string]bool{
	helmrtype.MCPInterruptTurn: true, helmrtype.MCPInterruptSession: true, helmrtype.MCPResumeSession: true,
	helmrtype.MCPCloseSession: true, helmrtype.MCPCancelSession: true,
}

// Target checks that the Delegator may use the targeted operation op
// (wait_turn counts as inspect_turn) on Session targetID and returns it.
// Sessions the caller started or spawned are in reach; the controls
// (interrupt, resume, close, cancel) reach only the children it owns.
// A Session out of reach is reported as not found.
func (e *Engine) Target(ctx context.Context, d *Delegator, op, targetID string) (*store.Session, error) {
	if !d.Grants.Has(op) {
		return nil, denied("the scope does not grant %s", op)
	}
	var t *store.Session
	err := e.store.View(ctx, func(tx store.Tx) error {
		var err error
		t, err = e.getSessionTx(ctx, tx, targetID)
		return err
	})
	if err != nil {
		return nil, err
	}
	owned := t.ParentSessionID == d.Session.ID
	if !owned && (controlOps[op] || t.RequesterSessionID != d.Session.ID) {
		if t.RequesterSessionID == d.Session.ID {
			return nil, denied("%s reaches only Sessions the caller owns; session %s was started as an independent Session", op, t.ID)
		}
		return nil, notFound("session", targetID)
	}
	if !d.Grants.CanTarget(op, t.Agent) {
		return nil, denied("the scope does not grant %s on Agent %q", op, t.Agent)
	}
	return t, nil
}

// InterruptFor holds a Session the Delegator owns; only the Delegator may
// resume that hold through runtime MCP.
func (e *Engine) InterruptFor(ctx context.Context, d *Delegator, targetID string, req helmrtype.ControlRequest) (*helmrtype.SessionControlReceipt, error) {
	if _, err := e.Target(ctx, d, helmrtype.MCPInterruptSession, targetID); err != nil {
		return nil, err
	}
	return e.interruptSession(ctx, targetID, req, d.Session.ID)
}

// ResumeFor releases a hold the Delegator placed with InterruptFor.
func (e *Engine) ResumeFor(ctx context.Context, d *Delegator, targetID string, req helmrtype.ResumeRequest) (*helmrtype.SessionControlReceipt, error) {
	if _, err := e.Target(ctx, d, helmrtype.MCPResumeSession, targetID); err != nil {
		return nil, err
	}
	return e.resumeSession(ctx, targetID, req, d.Session.ID)
}
