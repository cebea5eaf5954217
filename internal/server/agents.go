package server

import (
	"net/http"
)

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	q := r.URL.Query()
	page, err := s.eng.ListAgents(r.Context(), q.Get("deployment_id"), q.Get("cursor"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) error {
	a, err := s.eng.GetAgent(r.Context(), r.PathValue("id"), r.URL.Query().Get("deployment_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}
