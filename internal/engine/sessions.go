package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/obs"
	"github.com/helmr-go/helmr/internal/store"
	"go.opentelemetry.io/otel/trace"
)

// Caller identifies who makes a request, for input sources.
type Caller struct {
	Source helmrtype.InputSource
}

// APICaller is a request made with an API key.
var APICaller = Caller{Source: helmrtype.InputSource{Kind: helmrtype.SourceAPIKey}}

// checkInput validates Turn input for an Agent and returns its canonical JSON.
func checkInput(a *helmrtype.AgentManifest, raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) > helmrtype.MaxInputBytes {
		return nil, &helmrtype.Error{Code: helmrtype.CodeInputInvalid, Message: "input is " + strconv.Itoa(len(raw)) + " bytes; the limit is " + strconv.Itoa(helmrtype.MaxInputBytes)}
	}
	if a.InputKind == helmrtype.InputKindText {
		c, err := helmrtype.ParseContent(raw, helmrtype.MaxInputBytes, true)
		if err != nil {
			return nil, &helmrtype.Error{Code: helmrtype.CodeInputInvalid, Message: "agent " + a.ID + " takes text input content ([{\"type\":\"text\",\"text\":…}]): " + err.Error()}
		}
		return json.Marshal(c)
	}
	if err := helmrtype.CheckJSON(raw); err != nil {
		return nil, &helmrtype.Error{Code: helmrtype.CodeInputInvalid, Message: "input: " + err.Error()}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, &helmrtype.Error{Code: helmrtype.CodeInputInvalid, Message: err.Error()}
	}
	return buf.Bytes(), nil
}

func hasInput(raw json.RawMessage) bool {
	return len(bytes.TrimSpace(raw)) > 0
}

// CreateSession admits a new Session pinned to the current Deployment, with
// its initial Turn when input is given. replayed tells an idempotent replay,
// which returns the original receipt.
func (e *Engine) CreateSession(ctx context.Context, req helmrtype.SessionCreateRequest, caller Caller) (_ *helmrtype.SessionCreateReceipt, replayed bool, _ error) {
	return e.createSession(ctx, req, caller, createOpts{scope: "sessions.create", computerID: req.ComputerID, slackReq: req.Slack})
}

// createOpts says how createSession places a new Session.
type createOpts struct {
	// scope names the idempotency keys' space.
	scope string
	// deploymentID pins the Session to this Deployment ("" the current one).
	deploymentID string
	// creator is the Session that asks through runtime MCP (nil for the
	// API); it must be open.
	creator *store.Session
	// owner is the Session that owns the new one (nil for a root Session).
	owner *store.Session
	// computerID places the Session on an existing Computer ("" a new one).
	computerID string
	// slackReq opens the Session in a Slack channel (the API's request);
	// slack binds it to an existing thread (a mention in Slack).
	slackReq *helmrtype.SlackChannelRequest
	slack    *slackPlace
}

func (e *Engine) createSession(ctx context.Context, req helmrtype.SessionCreateRequest, caller Caller, opts createOpts) (_ *helmrtype.SessionCreateReceipt, replayed bool, err error) {
	if err := e.admitting(); err != nil {
		return nil, false, err
	}
	if req.Agent == "" {
		return nil, false, invalid("agent is required")
	}
	if len(req.Key) > 256 {
		return nil, false, invalid("key is longer than 256 bytes")
	}
	var receipt *helmrtype.SessionCreateReceipt
	var sessionID string
	var created bool
	if e.tracer.Enabled() && hasInput(req.Input) {
		var sp trace.Span
		ctx, sp = e.tracer.StartAdmit(ctx)
		defer func() {
			var turnID string
			if receipt != nil && receipt.Turn != nil {
				turnID = receipt.Turn.ID
			}
			obs.EndSpan(sp, sessionID, turnID, err)
		}()
	}
	err = e.store.Update(ctx, func(tx store.Tx) error {
		now := e.Now()
		r, replay, err := idempotent(ctx, tx, now, opts.scope, req.IdempotencyKey, req, func() (*helmrtype.SessionCreateReceipt, error) {
			var dep *deployment
			var err error
			if opts.deploymentID != "" {
				dep, err = e.deploymentTx(ctx, tx, opts.deploymentID)
			} else {
				dep, err = e.currentDeploymentTx(ctx, tx)
			}
			if err != nil {
				return nil, err
			}
			if opts.computerID != "" {
				if err := e.placeSessionTx(ctx, tx, opts.computerID); err != nil {
					return nil, err
				}
			}
			place := opts.slack
			if opts.slackReq != nil {
				if opts.creator != nil {
					return nil, invalid("a Session created by a Session cannot open in Slack")
				}
				app, err := slackAppForTx(ctx, tx, opts.slackReq)
				if err != nil {
					return nil, err
				}
				place = &slackPlace{appID: app.ID, channelID: opts.slackReq.ChannelID}
			}
			if opts.creator != nil {
				// Re-read in this transaction: a cancelled or closing
				// Session creates nothing (a replay still answers above).
				o, err := e.getSessionTx(ctx, tx, opts.creator.ID)
				if err != nil {
					return nil, err
				}
				if o.Status != helmrtype.SessionOpen {
					return nil, helmrtype.Errorf(helmrtype.CodeSessionClosed, "session %s is %s and cannot create Sessions", o.ID, o.Status)
				}
			}
			a, ok := dep.agents[req.Agent]
			if !ok {
				which := "the current deployment"
				if opts.deploymentID != "" {
					which = "deployment " + dep.row.ID
				}
				return nil, &helmrtype.Error{Code: helmrtype.CodeNotFound, Message: "agent " + req.Agent + " is not in " + which, Details: map[string]any{"agent": req.Agent, "deployment_id": dep.row.ID}}
			}
			var input json.RawMessage
			if hasInput(req.Input) {
				if input, err = checkInput(a, req.Input); err != nil {
					return nil, err
				}
			}
			if req.Key != "" {
				if _, err := tx.GetSessionByKey(ctx, a.ID, req.Key); err == nil {
					return nil, &helmrtype.Error{Code: helmrtype.CodeSessionKeyConflict, Message: "agent " + a.ID + " already has a session with key " + req.Key}
				} else if !errors.Is(err, store.ErrNotFound) {
					return nil, err
				}
			}
			id := NewID()
			s := &store.Session{ID: id, DeploymentID: dep.row.ID, RootSessionID: id, Agent: a.ID, Template: a.Template,
				Key: req.Key, Status: helmrtype.SessionOpen, CloseAfterIdle: a.CloseAfterIdle, HibernateAfterIdle: a.HibernateAfterIdle,
				MaxTurnDuration: a.MaxTurnDuration, CreatedAt: now, ComputerID: opts.computerID}
			if opts.owner != nil {
				s.ParentSessionID, s.RootSessionID = opts.owner.ID, opts.owner.RootSessionID
			}
			if caller.Source.Kind == helmrtype.SourceSession {
				s.RequesterSessionID = caller.Source.RequesterSessionID
			}
			var turn *store.Turn
			if input == nil {
				setIdle(s, &now)
			} else {
				turn = &store.Turn{ID: NewID(), SessionID: id, Sequence: 1}
				s.InitialTurnID = turn.ID
			}
			if place != nil {
				if err := e.placeSlackTx(ctx, tx, s, place); err != nil {
					return nil, err
				}
			}
			if err := tx.InsertSession(ctx, s); err != nil {
				if errors.Is(err, store.ErrDuplicate) {
					return nil, &helmrtype.Error{Code: helmrtype.CodeSessionKeyConflict, Message: "agent " + a.ID + " already has a session with key " + req.Key}
				}
				return nil, err
			}
			out := &helmrtype.SessionCreateReceipt{}
			if turn != nil {
				if err := e.admitTurn(ctx, tx, turn, input, caller, now, false); err != nil {
					return nil, err
				}
				ts := turnState(turn)
				out.Turn = &ts
			}
			out.Session = sessionView(s, out.Turn)
			e.armIdleClose(s)
			return out, nil
		})
		if err != nil {
			return err
		}
		receipt, created = r, !replay
		sessionID = r.Session.ID
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	if created {
		if opts.slackReq != nil || opts.slack != nil {
			e.wake(slackLeasePrefix)
		}
		e.wake(sessionID)
		if receipt.Turn != nil {
			e.notify().SessionWork(sessionID)
		}
	}
	return receipt, !created, nil
}

// admitTurn inserts a queued Turn and its turn.queued event. With start
// (the caller checked that it may start: startTurnTx's conditions) the
// Turn is written running at once, with its turn.running event after
// turn.queued: one write of the row instead of an insert and an update.
func (e *Engine) admitTurn(ctx context.Context, tx store.Tx, t *store.Turn, input json.RawMessage, caller Caller, now time.Time, start bool) error {
	src, err := json.Marshal(caller.Source)
	if err != nil {
		return err
	}
	t.Status, t.Input, t.Source, t.CreatedAt = helmrtype.TurnQueued, input, src, now
	if e.tracer.Enabled() {
		t.TraceParent = obs.TraceParent(ctx)
	}
	queued := *t
	if start {
		t.Status, t.StartedAt = helmrtype.TurnRunning, &now
	}
	if err := tx.InsertTurn(ctx, t); err != nil {
		return err
	}
	queued.Sequence = t.Sequence
	noteTurn(tx, &queued)
	if _, err = e.appendEvent(ctx, tx, t.SessionID, t.ID, helmrtype.EventTurnQueued,
		map[string]any{"sequence": t.Sequence, "input": input, "source": caller.Source}, now); err != nil || !start {
		return err
	}
	noteTurn(tx, t)
	_, err = e.appendEvent(ctx, tx, t.SessionID, t.ID, helmrtype.EventTurnRunning, nil, now)
	return err
}

func (e *Engine) getSessionTx(ctx context.Context, tx store.Tx, id string) (*store.Session, error) {
	s, err := tx.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("session", id)
	}
	return s, err
}

// Enqueue always admits a new Turn at the end of the Session's FIFO;
// replayed tells an idempotent replay of an earlier admission.
func (e *Engine) Enqueue(ctx context.Context, sessionID string, req helmrtype.EnqueueRequest, caller Caller) (_ *helmrtype.TurnState, replayed bool, err error) {
	if err := e.admitting(); err != nil {
		return nil, false, err
	}
	if !hasInput(req.Input) {
		return nil, false, &helmrtype.Error{Code: helmrtype.CodeInputInvalid, Message: "input is required"}
	}
	var out *helmrtype.TurnState
	if e.tracer.Enabled() {
		var sp trace.Span
		ctx, sp = e.tracer.StartAdmit(ctx)
		defer func() {
			var turnID string
			if out != nil {
				turnID = out.ID
			}
			obs.EndSpan(sp, sessionID, turnID, err)
		}()
	}
	var replay bool
	var started *store.Turn
	var msgs []store.Message
	res := e.notify().Reserve(sessionID)
	err = e.store.Update(ctx, func(tx store.Tx) error {
		now := e.Now()
		var err error
		started, msgs = nil, nil
		out, replay, err = idempotent(ctx, tx, now, "turns.enqueue:"+sessionID, req.IdempotencyKey, req, func() (*helmrtype.TurnState, error) {
			s, _, a, err := e.sessionAgentTx(ctx, tx, sessionID)
			if err != nil {
				return nil, err
			}
			if s.Status != helmrtype.SessionOpen {
				return nil, helmrtype.Errorf(helmrtype.CodeSessionClosed, "session %s is %s and admits no new turns", s.ID, s.Status)
			}
			input, err := checkInput(a, req.Input)
			if err != nil {
				return nil, err
			}
			wasIdle := s.IdleSince != nil
			// The same transaction starts the Turn on an idle process,
			// unless a hold applies or another node supervises the
			// Session (startTurnTx's conditions). An idle Session had
			// nothing ahead of it.
			start := false
			if res != nil && wasIdle {
				held, err := e.heldTx(ctx, tx, s.ID)
				if err != nil {
					return nil, err
				}
				if !held {
					if start, err = e.supervisesTx(ctx, tx, sessionID); err != nil {
						return nil, err
					}
				}
			}
			// InsertTurn assigns the next sequence.
			t := &store.Turn{ID: NewID(), SessionID: sessionID}
			if err := e.admitTurn(ctx, tx, t, input, caller, now, start); err != nil {
				return nil, err
			}
			if wasIdle {
				if err := tx.SetSessionIdleSince(ctx, sessionID, nil, nil); err != nil {
					return nil, err
				}
			}
			// The receipt shows the Turn as admitted (queued).
			ts := turnState(t)
			ts.Status, ts.StartedAt = helmrtype.TurnQueued, nil
			switch {
			case start:
				started = t
			case res != nil && !wasIdle:
				if started, msgs, err = e.startNextTx(ctx, tx, sessionID); err != nil {
					return nil, err
				}
			}
			return &ts, nil
		})
		return err
	})
	if res != nil {
		if err != nil {
			started, msgs = nil, nil
		}
		res.Started(started, msgs)
	}
	if err != nil {
		return nil, false, err
	}
	if !replay {
		e.wake(sessionID)
		if started == nil {
			e.notify().SessionWork(sessionID)
		}
	}
	return out, replay, nil
}

func sessionView(s *store.Session, initial *helmrtype.TurnState) helmrtype.Session {
	v := helmrtype.Session{ID: s.ID, DeploymentID: s.DeploymentID, RootSessionID: s.RootSessionID, Agent: s.Agent,
		Template: s.Template, Key: s.Key, SlackChannelID: s.SlackChannelID, Status: s.Status, CloseAfterIdle: s.CloseAfterIdle,
		HibernateAfterIdle: s.HibernateAfterIdle, MaxTurnDuration: s.MaxTurnDuration, IdleSince: s.IdleSince,
		Holds: []helmrtype.Hold{}, CreatedAt: s.CreatedAt,
		ComputerID: optional(s.ComputerID), ParentSessionID: optional(s.ParentSessionID), RequesterSessionID: optional(s.RequesterSessionID)}
	if initial != nil {
		v.InitialTurn = &helmrtype.TurnBrief{ID: initial.ID, Status: initial.Status}
	}
	return v
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func turnState(t *store.Turn) helmrtype.TurnState {
	ts := helmrtype.TurnState{ID: t.ID, SessionID: t.SessionID, Sequence: t.Sequence, Status: t.Status, Input: t.Input,
		CreatedAt: t.CreatedAt, StartedAt: t.StartedAt, TerminalAt: t.TerminalAt}
	if len(t.Source) > 0 {
		json.Unmarshal(t.Source, &ts.Source)
	}
	if t.PayloadExpiredAt != nil {
		// The history retention dropped the payloads: say so, and show
		// none (the store keeps none either).
		at := *t.PayloadExpiredAt
		ts.PayloadExpiredAt, ts.Input = &at, nil
	} else if t.Status == helmrtype.TurnCompleted {
		ts.Result = t.Result
		if t.ResponseStaged {
			ts.Response = helmrtype.Content{}
			json.Unmarshal(t.Response, &ts.Response)
		}
	}
	if t.ErrorCode != "" {
		ts.Error = &helmrtype.TurnError{Code: helmrtype.Code(t.ErrorCode), Message: t.ErrorMessage}
	}
	return ts
}

func (e *Engine) sessionViewTx(ctx context.Context, tx store.Tx, s *store.Session) (helmrtype.Session, error) {
	var initial *helmrtype.TurnState
	if s.InitialTurnID != "" {
		t, err := tx.GetTurn(ctx, s.ID, s.InitialTurnID)
		if err != nil {
			return helmrtype.Session{}, err
		}
		ts := turnState(t)
		initial = &ts
	}
	v := sessionView(s, initial)
	hs, err := e.holdsTx(ctx, tx, s.ID)
	if err != nil {
		return helmrtype.Session{}, err
	}
	for i := range hs {
		v.Holds = append(v.Holds, holdView(&hs[i]))
	}
	return v, nil
}

// GetSession returns a Session's current state.
func (e *Engine) GetSession(ctx context.Context, id string) (*helmrtype.Session, error) {
	var out helmrtype.Session
	err := e.store.View(ctx, func(tx store.Tx) error {
		s, err := e.getSessionTx(ctx, tx, id)
		if err != nil {
			return err
		}
		out, err = e.sessionViewTx(ctx, tx, s)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// SessionQuery filters ListSessions.
type SessionQuery struct {
	Agent              string
	Key                string
	Statuses           []string
	ParentSessionID    string
	RequesterSessionID string
	Cursor             string
	Limit              int
}

// ListSessions lists Sessions in creation order.
func (e *Engine) ListSessions(ctx context.Context, q SessionQuery) (*helmrtype.SessionPage, error) {
	limit, err := pageLimit(q.Limit, 100)
	if err != nil {
		return nil, err
	}
	if q.Key != "" && q.Agent == "" {
		return nil, invalid("key lookup needs agent")
	}
	if q.Key != "" && (q.Cursor != "" || q.Limit != 0 || q.ParentSessionID != "" || q.RequesterSessionID != "" || len(q.Statuses) > 0) {
		return nil, invalid("an exact key lookup takes only agent and key, no other filter or pagination")
	}
	for _, s := range q.Statuses {
		if s != helmrtype.SessionOpen && s != helmrtype.SessionClosing && s != helmrtype.SessionClosed {
			return nil, invalid("status %q is not open, closing or closed", s)
		}
	}
	page := &helmrtype.SessionPage{Sessions: []helmrtype.Session{}}
	err = e.store.View(ctx, func(tx store.Tx) error {
		rows, err := tx.ListSessions(ctx, store.SessionFilter{Agent: q.Agent, Key: q.Key, Statuses: q.Statuses,
			ParentSessionID: q.ParentSessionID, RequesterSessionID: q.RequesterSessionID, AfterID: q.Cursor, Limit: limit + 1})
		if err != nil {
			return err
		}
		rows, page.NextCursor = trimPage(rows, limit, func(s *store.Session) string { return s.ID })
		for i := range rows {
			v, err := e.sessionViewTx(ctx, tx, &rows[i])
			if err != nil {
				return err
			}
			page.Sessions = append(page.Sessions, v)
		}
		return nil
	})
	return page, err
}

func (e *Engine) getTurnTx(ctx context.Context, tx store.Tx, sessionID, turnID string) (*store.Turn, error) {
	t, err := tx.GetTurn(ctx, sessionID, turnID)
	if errors.Is(err, store.ErrNotFound) {
		if _, err := e.getSessionTx(ctx, tx, sessionID); err != nil {
			return nil, err
		}
		return nil, notFound("turn", turnID)
	}
	return t, err
}

// GetTurn returns one Turn's state.
func (e *Engine) GetTurn(ctx context.Context, sessionID, turnID string) (*helmrtype.TurnState, error) {
	var out helmrtype.TurnState
	// One read (a second only to tell a missing Session): no snapshot.
	err := e.store.Read(ctx, func(tx store.Tx) error {
		t, err := e.getTurnTx(ctx, tx, sessionID, turnID)
		if err != nil {
			return err
		}
		out = turnState(t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ListTurns lists a Session's Turns in admission order; the cursor is the
// last sequence seen.
func (e *Engine) ListTurns(ctx context.Context, sessionID, cursor string, limit int) (*helmrtype.TurnPage, error) {
	limit, err := pageLimit(limit, 100)
	if err != nil {
		return nil, err
	}
	var after int64
	if cursor != "" {
		if after, err = strconv.ParseInt(cursor, 10, 64); err != nil || after < 0 {
			return nil, invalid("cursor is not valid")
		}
	}
	page := &helmrtype.TurnPage{Turns: []helmrtype.TurnState{}}
	err = e.store.View(ctx, func(tx store.Tx) error {
		if _, err := e.getSessionTx(ctx, tx, sessionID); err != nil {
			return err
		}
		rows, err := tx.ListTurns(ctx, sessionID, after, limit+1)
		if err != nil {
			return err
		}
		rows, page.NextCursor = trimPage(rows, limit, func(t *store.Turn) string { return strconv.FormatInt(t.Sequence, 10) })
		for i := range rows {
			page.Turns = append(page.Turns, turnState(&rows[i]))
		}
		return nil
	})
	return page, err
}

// WaitTurn waits up to timeout for a Turn to settle. It never cancels it.
// Settlement wakes the Turn's own watchers, so a wait costs one read per
// settlement, not one per event of the Session (none for a Turn this
// engine admitted or saw settle lately: see SettledTurn).
func (e *Engine) WaitTurn(ctx context.Context, sessionID, turnID string, timeout time.Duration) (*helmrtype.TimedTurnWaitResult, error) {
	t, err := e.SettledTurn(ctx, sessionID, turnID, timeout)
	if err != nil {
		return nil, err
	}
	if t == nil {
		return &helmrtype.TimedTurnWaitResult{Status: helmrtype.WaitTimeout}, nil
	}
	o := t.Outcome()
	return &helmrtype.TimedTurnWaitResult{Status: helmrtype.WaitSettled, Outcome: &o}, nil
}

// SettledTurn waits up to timeout for a Turn to settle and returns it
// settled, or nil when the timeout came first. A Turn this engine
// admitted or saw settle lately is answered from memory, with no read of
// the store, and then without its Input (the caller has it); any other is
// read once, then waited for. The state is shared: do not change it.
func (e *Engine) SettledTurn(ctx context.Context, sessionID, turnID string, timeout time.Duration) (*helmrtype.TurnState, error) {
	key := turnKey(sessionID, turnID)
	sg := e.turns.watch(key)
	defer func() { e.turns.unwatch(key, sg) }()
	t, known := e.memory.get(key)
	if !known {
		var err error
		if t, err = e.GetTurn(ctx, sessionID, turnID); err != nil {
			return nil, err
		}
	}
	if t != nil && helmrtype.TurnTerminal(t.Status) {
		return t, nil
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-sg.ch:
		return sg.val, nil
	case <-timer.C:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ListEvents returns one page of a Session's timeline after a sequence.
func (e *Engine) ListEvents(ctx context.Context, sessionID string, after int64, limit int) (*helmrtype.SessionEventPage, error) {
	if limit == 0 {
		limit = 100
	}
	if limit < 1 || limit > 1000 {
		return nil, invalid("limit must be between 1 and 1000")
	}
	if after < 0 {
		return nil, invalid("after must be a non-negative integer")
	}
	page := &helmrtype.SessionEventPage{Records: []helmrtype.SessionEvent{}, NextAfter: after}
	err := e.store.View(ctx, func(tx store.Tx) error {
		if _, err := e.getSessionTx(ctx, tx, sessionID); err != nil {
			return err
		}
		rows, err := tx.ListEvents(ctx, sessionID, after, limit+1)
		if err != nil {
			return err
		}
		if len(rows) > limit {
			rows = rows[:limit]
			page.HasMore = true
		}
		for _, r := range rows {
			page.Records = append(page.Records, helmrtype.SessionEvent{SessionID: r.SessionID, TurnID: optional(r.TurnID),
				Sequence: r.Sequence, CreatedAt: r.CreatedAt, Kind: r.Kind, Data: r.Data})
			page.NextAfter = r.Sequence
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}
