package engine

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/obs"
	"github.com/helmr-go/helmr/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Observing: every store transaction is timed, and the Turn transitions a
// transaction records are logged and counted once it committed (a
// transaction that failed or is retried reports nothing of its attempt).

// transition is one Turn reaching a status in a transaction.
type transition struct {
	sessionID, turnID, status, errorCode string
	traceParent                          string
	created                              time.Time
	started, ended                       *time.Time
	// state is the settled Turn, for its waiters (terminal statuses only).
	state *helmrtype.TurnState
}

// obsTx carries a transaction's transitions until it commits.
type obsTx struct {
	store.Tx
	turns []transition
}

// obsStore times the transactions of the store it wraps and reports the
// Turn transitions of those that commit.
type obsStore struct {
	store.Store
	e                  *Engine
	update, view, read prometheus.Observer
}

func newObsStore(s store.Store, e *Engine) obsStore {
	h := e.metrics.StoreTx
	return obsStore{Store: s, e: e, update: h.WithLabelValues("update"), view: h.WithLabelValues("view"), read: h.WithLabelValues("read")}
}

func (s obsStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	start := time.Now()
	gen := s.e.memory.generation()
	var ot *obsTx
	err := s.Store.Update(ctx, func(tx store.Tx) error {
		ot = &obsTx{Tx: tx}
		return fn(ot)
	})
	s.update.Observe(time.Since(start).Seconds())
	if err == nil && ot != nil && len(ot.turns) > 0 {
		s.e.rememberTurns(ot.turns, gen)
		s.e.reportTurns(ctx, ot.turns)
	}
	return err
}

func (s obsStore) View(ctx context.Context, fn func(store.Tx) error) error {
	start := time.Now()
	err := s.Store.View(ctx, fn)
	s.view.Observe(time.Since(start).Seconds())
	return err
}

func (s obsStore) Read(ctx context.Context, fn func(store.Tx) error) error {
	start := time.Now()
	err := s.Store.Read(ctx, fn)
	s.read.Observe(time.Since(start).Seconds())
	return err
}

// noteTurn records in tx that t reached its current status; it is
// reported when tx commits.
func noteTurn(tx store.Tx, t *store.Turn) {
	ot, ok := tx.(*obsTx)
	if !ok {
		return
	}
	tr := transition{sessionID: t.SessionID, turnID: t.ID, status: t.Status, errorCode: t.ErrorCode,
		traceParent: t.TraceParent, created: t.CreatedAt, started: t.StartedAt, ended: t.TerminalAt}
	if helmrtype.TurnTerminal(t.Status) {
		ts := turnState(t)
		ts.Input = nil // waiters want the outcome; memory keeps it small
		tr.state = &ts
	}
	ot.turns = append(ot.turns, tr)
}

// rememberTurns keeps the admissions and settlements of a committed
// transaction, begun at memory generation gen, in the Turn memory and
// hands each settled Turn to its waiters: the one place a settlement
// wakes them in this process.
func (e *Engine) rememberTurns(ts []transition, gen uint64) {
	for _, t := range ts {
		key := turnKey(t.sessionID, t.turnID)
		switch {
		case t.status == helmrtype.TurnQueued:
			e.memory.admitted(key, gen)
		case t.state != nil:
			e.memory.settled(key, t.state)
			e.turns.wake(key, t.state)
		}
	}
}

// agentCache maps Session ID → Agent ID (immutable), for metric labels.
type agentCache struct{ m sync.Map }

// agentOf returns the Agent of a Session, "" when it cannot be read.
func (e *Engine) agentOf(ctx context.Context, sessionID string) string {
	if a, ok := e.agents.m.Load(sessionID); ok {
		return a.(string)
	}
	var agent string
	e.store.Read(ctx, func(tx store.Tx) error {
		s, err := tx.GetSession(ctx, sessionID)
		if err == nil {
			agent = s.Agent
		}
		return err
	})
	if agent != "" {
		e.agents.m.Store(sessionID, agent)
	}
	return agent
}

// reportTurns logs and counts committed Turn transitions.
func (e *Engine) reportTurns(ctx context.Context, ts []transition) {
	logging := e.tlog.Enabled(ctx, slog.LevelInfo)
	for _, t := range ts {
		agent := e.agentOf(context.WithoutCancel(ctx), t.sessionID)
		var wait, run time.Duration
		switch {
		case t.status == helmrtype.TurnQueued:
			e.metrics.TurnsAdmitted.WithLabelValues(agent).Inc()
		case t.status == helmrtype.TurnRunning:
			if t.started != nil {
				wait = t.started.Sub(t.created)
				e.metrics.TurnQueueWait.WithLabelValues(agent).Observe(wait.Seconds())
			}
		case helmrtype.TurnTerminal(t.status):
			e.metrics.TurnsSettled.WithLabelValues(agent, t.status, t.errorCode).Inc()
			if t.ended != nil {
				e.metrics.TurnLatency.WithLabelValues(agent, t.status).Observe(t.ended.Sub(t.created).Seconds())
				if t.started != nil {
					run = t.ended.Sub(*t.started)
					e.metrics.TurnRunTime.WithLabelValues(agent, t.status).Observe(run.Seconds())
				}
				if t.traceParent != "" {
					e.tracer.EndTurn(obs.TurnEnd{TraceParent: t.traceParent, SessionID: t.sessionID, TurnID: t.turnID, Agent: agent,
						Status: t.status, ErrorCode: t.errorCode, Created: t.created, Ended: *t.ended})
				}
			}
		}
		if !logging {
			continue
		}
		attrs := []slog.Attr{slog.String(obs.KeySessionID, t.sessionID), slog.String(obs.KeyTurnID, t.turnID),
			slog.String("agent", agent), slog.String("status", t.status)}
		if wait > 0 {
			attrs = append(attrs, slog.Duration("queued", wait))
		}
		if run > 0 {
			attrs = append(attrs, slog.Duration("ran", run))
		}
		if t.errorCode != "" {
			attrs = append(attrs, slog.String("error_code", t.errorCode))
		}
		e.tlog.LogAttrs(ctx, slog.LevelInfo, "turn "+t.status, attrs...)
	}
}

// Counts reads the counts that the metrics report at a scrape.
func (e *Engine) Counts(ctx context.Context) (store.Counts, error) {
	var c store.Counts
	err := e.store.Read(ctx, func(tx store.Tx) error {
		var err error
		c, err = tx.Counts(ctx)
		return err
	})
	return c, err
}

// Metrics returns the engine's metrics.
func (e *Engine) Metrics() *obs.Metrics { return e.metrics }
