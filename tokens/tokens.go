// Package tokens creates Tokens — durable one-shot values that an outside
// party completes through the API or a callback URL — and waits on them.
package tokens

import (
	"context"
	"encoding/json"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/sessionproc"
)

// Options of a new Token.
type Options struct {
	// Timeout is when the Token expires (a Duration, at most 365d); empty
	// means never.
	Timeout string
	Tags    []string
	// Metadata is any JSON object describing the Token (not secret).
	Metadata json.RawMessage
	// IdempotencyKey returns the Session's earlier Token with this key.
	IdempotencyKey string
}

// Token is a created Token. PublicAccessToken lets its holder complete this
// one Token (POST CallbackURL with Authorization: Bearer) and nothing else;
// it is only known where the Token was created.
type Token struct {
	ID                string
	CallbackURL       string
	PublicAccessToken string
	ExpiresAt         *time.Time
}

// Create creates a Token. ctx must be the running Turn's context.
func Create(ctx context.Context, o Options) (*Token, error) {
	rt := sessionproc.TurnFrom(ctx)
	if rt == nil {
		return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "tokens: ctx is not a running turn's context")
	}
	st, err := rt.CreateToken(ctx, helmrtype.TokenCreate{Timeout: o.Timeout, Tags: o.Tags, Metadata: o.Metadata, IdempotencyKey: o.IdempotencyKey})
	if err != nil {
		return nil, err
	}
	return &Token{ID: st.ID, CallbackURL: st.CallbackURL, PublicAccessToken: st.PublicAccessToken, ExpiresAt: st.ExpiresAt}, nil
}

// Ref refers to an existing Token of the Session by ID, to wait on it.
func Ref(id string) *Token { return &Token{ID: id} }

// WaitOptions tune a wait on a Token.
type WaitOptions struct {
	// Timeout ends this wait with wait_timeout (the Token stays pending);
	// it may be earlier than the Token's own expiry. Empty: no limit.
	Timeout string
	// IdleTimeout is how long the process stays hot (1ms–1h; default the
	// Agent's, else 30s).
	IdleTimeout string
	// Schema, when set, validates the completion; a value that does not
	// validate is an error with code result_invalid.
	Schema func(json.RawMessage) error
	// JSONSchema is the JSON Schema of the completion, when the validator
	// has one (a helmr.Validator's JSONSchema()). The Token carries it: the
	// control plane refuses a completion that does not satisfy it (400
	// input_invalid) and the Token stays pending for a correct one.
	JSONSchema json.RawMessage
}

// Wait waits until the Token is completed and returns its data. A
// cancelled or expired Token, or the waiter's timeout, is an error with
// code token_cancelled, token_expired or wait_timeout (errors.Is with
// helmrtype codes).
func (t *Token) Wait(ctx context.Context, o WaitOptions) (json.RawMessage, error) {
	rt := sessionproc.TurnFrom(ctx)
	if rt == nil {
		return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "tokens: ctx is not a running turn's context")
	}
	out, err := rt.Wait(ctx, helmrtype.WaitStart{Kind: helmrtype.WaitToken, TargetID: t.ID, Timeout: o.Timeout, IdleTimeout: o.IdleTimeout,
		Schema: o.JSONSchema})
	if err != nil {
		return nil, err
	}
	if out.Status != helmrtype.OutcomeResolved {
		return nil, out.Error
	}
	if o.Schema != nil {
		if err := o.Schema(out.Value); err != nil {
			return nil, helmrtype.Errorf(helmrtype.CodeResultInvalid, "token %s: the completion does not validate: %v", t.ID, err)
		}
	}
	return out.Value, nil
}

// WaitAs waits like Wait and decodes the data into T.
func WaitAs[T any](ctx context.Context, t *Token, o WaitOptions) (T, error) {
	var v T
	raw, err := t.Wait(ctx, o)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, helmrtype.Errorf(helmrtype.CodeResultInvalid, "token %s: the completion does not decode: %v", t.ID, err)
	}
	return v, nil
}
