package helmrclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/helmr-go/helmr/helmrtype"
)

// Slack connects Slack apps and maps Slack users to responder identities
// (docs/slack.md). Connecting, disconnecting and mapping need an admin key.
type Slack struct {
	c *Client
}

// Connect stores a Slack app's credentials after the server checked them
// with Slack; the answer never carries them.
func (s *Slack) Connect(ctx context.Context, req helmrtype.SlackAppConnect) (*helmrtype.SlackApp, error) {
	var out helmrtype.SlackApp
	if err := s.c.do(ctx, http.MethodPost, "/v1/slack/apps", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Apps lists the connected Slack apps.
func (s *Slack) Apps(ctx context.Context) (*helmrtype.SlackAppList, error) {
	var out helmrtype.SlackAppList
	if err := s.c.do(ctx, http.MethodGet, "/v1/slack/apps", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Disconnect removes a connected app and its credentials.
func (s *Slack) Disconnect(ctx context.Context, id string) (*helmrtype.SlackApp, error) {
	var out helmrtype.SlackApp
	if err := s.c.do(ctx, http.MethodDelete, "/v1/slack/apps/"+pathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// MapUser maps a Slack user to a responder identity with a role; a
// responder or above may answer questions from Slack.
func (s *Slack) MapUser(ctx context.Context, m helmrtype.SlackUserMapping) (*helmrtype.SlackUserMapping, error) {
	var out helmrtype.SlackUserMapping
	if err := s.c.do(ctx, http.MethodPost, "/v1/slack/users", nil, m, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Users lists the Slack user mappings of a workspace ("" for all).
func (s *Slack) Users(ctx context.Context, teamID string) (*helmrtype.SlackUserList, error) {
	q := url.Values{}
	if teamID != "" {
		q.Set("team_id", teamID)
	}
	var out helmrtype.SlackUserList
	if err := s.c.do(ctx, http.MethodGet, "/v1/slack/users", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UnmapUser removes a Slack user's mapping.
func (s *Slack) UnmapUser(ctx context.Context, teamID, userID string) (*helmrtype.SlackUserMapping, error) {
	var out helmrtype.SlackUserMapping
	if err := s.c.do(ctx, http.MethodDelete, "/v1/slack/users/"+pathEscape(teamID)+"/"+pathEscape(userID), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
