package helmrclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/helmr-go/helmr/helmrtype"
)

// Asks are the questions one Turn asked people; get them with TurnRef.Asks.
type Asks struct {
	t *TurnRef
}

// Asks returns the Turn's questions.
func (t *TurnRef) Asks() *Asks { return &Asks{t: t} }

// List returns a page of the Turn's questions, oldest first.
func (a *Asks) List(ctx context.Context, opts ListOptions) (*helmrtype.AskPage, error) {
	q := url.Values{}
	opts.values(q)
	var out helmrtype.AskPage
	if err := a.t.c.do(ctx, http.MethodGet, a.t.path()+"/asks", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Get returns one question.
func (a *Asks) Get(ctx context.Context, askID string) (*helmrtype.AskState, error) {
	var out helmrtype.AskState
	if err := a.t.c.do(ctx, http.MethodGet, a.t.path()+"/asks/"+pathEscape(askID), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Respond answers a pending question: for a text question a JSON string,
// for a choice {"selected": [option ids], "text": …}. responseID makes the
// call safe to retry: the same ID and answer return the same result, while
// another answer to an answered question is a conflict.
func (a *Asks) Respond(ctx context.Context, askID string, answer any, responseID string) (*helmrtype.AskState, error) {
	raw, ok := answer.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(answer); err != nil {
			return nil, &helmrtype.Error{Code: helmrtype.CodeAnswerInvalid, Message: "the answer does not encode as JSON: " + err.Error()}
		}
	}
	if responseID == "" {
		return nil, &helmrtype.Error{Code: helmrtype.CodeInvalidRequest, Message: "a response ID is required: choose one and reuse it to retry"}
	}
	var out helmrtype.AskState
	req := helmrtype.AskRespond{Answer: raw, ResponseID: responseID}
	if err := a.t.c.do(ctx, http.MethodPost, a.t.path()+"/asks/"+pathEscape(askID)+"/respond", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
