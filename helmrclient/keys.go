package helmrclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/helmr-go/helmr/helmrtype"
)

// Keys creates, lists and revokes API keys; it needs an admin key.
type Keys struct {
	c *Client
}

// Create makes an API key with a name and a role. The answer carries the
// key's secret, which the server shows only this once.
func (k *Keys) Create(ctx context.Context, name string, role helmrtype.Role) (*helmrtype.APIKeyCreated, error) {
	var out helmrtype.APIKeyCreated
	if err := k.c.do(ctx, http.MethodPost, "/v1/keys", nil, helmrtype.APIKeyCreateRequest{Name: name, Role: role}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// List returns a page of the API keys, revoked ones included, oldest
// first; each shows its secret's first characters, never the secret.
func (k *Keys) List(ctx context.Context, opts ListOptions) (*helmrtype.APIKeyPage, error) {
	q := url.Values{}
	opts.values(q)
	var out helmrtype.APIKeyPage
	if err := k.c.do(ctx, http.MethodGet, "/v1/keys", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Revoke revokes an API key: its next request, on any node, fails with
// unauthorized. Revoking the last admin key is a conflict.
func (k *Keys) Revoke(ctx context.Context, id string) (*helmrtype.APIKey, error) {
	var out helmrtype.APIKey
	if err := k.c.do(ctx, http.MethodDelete, "/v1/keys/"+pathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Inbox reads the questions of every Session, the work of the people (and
// responder keys) who answer them.
type Inbox struct {
	c *Client
}

// InboxOptions filter and page Inbox.List.
type InboxOptions struct {
	// Status is pending, responded or cancelled; empty lists all.
	Status string
	Cursor string
	Limit  int
}

// List returns a page of questions across Sessions, newest first.
func (i *Inbox) List(ctx context.Context, opts InboxOptions) (*helmrtype.AskPage, error) {
	q := url.Values{}
	ListOptions{Cursor: opts.Cursor, Limit: opts.Limit}.values(q)
	if opts.Status != "" {
		q.Set("status", opts.Status)
	}
	var out helmrtype.AskPage
	if err := i.c.do(ctx, http.MethodGet, "/v1/asks", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Get returns one question by its ID alone.
func (i *Inbox) Get(ctx context.Context, askID string) (*helmrtype.AskState, error) {
	var out helmrtype.AskState
	if err := i.c.do(ctx, http.MethodGet, "/v1/asks/"+pathEscape(askID), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Respond answers a question known by its ID alone: it reads the question
// for its Session and Turn, then answers as Asks.Respond does.
func (i *Inbox) Respond(ctx context.Context, askID string, answer any, responseID string) (*helmrtype.AskState, error) {
	a, err := i.Get(ctx, askID)
	if err != nil {
		return nil, err
	}
	return i.c.Sessions.Ref(a.SessionID).Turns.Ref(a.TurnID).Asks().Respond(ctx, askID, answer, responseID)
}
