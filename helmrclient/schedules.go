package helmrclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/helmr-go/helmr/helmrtype"
)

// Schedules reads the Schedules of the current Deployment's triggers (they
// change only by publishing a Deployment); reach it as Client.Schedules.
type Schedules struct{ c *Client }

// Get returns Schedule id.
func (s *Schedules) Get(ctx context.Context, id string) (*helmrtype.Schedule, error) {
	var out helmrtype.Schedule
	if err := s.c.do(ctx, http.MethodGet, "/v1/schedules/"+pathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// List returns one page of Schedules, by Agent and trigger name.
func (s *Schedules) List(ctx context.Context, opts ListOptions) (*helmrtype.SchedulePage, error) {
	if opts.Limit < 0 || opts.Limit > 100 {
		return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "limit %d: want 1–100", opts.Limit)
	}
	q := url.Values{}
	opts.values(q)
	var out helmrtype.SchedulePage
	if err := s.c.do(ctx, http.MethodGet, "/v1/schedules", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
