package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
)

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) error {
	var req helmrtype.SessionCreateRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	d, err := s.enqueueWait(r)
	if err != nil {
		return err
	}
	rec, replayed, err := s.eng.CreateSession(r.Context(), req, engine.APICaller)
	if err != nil {
		return err
	}
	if rec.Turn != nil && d > 0 {
		rec.Turn = s.settledOr(r, rec.Turn, d)
	}
	writeJSON(w, createdStatus(replayed), rec)
	return nil
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	var statuses []string
	for _, v := range q["status"] {
		for _, s := range strings.Split(v, ",") {
			if s != "" {
				statuses = append(statuses, s)
			}
		}
	}
	page, err := s.eng.ListSessions(r.Context(), engine.SessionQuery{Agent: q.Get("agent"), Key: q.Get("key"), Statuses: statuses,
		ParentSessionID: q.Get("parent_session_id"), RequesterSessionID: q.Get("requester_session_id"), Cursor: q.Get("cursor"), Limit: limit})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	v, err := s.eng.GetSession(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) interruptSession(w http.ResponseWriter, r *http.Request) error {
	var req helmrtype.ControlRequest
	if err := decodeOptional(w, r, &req); err != nil {
		return err
	}
	rec, err := s.eng.InterruptSession(r.Context(), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, rec)
	return nil
}

func (s *Server) resumeSession(w http.ResponseWriter, r *http.Request) error {
	var req helmrtype.ResumeRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	rec, err := s.eng.ResumeSession(r.Context(), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, rec)
	return nil
}

func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) error {
	return s.sessionStatusControl(w, r, s.eng.CloseSession)
}

func (s *Server) cancelSession(w http.ResponseWriter, r *http.Request) error {
	return s.sessionStatusControl(w, r, s.eng.CancelSession)
}

// sessionStatusControl serves close and cancel: an optional body with an
// idempotency key, answered with the Session's status.
func (s *Server) sessionStatusControl(w http.ResponseWriter, r *http.Request,
	do func(context.Context, string, helmrtype.ControlRequest) (*helmrtype.SessionStatusReceipt, error)) error {
	var req helmrtype.ControlRequest
	if err := decodeOptional(w, r, &req); err != nil {
		return err
	}
	rec, err := do(r.Context(), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, rec)
	return nil
}
