package helmrclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

// Computers creates, reads and deletes Computers, and runs Commands on them.
type Computers struct{ c *Client }

func computerPath(id string) string { return "/v1/computers/" + pathEscape(id) }

// ComputerCreateOptions are the optional fields of Computers.Create.
type ComputerCreateOptions struct {
	// DeploymentID picks the Deployment whose Template is used (default
	// the current one).
	DeploymentID   string
	Key            string
	IdempotencyKey string
}

// Create makes a Computer from a Template.
func (cs *Computers) Create(ctx context.Context, template string, o ComputerCreateOptions) (*helmrtype.ComputerState, error) {
	var out helmrtype.ComputerState
	req := helmrtype.ComputerCreateRequest{Template: template, DeploymentID: o.DeploymentID, Key: o.Key, IdempotencyKey: o.IdempotencyKey}
	if err := cs.c.do(ctx, http.MethodPost, "/v1/computers", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Get returns a Computer.
func (cs *Computers) Get(ctx context.Context, id string) (*helmrtype.ComputerState, error) {
	var out helmrtype.ComputerState
	if err := cs.c.do(ctx, http.MethodGet, computerPath(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetByKey returns the Computer that has key and is not deleted.
func (cs *Computers) GetByKey(ctx context.Context, key string) (*helmrtype.ComputerState, error) {
	var page helmrtype.ComputerPage
	if err := cs.c.do(ctx, http.MethodGet, "/v1/computers", url.Values{"key": {key}}, nil, &page); err != nil {
		return nil, err
	}
	if len(page.Computers) == 0 {
		return nil, &helmrtype.Error{Code: helmrtype.CodeNotFound, Message: "no computer has key " + key}
	}
	return &page.Computers[0], nil
}

// List returns a page of Computers, oldest first.
func (cs *Computers) List(ctx context.Context, o ListOptions) (*helmrtype.ComputerPage, error) {
	var out helmrtype.ComputerPage
	q := url.Values{}
	o.values(q)
	if err := cs.c.do(ctx, http.MethodGet, "/v1/computers", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Members returns a page of the Sessions and Commands on a Computer.
func (cs *Computers) Members(ctx context.Context, id string, o ListOptions) (*helmrtype.ComputerMemberPage, error) {
	var out helmrtype.ComputerMemberPage
	q := url.Values{}
	o.values(q)
	if err := cs.c.do(ctx, http.MethodGet, computerPath(id)+"/members", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Delete deletes a Computer nothing uses any more (its Sessions closed, no
// Command running) and its files.
func (cs *Computers) Delete(ctx context.Context, id string) (*helmrtype.ComputerState, error) {
	var out helmrtype.ComputerState
	if err := cs.c.do(ctx, http.MethodDelete, computerPath(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Exec runs a Command on a Computer and returns it running.
func (cs *Computers) Exec(ctx context.Context, id string, req helmrtype.CommandRequest) (*helmrtype.CommandState, error) {
	var out helmrtype.CommandState
	if err := cs.c.do(ctx, http.MethodPost, computerPath(id)+"/commands", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Commands reads, waits for, cancels and follows Commands.
type Commands struct{ c *Client }

func commandPath(id string) string { return "/v1/commands/" + pathEscape(id) }

// Get returns a Command.
func (cm *Commands) Get(ctx context.Context, id string) (*helmrtype.CommandState, error) {
	var out helmrtype.CommandState
	if err := cm.c.do(ctx, http.MethodGet, commandPath(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Cancel stops a running Command; an ended one is returned as it is.
func (cm *Commands) Cancel(ctx context.Context, id string) (*helmrtype.CommandState, error) {
	var out helmrtype.CommandState
	if err := cm.c.do(ctx, http.MethodPost, commandPath(id)+"/cancel", nil, struct{}{}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Wait waits until the Command ends (polling the server's bounded waits)
// or ctx ends. A non-zero exit code is an ordinary outcome.
func (cm *Commands) Wait(ctx context.Context, id string) (*helmrtype.CommandState, error) {
	for {
		var r helmrtype.CommandWaitResult
		if err := cm.c.do(ctx, http.MethodGet, commandPath(id)+"/wait", url.Values{"timeout": {"50s"}}, nil, &r); err != nil {
			return nil, err
		}
		if r.Status == helmrtype.WaitSettled && r.Command != nil {
			return r.Command, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// Logs returns a page of the Command's output after a sequence (0 from
// the start), at most limit records (0: the default, 100).
func (cm *Commands) Logs(ctx context.Context, id string, after int64, limit int) (*helmrtype.CommandLogPage, error) {
	q := url.Values{"after": {strconv.FormatInt(after, 10)}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out helmrtype.CommandLogPage
	if err := cm.c.do(ctx, http.MethodGet, commandPath(id)+"/logs", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Follow calls fn with every output record of the Command, in order, as
// it is produced, and returns once the Command has ended and all its
// output was seen.
func (cm *Commands) Follow(ctx context.Context, id string, fn func(helmrtype.CommandLogRecord) error) error {
	var after int64
	for {
		page, err := cm.Logs(ctx, id, after, 1000)
		if err != nil {
			return err
		}
		for _, r := range page.Records {
			if err := fn(r); err != nil {
				return err
			}
		}
		after = page.NextAfter
		if page.Done {
			return nil
		}
		if len(page.Records) == 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}
