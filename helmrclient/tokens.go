package helmrclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/helmr-go/helmr/helmrtype"
)

// Tokens reads, completes and cancels Tokens. A client made with a Token's
// public access credential instead of an API key can Complete that one
// Token and nothing else.
type Tokens struct {
	c *Client
}

func tokenPath(id string) string { return "/v1/tokens/" + pathEscape(id) }

// TokenListOptions filter and page Tokens.List.
type TokenListOptions struct {
	// Status is pending, completed, cancelled or expired; empty lists all.
	Status string
	Cursor string
	Limit  int
}

// List returns a page of Tokens across Sessions, newest first: with
// Inbox.List, the inbox of what waits on people.
func (t *Tokens) List(ctx context.Context, opts TokenListOptions) (*helmrtype.TokenPage, error) {
	q := url.Values{}
	ListOptions{Cursor: opts.Cursor, Limit: opts.Limit}.values(q)
	if opts.Status != "" {
		q.Set("status", opts.Status)
	}
	var out helmrtype.TokenPage
	if err := t.c.do(ctx, http.MethodGet, "/v1/tokens", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Get returns a Token (without its credential, which only its creator saw).
func (t *Tokens) Get(ctx context.Context, id string) (*helmrtype.TokenState, error) {
	var out helmrtype.TokenState
	if err := t.c.do(ctx, http.MethodGet, tokenPath(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Complete completes a pending Token with data (any JSON value). The
// answer's Status is "completed", or "already_completed" when it was
// completed before with the same canonical data; other data is an error
// with code token_completion_conflict.
func (t *Tokens) Complete(ctx context.Context, id string, data any) (*helmrtype.TokenCompletion, error) {
	raw, ok := data.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(data); err != nil {
			return nil, &helmrtype.Error{Code: helmrtype.CodeInvalidRequest, Message: "the data does not encode as JSON: " + err.Error()}
		}
	}
	var out helmrtype.TokenCompletion
	if err := t.c.do(ctx, http.MethodPost, tokenPath(id)+"/complete", nil, helmrtype.TokenComplete{Data: raw}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Cancel cancels a pending Token; its waiters see token_cancelled.
// Cancelling a cancelled Token returns it unchanged.
func (t *Tokens) Cancel(ctx context.Context, id string) (*helmrtype.TokenState, error) {
	var out helmrtype.TokenState
	if err := t.c.do(ctx, http.MethodPost, tokenPath(id)+"/cancel", nil, struct{}{}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
