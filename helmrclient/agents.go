package helmrclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/helmr-go/helmr/helmrtype"
)

// Agents reads the Agents of a Deployment; reach it as Client.Agents.
type Agents struct{ c *Client }

// AgentListOptions selects one page of Agents. An empty DeploymentID reads
// the current Deployment; a cursor keeps the Deployment it started on.
type AgentListOptions struct {
	DeploymentID string
	Cursor       string
	// Limit is the page size, 1–100; 0 uses the server's default.
	Limit int
}

// query checks o and encodes it.
func (o AgentListOptions) query() (url.Values, error) {
	if o.Limit < 0 || o.Limit > 100 {
		return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "limit %d: want 1–100", o.Limit)
	}
	q := url.Values{}
	if o.DeploymentID != "" {
		q.Set("deployment_id", o.DeploymentID)
	}
	ListOptions{Cursor: o.Cursor, Limit: o.Limit}.values(q)
	return q, nil
}

// List returns one page of the Agents of a Deployment.
func (a *Agents) List(ctx context.Context, opts AgentListOptions) (*helmrtype.AgentPage, error) {
	q, err := opts.query()
	if err != nil {
		return nil, err
	}
	var out helmrtype.AgentPage
	if err := a.c.do(ctx, http.MethodGet, "/v1/agents", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AgentGetOptions selects the Deployment an Agent is read from; an empty
// DeploymentID reads the current one.
type AgentGetOptions struct {
	DeploymentID string
}

// Get returns Agent id (its authored identifier) as published in a Deployment.
func (a *Agents) Get(ctx context.Context, id string, opts AgentGetOptions) (*helmrtype.AgentInfo, error) {
	q := url.Values{}
	if opts.DeploymentID != "" {
		q.Set("deployment_id", opts.DeploymentID)
	}
	var out helmrtype.AgentInfo
	if err := a.c.do(ctx, http.MethodGet, "/v1/agents/"+pathEscape(id), q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
