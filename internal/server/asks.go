package server

import (
	"net/http"

	"github.com/helmr-go/helmr/helmrtype"
)

func (s *Server) listAsks(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	page, err := s.eng.ListAsks(r.Context(), r.PathValue("id"), r.PathValue("turn_id"), r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) getAsk(w http.ResponseWriter, r *http.Request) error {
	a, err := s.eng.GetAsk(r.Context(), r.PathValue("id"), r.PathValue("turn_id"), r.PathValue("ask_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) respondAsk(w http.ResponseWriter, r *http.Request) error {
	var req helmrtype.AskRespond
	if err := decode(w, r, &req); err != nil {
		return err
	}
	by := helmrtype.Responder{Kind: helmrtype.SourceAPIKey}
	if k := callerKey(r); k != nil {
		by.ID = k.ID
	}
	a, err := s.eng.RespondAsk(r.Context(), r.PathValue("id"), r.PathValue("turn_id"), r.PathValue("ask_id"), req, by)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

// listAllAsks is the inbox: the questions of every Session, newest first.
func (s *Server) listAllAsks(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	q := r.URL.Query()
	page, err := s.eng.ListAllAsks(r.Context(), q.Get("status"), q.Get("cursor"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) getAskByID(w http.ResponseWriter, r *http.Request) error {
	a, err := s.eng.GetAskByID(r.Context(), r.PathValue("ask_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}
