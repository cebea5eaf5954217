package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/coder/websocket"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/obs"
	"github.com/helmr-go/helmr/internal/protocol"
	"github.com/helmr-go/helmr/internal/store"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// ServeHTTP is the protocol endpoint: a session process connects here with
// its token and speaks helmr.session.v1 over a WebSocket.
func (s *Supervisor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(token) <= len(prefix) || token[:len(prefix)] != prefix {
		http.Error(w, "missing process token", http.StatusUnauthorized)
		return
	}
	s.mu.Lock()
	p := s.tokens[engine.HashSecret(token[len(prefix):])]
	closing, adopted := s.closing, s.adopted
	s.mu.Unlock()
	if closing {
		http.Error(w, "the control plane is shutting down", http.StatusServiceUnavailable)
		return
	}
	if !adopted {
		// A process that outlived the previous control plane reconnects
		// before Recover has taken it back: it tries again.
		http.Error(w, "the control plane is starting", http.StatusServiceUnavailable)
		return
	}
	if p == nil {
		http.Error(w, "unknown process token", http.StatusUnauthorized)
		return
	}
	p.mu.Lock()
	proc := p.process
	parking := p.life.residency == resParking && p.conn == nil
	p.mu.Unlock()
	if parking {
		// Its checkpoint is being taken: it tries again after it.
		http.Error(w, "the session process is being parked", http.StatusServiceUnavailable)
		return
	}
	if pid := pidOf(proc); pid != 0 {
		if peer := peerPID(r.Context()); peer != 0 && !descends(peer, pid) {
			s.log.Warn("a process used another process's token", "session", p.sessionID, "peer_pid", peer)
			http.Error(w, "this token belongs to another process", http.StatusForbidden)
			return
		}
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{protocol.Version}})
	if err != nil {
		return
	}
	s.conns.Add(1)
	defer s.conns.Done()
	conn.SetReadLimit(32 << 20)
	p.mu.Lock()
	if p.conn != nil || (p.life.phase != phaseStarting && p.life.phase != phaseReattaching) {
		p.mu.Unlock()
		conn.Close(websocket.StatusPolicyViolation, "process already connected")
		return
	}
	p.conn = conn
	p.served = make(chan struct{})
	defer close(p.served)
	if p.helloTimer != nil {
		p.helloTimer.Stop()
		p.helloTimer = nil
	}
	p.mu.Unlock()
	s.serve(p, conn)
}

func (s *Supervisor) send(p *proc, m *protocol.Msg) error {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	return s.write(p, m)
}

// write sends m; the caller holds p.writeMu (and not p.mu).
func (s *Supervisor) write(p *proc, m *protocol.Msg) error {
	p.mu.Lock()
	conn, welcomed := p.conn, p.welcomed
	if m.Type == protocol.TypeWelcome {
		p.welcomed = true
	}
	p.mu.Unlock()
	if conn == nil {
		return errors.New("process not connected")
	}
	if !welcomed && m.Type != protocol.TypeWelcome {
		// The handshake comes first. What is dropped here is sent again
		// after it (pending messages, wait outcomes on wait.resume).
		return errors.New("process not welcomed yet")
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	return conn.Write(ctx, websocket.MessageText, b)
}

func (s *Supervisor) serve(p *proc, conn *websocket.Conn) {
	// Runtime MCP calls in flight end with the connection.
	ctx, endConn := context.WithCancel(s.ctx)
	defer endConn()
	defer conn.CloseNow()
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			p.mu.Lock()
			if p.conn == conn && p.life.residency == resParking {
				// Closed as told to park: it is checkpointed, and its
				// next connection is a reattachment.
				p.conn, p.welcomed = nil, false
				acts := s.applyLocked(p, event{kind: evDisconnected})
				p.mu.Unlock()
				s.carry(p, acts)
				return
			}
			p.mu.Unlock()
			// The connection is the process's lifeline: without it the
			// process cannot work, so it is ended and noticed as an exit.
			p.mu.Lock()
			dead := p.life.phase == phaseDead
			p.mu.Unlock()
			s.mu.Lock()
			detaching := s.detaching
			s.mu.Unlock()
			if !dead && !detaching {
				// A process that is exiting by itself (its sandbox still
				// reaping it) gets a moment, so that its own exit status
				// is what is reported.
				p.mu.Lock()
				proc := p.process
				p.mu.Unlock()
				if proc != nil {
					select {
					case <-proc.Done():
					case <-time.After(500 * time.Millisecond):
					}
				}
				p.kill()
			}
			return
		}
		var m protocol.Msg
		if err := json.Unmarshal(b, &m); err != nil {
			s.log.Warn("bad protocol message", "session", p.sessionID, "err", err)
			continue
		}
		s.handle(ctx, p, &m)
		// After the message took effect: the idle clock restarts, and an
		// Actor that just settled its Turn starts waiting in Receive.
		s.activity(p)
	}
}

func (s *Supervisor) ack(p *proc, m *protocol.Msg, seq int64, err error) {
	s.answer(p, &protocol.Msg{Type: protocol.TypeAck, Op: m.Op, TurnID: m.TurnID, Sequence: seq}, err)
}

// answer sends the acknowledgement a of an operation that ended with err
// (its error instead of its result); none when the operation was cut short
// (see unfinished).
func (s *Supervisor) answer(p *proc, a *protocol.Msg, err error) {
	if unfinished(err) {
		return
	}
	if err != nil {
		a.Error, a.TokenState = toError(err), nil
	}
	if serr := s.send(p, a); serr != nil {
		s.log.Debug("ack", "session", p.sessionID, "err", serr)
	}
}

// unfinished reports whether an operation failed only because this control
// plane is stopping or the connection ended (its context was cancelled):
// it gets no acknowledgement, so the process sends it again after it
// reconnects, and it takes effect once. An error acknowledgement would
// be final.
func unfinished(err error) bool {
	var he *helmrtype.Error
	return err != nil && !errors.As(err, &he) && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

func toError(err error) *helmrtype.Error {
	var he *helmrtype.Error
	if errors.As(err, &he) {
		return he
	}
	return &helmrtype.Error{Code: helmrtype.CodeInternal, Message: err.Error()}
}

func (s *Supervisor) handle(ctx context.Context, p *proc, m *protocol.Msg) {
	switch m.Type {
	case protocol.TypeHello:
		if m.Protocol != protocol.Version {
			s.log.Error("session process speaks another protocol", "session", p.sessionID, "protocol", m.Protocol)
			p.kill()
			return
		}
		p.mu.Lock()
		l := p.launch
		reattaching := p.life.phase == phaseReattaching
		// Parked when it waits, if it can be: it says it understands
		// park, and its sandbox is one a checkpoint can take.
		p.life.canPark = p.restorable && s.parker() != nil && slices.Contains(m.Features, protocol.FeaturePark)
		p.mu.Unlock()
		if reattaching {
			s.reattach(ctx, p, m.Resume)
			return
		}
		if p.recorded != nil {
			select {
			case <-p.recorded:
			case <-ctx.Done():
				return
			}
		}
		w := &protocol.Welcome{Agent: l.Session.Agent, SessionID: l.Session.ID, SessionKey: l.Session.Key,
			ParentID: l.Session.ParentSessionID, ComputerID: l.Session.ComputerID, DeploymentID: l.Session.DeploymentID,
			Recovery: protocol.Recovery{Kind: l.Recovery, Reason: l.RecoveryReason}, ServerTime: s.clock.Now().UTC()}
		s.send(p, &protocol.Msg{Type: protocol.TypeWelcome, Welcome: w})
	case protocol.TypeReady:
		s.step(p, event{kind: evReady})
		if s.isClosing() {
			s.send(p, &protocol.Msg{Type: protocol.TypeShutdown})
			return
		}
		s.dispatch(p)
	case protocol.TypeStopping:
		p.mu.Lock()
		p.expected = true
		var acts []action
		if p.life.phase == phaseReady {
			acts = s.applyLocked(p, event{kind: evStop})
		}
		p.mu.Unlock()
		s.carry(p, acts)
	case protocol.TypeInitFailed:
		p.mu.Lock()
		stopping := p.life.phase == phaseStopping || p.expected
		p.mu.Unlock()
		if stopping || s.isClosing() {
			return // init ended by a shutdown: the queued Turns stay queued
		}
		msg := "init failed"
		if m.Error != nil {
			msg = "init failed: " + m.Error.Message
		}
		p.mu.Lock()
		p.initError = msg
		p.mu.Unlock()
		s.failNextInit(p, msg)
	case protocol.TypeOutput:
		seq, err := retrying(ctx, s, p, func() (int64, error) {
			seq, _, err := s.eng.AppendOutput(ctx, p.sessionID, m.TurnID, m.Op, m.Content)
			return seq, err
		})
		s.ack(p, m, seq, err)
	case protocol.TypeMessageAccept:
		err := retryingErr(ctx, s, p, func() error { return s.eng.MessageDelivered(ctx, p.sessionID, m.MessageID) })
		s.ack(p, m, 0, err)
	case protocol.TypeMessageReject:
		msg := ""
		if m.Error != nil {
			msg = m.Error.Message
		}
		err := retryingErr(ctx, s, p, func() error { return s.eng.MessageRejected(ctx, p.sessionID, m.MessageID, m.Reason, msg) })
		s.ack(p, m, 0, err)
	case protocol.TypeSettle:
		// Settle and start the next queued Turn in one transaction when
		// this process is ready to run it. A Turn whose cleanup failed
		// retires its process: the SDK exits after settling.
		retire := m.Error != nil && m.Error.Code == helmrtype.CodeCleanupFailed
		p.mu.Lock()
		mine := p.running == m.TurnID && p.life.phase == phaseReady && !retire
		var traceParent string
		// The process settles on its own deadline (the SDK's context
		// has it) before this node's timer fired: the deadline is
		// recorded all the same, before the settlement (RecordDeadline
		// checks that it has come by this node's clock).
		deadlineFirst := false
		var acts []action
		if p.running == m.TurnID {
			deadlineFirst = m.Error != nil && m.Error.Code == helmrtype.CodeDeadlineExceeded && p.deadline != nil && p.deadline.Stop()
			traceParent = p.trace
			p.trace = ""
			p.stopTimers()
			p.cancelled = false
			p.running = ""
			if mine {
				p.running = "-"
			}
			acts = s.applyLocked(p, event{kind: evTurnEnded})
		}
		if retire && p.life.phase == phaseReady {
			p.retired = "a turn's cleanup failed; the session process was retired (" + m.Error.Message + ")"
			acts = append(acts, s.applyLocked(p, event{kind: evStop})...)
			p.retireTimer = s.clock.AfterFunc(retireGrace, p.kill)
		}
		p.mu.Unlock()
		s.carry(p, acts)
		if deadlineFirst {
			if err := s.eng.RecordDeadline(ctx, p.sessionID, m.TurnID); err != nil {
				s.log.Warn("record a turn's deadline", "session", p.sessionID, "turn", m.TurnID, "err", err)
			}
		}
		var span trace.Span
		if traceParent != "" {
			_, span, _ = s.eng.Tracer().StartTurnChild(ctx, traceParent, m.TurnID, obs.SpanSettle,
				attribute.String(obs.AttrSessionID, p.sessionID), attribute.String(obs.AttrTurnID, m.TurnID), attribute.String(obs.AttrStatus, m.Status))
		}
		var msgs []store.Message
		next, err := retrying(ctx, s, p, func() (*store.Turn, error) {
			next, ms, err := s.eng.SettleTurn(ctx, p.sessionID, m.TurnID, m.Op, engine.Settlement{Status: m.Status,
				Result: m.Result, Response: m.Response, Error: turnError(m.Error)}, mine)
			msgs = ms
			return next, err
		})
		obs.EndSpan(span, "", "", err)
		s.ack(p, m, 0, err)
		if err != nil {
			if mine {
				p.mu.Lock()
				p.running = ""
				p.mu.Unlock()
			}
			// The Turn is still running in the store while the process
			// believes it settled: end the process, whose exit settles it.
			s.log.Error("settle turn", "session", p.sessionID, "turn", m.TurnID, "err", err)
			p.kill()
			return
		}
		if mine {
			s.started(p, next, msgs, nil)
		} else if !retire {
			s.dispatch(p)
		}
	case protocol.TypeMCPScope, protocol.TypeMCPCall:
		s.startMCP(ctx, p, m)
	case protocol.TypeSpans:
		s.importSpans(p, m)
	case protocol.TypeAsk, protocol.TypeTokenCreate, protocol.TypeWaitStart, protocol.TypeWaitResume, protocol.TypeWaitCancel:
		s.handleWait(ctx, p, m)
	default:
		s.log.Warn("unknown protocol message", "session", p.sessionID, "type", m.Type)
	}
}

func turnError(e *helmrtype.Error) *helmrtype.TurnError {
	if e == nil {
		return nil
	}
	return &helmrtype.TurnError{Code: e.Code, Message: e.Message}
}

// failNextInit fails the Turn that would have run when init failed; the
// process then exits and the next Turn starts a new one.
func (s *Supervisor) failNextInit(p *proc, msg string) {
	ctx := context.Background()
	t, _, err := s.eng.StartNextTurn(ctx, p.sessionID)
	if err != nil || t == nil {
		return
	}
	s.eng.SettleTurn(ctx, p.sessionID, t.ID, 0, engine.Settlement{Status: helmrtype.TurnFailed,
		Error: &helmrtype.TurnError{Code: helmrtype.CodeHandlerFailed, Message: msg}}, false)
}

// handleWait serves the wait operations of a process: questions, Tokens,
// and the start and resumption of waits.
func (s *Supervisor) handleWait(ctx context.Context, p *proc, m *protocol.Msg) {
	switch m.Type {
	case protocol.TypeAsk:
		if m.Ask == nil {
			s.ack(p, m, 0, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "ask needs a question"))
			return
		}
		s.ack(p, m, 0, retryingErr(ctx, s, p, func() error { return s.eng.Ask(ctx, p.sessionID, m.TurnID, m.Op, m.Ask.ID, &m.Ask.Question) }))
	case protocol.TypeTokenCreate:
		if m.Token == nil {
			s.ack(p, m, 0, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "token.create needs a token"))
			return
		}
		st, err := retrying(ctx, s, p, func() (*helmrtype.TokenState, error) {
			return s.eng.CreateToken(ctx, p.sessionID, m.TurnID, m.Op, m.Token.ID, m.Token.Secret, m.Token.Create)
		})
		s.answer(p, &protocol.Msg{Type: protocol.TypeAck, Op: m.Op, TurnID: m.TurnID, TokenState: st}, err)
	case protocol.TypeWaitStart:
		if m.Wait == nil {
			s.ack(p, m, 0, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "wait.start needs a wait"))
			return
		}
		w := m.Wait
		o, err := retrying(ctx, s, p, func() (*helmrtype.WaitOutcome, error) { return s.eng.StartWait(ctx, p.sessionID, m.TurnID, m.Op, *w) })
		s.ack(p, m, 0, err)
		if err == nil && o != nil {
			s.sendResolved(p, m.TurnID, w.ID, o)
		}
	case protocol.TypeWaitCancel:
		s.ack(p, m, 0, retryingErr(ctx, s, p, func() error { return s.eng.CancelWait(ctx, p.sessionID, m.TurnID, m.Op, m.WaitID) }))
	case protocol.TypeWaitResume:
		o, err := s.eng.ResumeWait(ctx, p.sessionID, m.WaitID)
		if err == nil && o != nil {
			s.sendResolved(p, m.TurnID, m.WaitID, o)
		}
	}
}

func (s *Supervisor) sendResolved(p *proc, turnID, waitID string, o *helmrtype.WaitOutcome) {
	s.send(p, &protocol.Msg{Type: protocol.TypeWaitResolved, TurnID: turnID, WaitID: waitID,
		Outcome: o})
}
