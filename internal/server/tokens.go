package server

import (
	"io"
	"net/http"

	"github.com/helmr-go/helmr/helmrtype"
)

func (s *Server) getToken(w http.ResponseWriter, r *http.Request) error {
	t, err := s.eng.GetToken(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

func (s *Server) completeToken(w http.ResponseWriter, r *http.Request) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, helmrtype.MaxTokenCompleteBody))
	if err != nil {
		return helmrtype.Errorf(helmrtype.CodeLimitExceeded, "the request body is larger than %d bytes", helmrtype.MaxTokenCompleteBody)
	}
	req, err := helmrtype.ParseTokenComplete(body)
	if err != nil {
		return err
	}
	c, err := s.eng.CompleteToken(r.Context(), r.PathValue("id"), req.Data)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) cancelToken(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		IdempotencyKey string `json:"idempotency_key,omitempty"`
	}
	if err := decodeOptional(w, r, &req); err != nil {
		return err
	}
	t, err := s.eng.CancelToken(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
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
