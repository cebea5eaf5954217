package slackfake

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// socket is one open Socket Mode connection.
type socket struct {
	conn   *websocket.Conn
	ctx    context.Context // ends when the connection does
	cancel context.CancelFunc
}

// serveSocket is the Socket Mode WebSocket endpoint behind the URL that
// apps.connections.open hands out: one use per ticket, a hello first,
// envelopes out, acks (by envelope_id) in, and a WebSocket ping every
// ping interval.
func (f *Fake) serveSocket(w http.ResponseWriter, r *http.Request) {
	ticket := r.URL.Query().Get("ticket")
	f.mu.Lock()
	valid := f.tickets[ticket]
	delete(f.tickets, ticket)
	ping := f.pingInterval
	f.mu.Unlock()
	if !valid {
		http.Error(w, "invalid or used ticket", http.StatusUnauthorized)
		return
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: []string{"api.slack.com"}})
	if err != nil {
		return
	}
	c.SetReadLimit(1 << 20)
	ctx, cancel := context.WithCancel(f.ctx)
	s := &socket{conn: c, ctx: ctx, cancel: cancel}
	f.mu.Lock()
	f.sockets = append(f.sockets, s)
	n := len(f.sockets)
	f.notifyLocked()
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.sockets = slices.DeleteFunc(f.sockets, func(o *socket) bool { return o == s })
		f.notifyLocked()
		f.mu.Unlock()
		cancel()
		_ = c.CloseNow()
	}()

	hello, _ := json.Marshal(map[string]any{"type": "hello", "num_connections": n,
		"debug_info":      map[string]any{"host": "applink-fake", "build_number": 1, "approximate_connection_time": 18060},
		"connection_info": map[string]any{"app_id": appID}})
	if err := s.write(hello); err != nil {
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	if ping > 0 {
		wg.Go(func() { s.pingEvery(ping) })
	}
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		var ack struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if json.Unmarshal(data, &ack) == nil && ack.EnvelopeID != "" {
			f.acked(ack.EnvelopeID)
		}
	}
}

// write sends one text frame.
func (s *socket) write(b []byte) error {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	return s.conn.Write(ctx, websocket.MessageText, b)
}

// pingEvery pings until the connection ends; slack-go's client reconnects
// when it sees no ping for its ping interval (30 s by default).
func (s *socket) pingEvery(d time.Duration) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
			err := s.conn.Ping(ctx)
			cancel()
			if err != nil && s.ctx.Err() == nil {
				s.cancel() // no pong: the connection is dead
				return
			}
		}
	}
}

// Disconnect sends Slack's disconnect message (reason e.g.
// "refresh_requested" or "warning") on every open Socket Mode connection;
// slack-go's client then opens a new connection.
func (f *Fake) Disconnect(reason string) {
	msg, _ := json.Marshal(map[string]any{"type": "disconnect", "reason": reason,
		"debug_info": map[string]any{"host": "applink-fake"}})
	f.mu.Lock()
	ss := slices.Clone(f.sockets)
	f.mu.Unlock()
	for _, s := range ss {
		_ = s.write(msg)
	}
}

// CloseSockets drops every open Socket Mode connection without a close
// handshake, as a network failure would.
func (f *Fake) CloseSockets() {
	f.mu.Lock()
	ss := slices.Clone(f.sockets)
	f.mu.Unlock()
	for _, s := range ss {
		_ = s.conn.CloseNow()
		s.cancel()
	}
}

// pickSocketLocked chooses the connection for the next envelope, round
// robin as Slack spreads deliveries over an app's connections; f.mu must
// be held.
func (f *Fake) pickSocketLocked() *socket {
	for range f.sockets {
		f.nextSocket = (f.nextSocket + 1) % len(f.sockets)
		if s := f.sockets[f.nextSocket]; s.ctx.Err() == nil {
			return s
		}
	}
	return nil // none, or all of them closing
}
