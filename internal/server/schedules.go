package server

import (
	"net/http"
)

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	page, err := s.eng.ListSchedules(r.Context(), r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request) error {
	sc, err := s.eng.GetSchedule(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sc)
	return nil
}
