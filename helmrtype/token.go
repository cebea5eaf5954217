package helmrtype

import (
	"bytes"
	"encoding/json"
	"time"
)

// Token states.
const (
	TokenPending   = "pending"
	TokenCompleted = "completed"
	TokenCancelled = "cancelled"
	TokenExpired   = "expired"
)

// Limits of Tokens.
const (
	MaxTokenDataBytes     = 256 << 10
	MaxTokenMetadataBytes = 64 << 10
	MaxTokenTags          = 20
	MaxTokenTagBytes      = 128
	MaxTokenTimeout       = 365 * 24 * time.Hour
)

// TokenCreate are the options of a new Token: when it expires (Timeout),
// tags and metadata to find and describe it, and an idempotency key under
// which the Session gets the same Token again.
type TokenCreate struct {
	Timeout        string          `json:"timeout,omitempty"`
	Tags           []string        `json:"tags,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// Check enforces the limits of the options.
func (c *TokenCreate) Check() error {
	if c.Timeout != "" {
		d, err := ParseDuration(c.Timeout)
		if err != nil {
			return Errorf(CodeInvalidRequest, "timeout: %v", err)
		}
		if d <= 0 || d > MaxTokenTimeout {
			return Errorf(CodeInvalidRequest, "timeout %s is out of range: it must be positive and at most 365d", c.Timeout)
		}
	}
	if len(c.Tags) > MaxTokenTags {
		return Errorf(CodeLimitExceeded, "%d tags; the limit is %d", len(c.Tags), MaxTokenTags)
	}
	for i, t := range c.Tags {
		if t == "" || len(t) > MaxTokenTagBytes {
			return Errorf(CodeInvalidRequest, "tags[%d] must be 1 to %d bytes", i, MaxTokenTagBytes)
		}
	}
	if len(c.Metadata) > 0 {
		if len(c.Metadata) > MaxTokenMetadataBytes {
			return Errorf(CodeLimitExceeded, "metadata is %d bytes; the limit is %d", len(c.Metadata), MaxTokenMetadataBytes)
		}
		if t := bytes.TrimSpace(c.Metadata); len(t) == 0 || (t[0] != '{' && string(t) != "null") {
			return Errorf(CodeInvalidRequest, "metadata must be a JSON object")
		}
		if err := CheckJSON(c.Metadata); err != nil {
			return Errorf(CodeInvalidRequest, "metadata: %v", err)
		}
	}
	if len(c.IdempotencyKey) > 256 {
		return Errorf(CodeInvalidRequest, "idempotency_key is longer than 256 bytes")
	}
	return nil
}

// TokenState is a Token as the REST API shows it. PublicAccessToken is
// present only where the Token is created.
type TokenState struct {
	ID                string          `json:"id"`
	SessionID         string          `json:"session_id,omitempty"`
	TurnID            string          `json:"turn_id,omitempty"`
	Status            string          `json:"status"`
	Tags              []string        `json:"tags"`
	Metadata          json.RawMessage `json:"metadata,omitempty"`
	Data              json.RawMessage `json:"data,omitempty"`
	CallbackURL       string          `json:"callback_url,omitempty"`
	PublicAccessToken string          `json:"public_access_token,omitempty"`
	CreatedAt         time.Time       `json:"created_at"`
	ExpiresAt         *time.Time      `json:"expires_at,omitempty"`
	CompletedAt       *time.Time      `json:"completed_at,omitempty"`
	CancelledAt       *time.Time      `json:"cancelled_at,omitempty"`
	ExpiredAt         *time.Time      `json:"expired_at,omitempty"`
}

// TokenComplete is the body of POST /v1/tokens/{id}/complete: the value
// (`data`, or its alias `result`). A missing value completes with null.
type TokenComplete struct {
	Data           json.RawMessage `json:"data"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// TokenCompletion answers a completion: Status is "completed", or
// "already_completed" for a repeat with the same data.
type TokenCompletion struct {
	Status string     `json:"status"`
	Token  TokenState `json:"token"`
}

// ParseTokenComplete decodes a completion body strictly. An empty body
// completes with null.
func ParseTokenComplete(raw []byte) (*TokenComplete, error) {
	if len(raw) > MaxTokenDataBytes+4096 {
		return nil, Errorf(CodeLimitExceeded, "the body is %d bytes; token data is limited to %d", len(raw), MaxTokenDataBytes)
	}
	out := &TokenComplete{Data: json.RawMessage("null")}
	if len(bytes.TrimSpace(raw)) == 0 {
		return out, nil
	}
	var in struct {
		Data           json.RawMessage `json:"data"`
		Result         json.RawMessage `json:"result"`
		IdempotencyKey string          `json:"idempotency_key"`
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&in); err != nil {
		return nil, Errorf(CodeInvalidRequest, "token completion: want {\"data\": …}: %v", err)
	}
	if d.More() {
		return nil, Errorf(CodeInvalidRequest, "token completion: trailing data after the JSON value")
	}
	if in.Data != nil && in.Result != nil {
		return nil, Errorf(CodeInvalidRequest, "token completion: give data or result, not both")
	}
	if in.Data == nil {
		in.Data = in.Result
	}
	if in.Data != nil {
		out.Data = in.Data
	}
	if len(out.Data) > MaxTokenDataBytes {
		return nil, Errorf(CodeLimitExceeded, "token data is %d bytes; the limit is %d", len(out.Data), MaxTokenDataBytes)
	}
	if err := CheckJSON(out.Data); err != nil {
		return nil, Errorf(CodeInvalidRequest, "token data: %v", err)
	}
	out.IdempotencyKey = in.IdempotencyKey
	return out, nil
}
