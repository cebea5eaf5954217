package server

import (
	"net/http"

	"github.com/helmr-go/helmr/helmrtype"
)

// createKey makes an API key and answers its secret, this once.
func (s *Server) createKey(w http.ResponseWriter, r *http.Request) error {
	var req helmrtype.APIKeyCreateRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	k, err := s.eng.CreateKey(r.Context(), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, k)
	return nil
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	page, err := s.eng.ListKeys(r.Context(), r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// revokeKey revokes an API key; the key it names may be the caller's own,
// unless it is the last admin key.
func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) error {
	k, err := s.eng.RevokeKey(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, k)
	return nil
}
