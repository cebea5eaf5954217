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

// listTokens is the inbox's other half: the Tokens of every Session,
// newest first.
func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	q := r.URL.Query()
	page, err := s.eng.ListTokens(r.Context(), q.Get("status"), q.Get("cursor"), limit)
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
