package engine

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store"
)

// TokenSecretPrefix begins every public access credential of a Token.
const TokenSecretPrefix = "hlmr_tok_"

// tokenOutcome is the outcome of a wait on a Token, nil while pending.
func tokenOutcome(t *store.Token) *helmrtype.WaitOutcome {
	switch t.Status {
	case helmrtype.TokenCompleted:
		return &helmrtype.WaitOutcome{Status: helmrtype.OutcomeResolved, Value: t.Data}
	case helmrtype.TokenCancelled:
		return &helmrtype.WaitOutcome{Status: helmrtype.OutcomeFailed, Error: helmrtype.Errorf(helmrtype.CodeTokenCancelled, "token %s was cancelled", t.ID)}
	case helmrtype.TokenExpired:
		return &helmrtype.WaitOutcome{Status: helmrtype.OutcomeFailed, Error: helmrtype.Errorf(helmrtype.CodeTokenExpired, "token %s expired", t.ID)}
	}
	return nil
}

func (e *Engine) callbackURL(id string) string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.publicURL + "/v1/tokens/" + id + "/complete"
}

func (e *Engine) tokenState(t *store.Token) helmrtype.TokenState {
	st := helmrtype.TokenState{ID: t.ID, SessionID: t.SessionID, TurnID: t.TurnID, Status: t.Status, Tags: []string{},
		Metadata: t.Metadata, Data: t.Data, CallbackURL: e.callbackURL(t.ID), CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt,
		Schema: t.Schema}
	if len(t.Tags) > 0 {
		json.Unmarshal(t.Tags, &st.Tags)
	}
	switch t.Status {
	case helmrtype.TokenCompleted:
		st.CompletedAt = t.ResolvedAt
	case helmrtype.TokenCancelled:
		st.CancelledAt = t.ResolvedAt
	case helmrtype.TokenExpired:
		st.ExpiredAt = t.ResolvedAt
	}
	return st
}

// CreateToken records a Token a running Turn creates. The process chooses
// the ID and the public access credential (secret), of which only a hash is
// kept. With an idempotency key the Session's earlier Token with that key
// is returned (without its credential). A repeat (same op) answers as the
// first did.
func (e *Engine) CreateToken(ctx context.Context, sessionID, turnID string, op int64, id, secret string, c helmrtype.TokenCreate) (*helmrtype.TokenState, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	if id == "" || len(secret) < len(TokenSecretPrefix)+32 || secret[:len(TokenSecretPrefix)] != TokenSecretPrefix {
		return nil, invalid("token.create needs an id and a secret of the form %s followed by at least 32 random characters", TokenSecretPrefix)
	}
	var out *store.Token
	var fresh bool
	err := e.store.Update(ctx, func(tx store.Tx) error {
		out, fresh = nil, false
		if prev, err := tx.GetToken(ctx, id); err == nil {
			if prev.SessionID != sessionID {
				return invalid("token %s exists", id)
			}
			out = prev
			return nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		t, err := e.runningTurnTx(ctx, tx, sessionID, turnID)
		if err != nil {
			return err
		}
		if rep, err := opRepeat(t, op); err != nil {
			return err
		} else if rep {
			return invalid("token.create op %d is a repeat, but token %s does not exist", op, id)
		}
		if c.IdempotencyKey != "" {
			if prev, err := tx.GetTokenByKey(ctx, sessionID, c.IdempotencyKey); err == nil {
				out = prev
				return tx.UpdateTurn(ctx, t)
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		now := e.Now()
		tok := &store.Token{ID: id, SessionID: sessionID, TurnID: turnID, Status: helmrtype.TokenPending,
			Metadata: c.Metadata, SecretHash: HashSecret(secret), IdempotencyKey: c.IdempotencyKey, CreatedAt: now}
		if len(c.Tags) > 0 {
			tok.Tags, _ = json.Marshal(c.Tags)
		}
		if c.Timeout != "" {
			d, _ := helmrtype.ParseDuration(c.Timeout) // checked above
			at := now.Add(d)
			tok.ExpiresAt = &at
		}
		if err := tx.UpdateTurn(ctx, t); err != nil {
			return err
		}
		if err := tx.InsertToken(ctx, tok); err != nil {
			return err
		}
		out, fresh = tok, true
		return nil
	})
	if err != nil {
		return nil, err
	}
	if fresh && out.ExpiresAt != nil {
		e.sched.at(*out.ExpiresAt, "token:"+out.ID, func() { e.expireToken(id) })
	}
	st := e.tokenState(out)
	return &st, nil
}

// tokenTx reads a Token, not_found when there is none.
func tokenTx(ctx context.Context, tx store.Tx, id string) (*store.Token, error) {
	t, err := tx.GetToken(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("token", id)
	}
	return t, err
}

// GetToken returns a Token.
func (e *Engine) GetToken(ctx context.Context, id string) (*helmrtype.TokenState, error) {
	var out helmrtype.TokenState
	err := e.store.View(ctx, func(tx store.Tx) error {
		t, err := tokenTx(ctx, tx, id)
		if err != nil {
			return err
		}
		out = e.tokenState(t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ListTokens returns the Tokens of every Session with the status
// (pending, completed, cancelled or expired; "" for all), newest first, a
// page at a time: with the questions, the inbox of the people who complete
// them.
func (e *Engine) ListTokens(ctx context.Context, status, cursor string, limit int) (*helmrtype.TokenPage, error) {
	switch status {
	case "", helmrtype.TokenPending, helmrtype.TokenCompleted, helmrtype.TokenCancelled, helmrtype.TokenExpired:
	default:
		return nil, &helmrtype.Error{Code: helmrtype.CodeInvalidRequest, Message: "status must be pending, completed, cancelled or expired",
			Details: map[string]any{"status": status}}
	}
	limit, err := pageLimit(limit, 100)
	if err != nil {
		return nil, err
	}
	rows, err := read(ctx, e.store, func(tx store.Tx) ([]store.Token, error) {
		return tx.ListTokensByStatus(ctx, status, cursor, limit+1)
	})
	if err != nil {
		return nil, err
	}
	out := &helmrtype.TokenPage{Tokens: []helmrtype.TokenState{}}
	rows, out.NextCursor = trimPage(rows, limit, func(t *store.Token) string { return t.ID })
	for i := range rows {
		out.Tokens = append(out.Tokens, e.tokenState(&rows[i]))
	}
	return out, nil
}

// TokenSecretValid reports whether secret is the public access credential
// of Token id. It is the only thing the credential grants. An unknown
// Token is false; err is the store's when it could not tell (such as
// store.ErrUnavailable).
func (e *Engine) TokenSecretValid(ctx context.Context, id, secret string) (bool, error) {
	ok := false
	err := e.store.View(ctx, func(tx store.Tx) error {
		t, err := tx.GetToken(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		ok = secretMatches(secret, t.SecretHash)
		return nil
	})
	return ok, err
}

// CompleteToken completes a pending Token with data. Completing it again
// with the same canonical data answers already_completed; other data is a
// token_completion_conflict and never overwrites. Data that does not
// satisfy the schema of the Token's wait is input_invalid, and the Token
// stays pending.
func (e *Engine) CompleteToken(ctx context.Context, id string, data json.RawMessage) (*helmrtype.TokenCompletion, error) {
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	if len(data) > helmrtype.MaxTokenDataBytes {
		return nil, helmrtype.Errorf(helmrtype.CodeLimitExceeded, "token data is %d bytes; the limit is %d", len(data), helmrtype.MaxTokenDataBytes)
	}
	if err := helmrtype.CheckJSON(data); err != nil {
		return nil, invalid("token data: %v", err)
	}
	var out helmrtype.TokenCompletion
	var rs []resolved
	err := e.store.Update(ctx, func(tx store.Tx) error {
		rs = nil
		t, err := tokenTx(ctx, tx, id)
		if err != nil {
			return err
		}
		switch t.Status {
		case helmrtype.TokenCompleted:
			if !sameData(t.Data, data) {
				return &helmrtype.Error{Code: helmrtype.CodeTokenCompletionConflict,
					Message: "token " + id + " is already completed with other data; it is never overwritten"}
			}
			out = helmrtype.TokenCompletion{Status: "already_completed", Token: e.tokenState(t)}
			return nil
		case helmrtype.TokenCancelled:
			return helmrtype.Errorf(helmrtype.CodeTokenCancelled, "token %s was cancelled", id)
		case helmrtype.TokenExpired:
			return helmrtype.Errorf(helmrtype.CodeTokenExpired, "token %s expired", id)
		}
		if err := checkTokenData(t, data); err != nil {
			return err
		}
		now := e.Now()
		t.Status, t.Data, t.ResolvedAt = helmrtype.TokenCompleted, data, &now
		if err := tx.UpdateToken(ctx, t); err != nil {
			return err
		}
		if rs, err = e.resolveTargetTx(ctx, tx, id, tokenOutcome(t), now); err != nil {
			return err
		}
		out = helmrtype.TokenCompletion{Status: "completed", Token: e.tokenState(t)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.sched.cancel("token:" + id)
	e.announce(rs)
	return &out, nil
}

// CancelToken cancels a pending Token; its waiters see token_cancelled.
// Cancelling a cancelled Token returns it unchanged; a completed or expired
// one cannot be cancelled.
func (e *Engine) CancelToken(ctx context.Context, id string) (*helmrtype.TokenState, error) {
	return e.endToken(ctx, id, helmrtype.TokenCancelled)
}

func (e *Engine) expireToken(id string) {
	if _, err := e.endToken(context.Background(), id, helmrtype.TokenExpired); err != nil && helmrtype.CodeOf(err) != helmrtype.CodeConflict {
		e.log.Error("expire token", "token", id, "err", err)
	}
}

func (e *Engine) endToken(ctx context.Context, id, status string) (*helmrtype.TokenState, error) {
	var out helmrtype.TokenState
	var rs []resolved
	err := e.store.Update(ctx, func(tx store.Tx) error {
		rs = nil
		t, err := tokenTx(ctx, tx, id)
		if err != nil {
			return err
		}
		if t.Status == status {
			out = e.tokenState(t)
			return nil
		}
		if t.Status != helmrtype.TokenPending {
			return helmrtype.Errorf(helmrtype.CodeConflict, "token %s is %s", id, t.Status)
		}
		now := e.Now()
		if status == helmrtype.TokenExpired && t.ExpiresAt != nil && now.Before(*t.ExpiresAt) {
			at := *t.ExpiresAt
			defer e.sched.at(at, "token:"+id, func() { e.expireToken(id) })
			out = e.tokenState(t)
			return nil
		}
		t.Status, t.ResolvedAt = status, &now
		if err := tx.UpdateToken(ctx, t); err != nil {
			return err
		}
		if rs, err = e.resolveTargetTx(ctx, tx, id, tokenOutcome(t), now); err != nil {
			return err
		}
		out = e.tokenState(t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.sched.cancel("token:" + id)
	e.announce(rs)
	return &out, nil
}

// sameData reports whether two completions carry the same canonical data
// (helmrtype.CanonicalJSON: key order, spacing and number spelling aside).
func sameData(a, b []byte) bool {
	ca, erra := helmrtype.CanonicalJSON(a)
	cb, errb := helmrtype.CanonicalJSON(b)
	return erra == nil && errb == nil && bytes.Equal(ca, cb)
}

// secretMatches compares a presented secret with a stored hash in
// constant time.
func secretMatches(secret, hash string) bool {
	return subtle.ConstantTimeCompare([]byte(HashSecret(secret)), []byte(hash)) == 1
}

// tokenSchema checks the JSON Schema a Token wait gives its completion and
// returns it compact: invalid_request when it is too big or does not
// compile.
func tokenSchema(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) > helmrtype.MaxTokenSchemaBytes {
		return nil, helmrtype.Errorf(helmrtype.CodeLimitExceeded, "the wait's schema is %d bytes; the limit is %d", len(raw), helmrtype.MaxTokenSchemaBytes)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, invalid("the wait's schema is not JSON: %v", err)
	}
	if _, err := resolveSchema(buf.Bytes()); err != nil {
		return nil, invalid("the wait's schema: %v", err)
	}
	return buf.Bytes(), nil
}

func resolveSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	return s.Resolve(nil)
}

// checkTokenData validates a completion against the Token's schema, if it
// has one: input_invalid when it does not satisfy it.
func checkTokenData(t *store.Token, data json.RawMessage) error {
	if len(t.Schema) == 0 {
		return nil
	}
	r, err := resolveSchema(t.Schema)
	if err != nil {
		return err // checked when the wait started
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return invalid("token data: %v", err)
	}
	if err := r.Validate(v); err != nil {
		return &helmrtype.Error{Code: helmrtype.CodeInputInvalid,
			Message: "token " + t.ID + ": the data does not satisfy the schema of its wait; the token stays pending: " + err.Error(),
			Details: map[string]any{"schema": t.Schema}}
	}
	return nil
}
