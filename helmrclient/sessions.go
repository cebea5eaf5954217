package helmrclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

// Sessions creates, reads and lists Sessions; reach it as Client.Sessions.
type Sessions struct{ c *Client }

// CreateOptions are the optional fields of a Session creation.
type CreateOptions struct {
	// Key is the Session's unique identity within its Agent; an occupied
	// key conflicts.
	Key string
	// ComputerID runs the Session on an existing Computer.
	ComputerID string
	// Slack opens the Session in a Slack channel: it posts an opening
	// message there and owns the thread (docs/slack.md).
	Slack *helmrtype.SlackChannelRequest
	// IdempotencyKey identifies the request for retries; when empty a fresh
	// UUIDv7 is generated for this call.
	IdempotencyKey string
	// Wait, when positive, makes the same request wait up to Wait (at most
	// MaxWaitPerRequest) for the initial Turn to settle: its State is then
	// the settled Turn, and its Wait answers without another request.
	Wait time.Duration
}

// CreateReceipt is the answer to a Session creation: handles on the Session
// and its initial Turn, and the API object as the server sent it.
type CreateReceipt struct {
	// Session is a handle on the created Session.
	Session *SessionRef
	// Turn is a handle on the initial Turn, nil when no input was given.
	Turn *TurnRef
	// Receipt is the API object exactly as returned.
	Receipt helmrtype.SessionCreateReceipt
	// Replayed is true when the server answered 200: an idempotent replay
	// of an earlier request with the same key returned the original receipt.
	Replayed bool
}

// Create creates a Session of agent in the current Deployment. A nil input
// creates no Turn (Receipt.Turn is null); any other input is encoded as JSON
// (a json.RawMessage is sent as it is) and becomes the initial Turn's input.
// Use Text for a conversational Agent's input.
func (s *Sessions) Create(ctx context.Context, agent string, input any, opts CreateOptions) (*CreateReceipt, error) {
	raw, err := encodeInput(input)
	if err != nil {
		return nil, err
	}
	key, err := idempotencyKey(opts.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	req := helmrtype.SessionCreateRequest{
		Agent:          agent,
		Input:          raw,
		Key:            opts.Key,
		ComputerID:     opts.ComputerID,
		Slack:          opts.Slack,
		IdempotencyKey: key,
	}
	var out helmrtype.SessionCreateReceipt
	status, err := s.c.doStatus(ctx, http.MethodPost, "/v1/sessions", settleQuery(opts.Wait), req, &out)
	if err != nil {
		return nil, err
	}
	r := &CreateReceipt{Session: s.Ref(out.Session.ID), Receipt: out, Replayed: status == http.StatusOK}
	if out.Turn != nil {
		r.Turn = s.c.turnRef(out.Turn.SessionID, out.Turn.ID, out.Turn)
		if r.Turn.sessionID == "" {
			r.Turn.sessionID = out.Session.ID
		}
	}
	return r, nil
}

// Get returns the current state of Session id.
func (s *Sessions) Get(ctx context.Context, id string) (*helmrtype.Session, error) {
	return s.Ref(id).Get(ctx)
}

// SessionListOptions selects Sessions. Either filter with the page fields
// (Status, ParentSessionID, RequesterSessionID, Agent, Cursor, Limit), or look
// one Session up by Agent and Key together, with no other field.
type SessionListOptions struct {
	// Agent is the authored Agent identifier.
	Agent string
	// Key selects the Session with this key; it requires Agent and excludes
	// every other field.
	Key string
	// Status keeps Sessions with any of these statuses (open, closing, closed).
	Status []string
	// ParentSessionID keeps the children owned by this Session.
	ParentSessionID string
	// RequesterSessionID keeps Sessions requested by this Session.
	RequesterSessionID string
	// Cursor is the previous page's next_cursor.
	Cursor string
	// Limit is the page size, 1–100; 0 uses the server's default.
	Limit int
}

// query checks o and encodes it as the query of GET /v1/sessions.
func (o SessionListOptions) query() (url.Values, error) {
	q := url.Values{}
	if o.Key != "" {
		if o.Agent == "" {
			return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "a Session key lookup needs the Agent too")
		}
		if len(o.Status) > 0 || o.ParentSessionID != "" || o.RequesterSessionID != "" || o.Cursor != "" || o.Limit != 0 {
			return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "a Session key lookup takes only the Agent and the key, no other filter or paging")
		}
	}
	if o.Limit < 0 || o.Limit > 100 {
		return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "limit %d: want 1–100", o.Limit)
	}
	if o.Agent != "" {
		q.Set("agent", o.Agent)
	}
	if o.Key != "" {
		q.Set("key", o.Key)
	}
	for _, st := range o.Status {
		q.Add("status", st)
	}
	if o.ParentSessionID != "" {
		q.Set("parent_session_id", o.ParentSessionID)
	}
	if o.RequesterSessionID != "" {
		q.Set("requester_session_id", o.RequesterSessionID)
	}
	ListOptions{Cursor: o.Cursor, Limit: o.Limit}.values(q)
	return q, nil
}

// List returns one page of Sessions selected by opts, or the Session with
// opts.Key (an empty page when there is none).
func (s *Sessions) List(ctx context.Context, opts SessionListOptions) (*helmrtype.SessionPage, error) {
	q, err := opts.query()
	if err != nil {
		return nil, err
	}
	var out helmrtype.SessionPage
	if err := s.c.do(ctx, http.MethodGet, "/v1/sessions", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Ref returns a handle on Session id without a network request.
func (s *Sessions) Ref(id string) *SessionRef {
	r := &SessionRef{c: s.c, id: id}
	r.Turns = &SessionTurns{c: s.c, sessionID: id}
	r.Events = &SessionEvents{c: s.c, sessionID: id}
	return r
}

// SessionRef is a handle on one Session; make it with Sessions.Ref.
type SessionRef struct {
	// Turns lists the Session's Turns and makes handles on them.
	Turns *SessionTurns
	// Events reads and follows the Session's event timeline.
	Events *SessionEvents

	c  *Client
	id string
}

// ID is the Session's ID.
func (s *SessionRef) ID() string { return s.id }

// path is the Session's URL path.
func (s *SessionRef) path() string { return "/v1/sessions/" + pathEscape(s.id) }

// Get returns the Session's current state.
func (s *SessionRef) Get(ctx context.Context) (*helmrtype.Session, error) {
	var out helmrtype.Session
	if err := s.c.do(ctx, http.MethodGet, s.path(), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EnqueueOptions are the optional fields of an enqueue.
type EnqueueOptions struct {
	// IdempotencyKey identifies the request for retries; when empty a fresh
	// UUIDv7 is generated for this call.
	IdempotencyKey string
	// Wait, when positive, makes the same request wait up to Wait (at most
	// MaxWaitPerRequest) for the Turn to settle: its State is then the
	// settled Turn, and its Wait answers without another request.
	Wait time.Duration
}

// settleQuery is the wait query of an admission that also waits up to d
// for its Turn to settle (nil for none).
func settleQuery(d time.Duration) url.Values {
	if d <= 0 {
		return nil
	}
	return url.Values{"wait": {formatWaitTimeout(min(d, MaxWaitPerRequest))}}
}

// Enqueue always admits a new Turn with input (encoded as in
// Sessions.Create) at the end of the Session's queue, and returns a handle
// on it whose State is the TurnState the server answered (the settled
// Turn when opts.Wait was given and it settled in time).
func (s *SessionRef) Enqueue(ctx context.Context, input any, opts EnqueueOptions) (*TurnRef, error) {
	raw, err := encodeInput(input)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		raw = json.RawMessage("null")
	}
	key, err := idempotencyKey(opts.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	var out helmrtype.TurnState
	req := helmrtype.EnqueueRequest{Input: raw, IdempotencyKey: key}
	if err := s.c.do(ctx, http.MethodPost, s.path()+"/turns", settleQuery(opts.Wait), req, &out); err != nil {
		return nil, err
	}
	sid := out.SessionID
	if sid == "" {
		sid = s.id
	}
	return s.c.turnRef(sid, out.ID, &out), nil
}

// SessionTurns lists a Session's Turns; reach it as SessionRef.Turns.
type SessionTurns struct {
	c         *Client
	sessionID string
}

// List returns one page of the Session's Turns in admission order.
func (t *SessionTurns) List(ctx context.Context, opts ListOptions) (*helmrtype.TurnPage, error) {
	if opts.Limit < 0 || opts.Limit > 100 {
		return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "limit %d: want 1–100", opts.Limit)
	}
	q := url.Values{}
	opts.values(q)
	var out helmrtype.TurnPage
	path := "/v1/sessions/" + pathEscape(t.sessionID) + "/turns"
	if err := t.c.do(ctx, http.MethodGet, path, q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Ref returns a handle on Turn id of this Session without a network request.
func (t *SessionTurns) Ref(id string) *TurnRef { return t.c.turnRef(t.sessionID, id, nil) }

// encodeInput encodes a Turn input: nil stays absent, a json.RawMessage is
// checked and kept, a nil Content becomes [] (empty conversational input),
// anything else is marshalled.
func encodeInput(input any) (json.RawMessage, error) {
	switch v := input.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if len(v) == 0 {
			return nil, nil
		}
		if !json.Valid(v) {
			return nil, helmrtype.Errorf(helmrtype.CodeInputInvalid, "input is not valid JSON")
		}
		return v, nil
	case helmrtype.Content:
		if v == nil {
			return json.RawMessage("[]"), nil
		}
	}
	b, err := json.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("helmrclient: encode input: %w", err)
	}
	return b, nil
}
