package server

import (
	"net/http"

	"github.com/helmr-go/helmr/helmrtype"
)

// Slack apps and user mappings (docs/slack.md).

func (s *Server) connectSlackApp(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Slack == nil {
		return helmrtype.Errorf(helmrtype.CodeUnavailable, "this control plane runs no Slack bridge")
	}
	var req helmrtype.SlackAppConnect
	if err := decode(w, r, &req); err != nil {
		return err
	}
	app, err := s.opts.Slack.Connect(r.Context(), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, app)
	return nil
}

func (s *Server) listSlackApps(w http.ResponseWriter, r *http.Request) error {
	out, err := s.eng.ListSlackApps(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) disconnectSlackApp(w http.ResponseWriter, r *http.Request) error {
	out, err := s.eng.DisconnectSlackApp(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) putSlackUser(w http.ResponseWriter, r *http.Request) error {
	var req helmrtype.SlackUserMapping
	if err := decode(w, r, &req); err != nil {
		return err
	}
	out, err := s.eng.PutSlackUser(r.Context(), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) listSlackUsers(w http.ResponseWriter, r *http.Request) error {
	out, err := s.eng.ListSlackUsers(r.Context(), r.URL.Query().Get("team_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) deleteSlackUser(w http.ResponseWriter, r *http.Request) error {
	out, err := s.eng.DeleteSlackUser(r.Context(), r.PathValue("team_id"), r.PathValue("user_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
