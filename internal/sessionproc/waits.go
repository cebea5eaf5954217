package sessionproc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/google/uuid"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/protocol"
)

type turnKey struct{}

// TurnFrom returns the running Turn whose context ctx is (or derives from),
// nil outside a Turn.
func TurnFrom(ctx context.Context) *Turn {
	t, _ := ctx.Value(turnKey{}).(*Turn)
	return t
}

// errNotInTurn is returned by waits started outside a Turn's context.
var errNotInTurn = helmrtype.Errorf(helmrtype.CodeInvalidRequest, "a durable wait needs the context of a running turn (the ctx its handler got)")

// Ask asks a person q and waits for the answer. Only root Sessions may
// ask. idle is the hot-wait duration ("" for the default).
func (t *Turn) Ask(ctx context.Context, q helmrtype.Question, idle string) (*helmrtype.WaitOutcome, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	id := uuid.Must(uuid.NewV7()).String()
	if _, err := t.call(ctx, &protocol.Msg{Type: protocol.TypeAsk, Ask: &protocol.AskStart{ID: id, Question: q}}); err != nil {
		return nil, err
	}
	return t.Wait(ctx, helmrtype.WaitStart{Kind: helmrtype.WaitAsk, TargetID: id, IdleTimeout: idle})
}

// CreateToken creates a Token and returns it with its public access
// credential, which only this call ever sees.
func (t *Turn) CreateToken(ctx context.Context, c helmrtype.TokenCreate) (*helmrtype.TokenState, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	b := make([]byte, 32)
	rand.Read(b)
	secret := "hlmr_tok_" + hex.EncodeToString(b)
	id := uuid.Must(uuid.NewV7()).String()
	a, err := t.call(ctx, &protocol.Msg{Type: protocol.TypeTokenCreate, Token: &protocol.TokenStart{ID: id, Secret: secret, Create: c}})
	if err != nil {
		return nil, err
	}
	st := a.TokenState
	if st == nil {
		return nil, helmrtype.Errorf(helmrtype.CodeInternal, "token.create was acknowledged without the token")
	}
	if st.ID == id {
		// A Token found by its idempotency key keeps its own credential,
		// shown only when it was created.
		st.PublicAccessToken = secret
	}
	return st, nil
}

// Wait starts a durable wait and blocks until it ends or ctx does. The
// server keeps the wait (its deadline, its target) in the store, resolves
// it and, if the process was suspended meanwhile, wakes it first. When ctx
// ends first the wait is withdrawn.
func (t *Turn) Wait(ctx context.Context, w helmrtype.WaitStart) (o *helmrtype.WaitOutcome, err error) {
	if w.ID == "" {
		w.ID = uuid.Must(uuid.NewV7()).String()
	}
	if w.IdleTimeout == "" {
		w.IdleTimeout = t.info.IdleTimeout
	}
	if sp := t.startSpan(ctx, protocol.SpanWait); sp != nil {
		sp.SetAttribute("helmr.wait.kind", w.Kind)
		sp.SetAttribute("helmr.wait.id", w.ID)
		defer func() {
			if o != nil {
				sp.SetAttribute("helmr.wait.status", o.Status)
			}
			sp.SetError(err)
			sp.End()
		}()
	}
	ch := t.c.addWaiter(w.ID, t.ID)
	defer t.c.removeWaiter(w.ID)
	if _, err := t.call(ctx, &protocol.Msg{Type: protocol.TypeWaitStart, Wait: &w}); err != nil {
		return nil, err
	}
	select {
	case o = <-ch:
		return o, nil
	case <-ctx.Done():
		// Withdraw the wait, so that the server does not keep it open
		// (and suspend the process for it) while the handler goes on.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		t.call(cctx, &protocol.Msg{Type: protocol.TypeWaitCancel, WaitID: w.ID})
		cancel()
		return nil, context.Cause(ctx)
	case <-t.c.closed:
		return nil, helmrtype.Errorf(helmrtype.CodeUnavailable, "connection to the control plane lost")
	}
}

type waiter struct {
	turnID string
	ch     chan *helmrtype.WaitOutcome
}

func (c *Conn) addWaiter(id, turnID string) chan *helmrtype.WaitOutcome {
	ch := make(chan *helmrtype.WaitOutcome, 1)
	c.mu.Lock()
	if c.waiters == nil {
		c.waiters = map[string]waiter{}
	}
	c.waiters[id] = waiter{turnID, ch}
	c.mu.Unlock()
	return ch
}

func (c *Conn) removeWaiter(id string) {
	c.mu.Lock()
	delete(c.waiters, id)
	c.mu.Unlock()
}

// resolveWait hands a wait's outcome to its waiter; an unknown or repeated
// one is ignored.
func (c *Conn) resolveWait(id string, o *helmrtype.WaitOutcome) {
	c.mu.Lock()
	w, ok := c.waiters[id]
	delete(c.waiters, id)
	c.mu.Unlock()
	if ok && o != nil {
		w.ch <- o
	}
}

// resumeWaits asks, after a reconnect, for the outcome of every wait still
// blocked on; c.wmu is held.
func (c *Conn) resumeWaits(ctx context.Context) {
	c.mu.Lock()
	ids := make(map[string]string, len(c.waiters))
	for id, w := range c.waiters {
		ids[id] = w.turnID
	}
	c.mu.Unlock()
	for id, turnID := range ids {
		c.writeLocked(ctx, &protocol.Msg{Type: protocol.TypeWaitResume, TurnID: turnID, WaitID: id})
	}
}
