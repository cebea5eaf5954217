package server

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
)

// enqueueWait parses the wait query of an admission (POST /v1/sessions,
// POST …/turns): how long to wait for the admitted Turn to settle before
// answering, as the timeout of GET …/wait; absent or zero answers at
// once.
func (s *Server) enqueueWait(r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return 0, nil
	}
	d, err := parseWait(v)
	if err != nil {
		return 0, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "wait: %v", err)
	}
	return min(d, maxWait), nil
}

// settledOr waits up to d for the admitted Turn t to settle and returns
// it settled, or t (the receipt) when d runs out first, the server stops,
// or the wait fails: the admission stands either way, and the client
// waits with GET …/wait.
func (s *Server) settledOr(r *http.Request, t *helmrtype.TurnState, d time.Duration) *helmrtype.TurnState {
	ctx, cancel := s.untilStopping(r.Context())
	defer cancel()
	settled, err := s.eng.SettledTurn(ctx, t.SessionID, t.ID, d)
	if err != nil || settled == nil {
		return t
	}
	out := *settled
	out.Input = t.Input
	return &out
}

func (s *Server) enqueue(w http.ResponseWriter, r *http.Request) error {
	var req helmrtype.EnqueueRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	d, err := s.enqueueWait(r)
	if err != nil {
		return err
	}
	t, replayed, err := s.eng.Enqueue(r.Context(), r.PathValue("id"), req, engine.APICaller)
	if err != nil {
		return err
	}
	if d > 0 {
		t = s.settledOr(r, t, d)
	}
	writeJSON(w, createdStatus(replayed), t)
	return nil
}

func (s *Server) listTurns(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	page, err := s.eng.ListTurns(r.Context(), r.PathValue("id"), r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) getTurn(w http.ResponseWriter, r *http.Request) error {
	t, err := s.eng.GetTurn(r.Context(), r.PathValue("id"), r.PathValue("turn_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

// parseWait parses a wait timeout: a Duration string ("30s", "1m", "500ms")
// or a number of milliseconds.
func parseWait(v string) (time.Duration, error) {
	if v == "" {
		return maxWait, nil
	}
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms >= 0 {
		return min(time.Duration(ms), maxWait/time.Millisecond) * time.Millisecond, nil
	}
	if num := strings.TrimRight(v, "mshd"); num != "" && strings.Trim(num, "0") == "" {
		return 0, nil // "0s", "0ms", …
	}
	d, err := helmrtype.ParseDuration(v)
	if err != nil {
		return 0, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "timeout: %v", err)
	}
	return d, nil
}

func (s *Server) waitTurn(w http.ResponseWriter, r *http.Request) error {
	d, err := parseWait(r.URL.Query().Get("timeout"))
	if err != nil {
		return err
	}
	ctx, cancel := s.untilStopping(r.Context())
	defer cancel()
	res, err := s.eng.WaitTurn(ctx, r.PathValue("id"), r.PathValue("turn_id"), min(d, maxWait))
	if err != nil && r.Context().Err() == nil && ctx.Err() != nil {
		// Shutting down: answer as a timeout; the client waits again.
		res, err = &helmrtype.TimedTurnWaitResult{Status: helmrtype.WaitTimeout}, nil
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) sendMessage(w http.ResponseWriter, r *http.Request) error {
	var req helmrtype.MessageRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	rec, err := s.eng.SendMessage(r.Context(), r.PathValue("id"), r.PathValue("turn_id"), req, engine.APICaller)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, rec)
	return nil
}

func (s *Server) interruptTurn(w http.ResponseWriter, r *http.Request) error {
	var req helmrtype.ControlRequest
	if err := decodeOptional(w, r, &req); err != nil {
		return err
	}
	rec, err := s.eng.InterruptTurn(r.Context(), r.PathValue("id"), r.PathValue("turn_id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, rec)
	return nil
}
