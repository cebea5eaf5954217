package helmrtype

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Token statuses.
const (
	TokenPending   = "pending"
	TokenCompleted = "completed"
	TokenCancelled = "cancelled"
	TokenExpired   = "expired"
)

// TokenAlreadyCompleted is the TokenCompletion status of a completion that
// repeats the token's data; a first completion has the status TokenCompleted.
const TokenAlreadyCompleted = "already_completed"

// Limits of tokens. Sizes of strings are of their UTF-8 bytes.
const (
	// MaxTokenTimeout is the longest timeout of a token.
	MaxTokenTimeout = 365 * 24 * time.Hour
	// MaxTokenTags is the largest number of tags of a token.
	MaxTokenTags = 20
	// MaxTokenTagBytes bounds one tag.
	MaxTokenTagBytes = 128
	// MaxTokenMetadataBytes bounds a token's metadata, as JSON.
	MaxTokenMetadataBytes = 64 << 10
	// MaxTokenSchemaBytes bounds the JSON Schema a Token wait gives its
	// completion.
	MaxTokenSchemaBytes = 64 << 10
	// MaxTokenDataBytes bounds a token's completion data, as compact JSON.
	MaxTokenDataBytes = 256 << 10
	// MaxIdempotencyKeyBytes bounds an idempotency key.
	MaxIdempotencyKeyBytes = 256
)

// MaxTokenCompleteBody bounds the body ParseTokenComplete reads: the data
// with room for insignificant space, the other fields and the envelope.
const MaxTokenCompleteBody = 4 * MaxTokenDataBytes

// TokenCreate is the body that creates a token: all fields are optional.
// Timeout is a Duration string; without it the token does not expire.
type TokenCreate struct {
	Timeout        string          `json:"timeout,omitempty"`
	Tags           []string        `json:"tags,omitempty"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// Check reports whether c is within the limits: a positive timeout of at most
// MaxTokenTimeout, MaxTokenTags tags of MaxTokenTagBytes, metadata a JSON
// object (null is absent) of MaxTokenMetadataBytes, and an idempotency key of
// MaxIdempotencyKeyBytes. Sizes are limit_exceeded, other problems invalid_request.
func (c *TokenCreate) Check() error {
	if c.Timeout != "" {
		d, err := ParseDuration(c.Timeout)
		if err != nil {
			return Errorf(CodeInvalidRequest, "timeout: %v", err)
		}
		if d > MaxTokenTimeout {
			return Errorf(CodeInvalidRequest, "timeout %q is longer than the limit of 365d", c.Timeout)
		}
	}
	if len(c.Tags) > MaxTokenTags {
		return Errorf(CodeLimitExceeded, "tags has %d tags; the limit is %d", len(c.Tags), MaxTokenTags)
	}
	for i, t := range c.Tags {
		if t == "" {
			return Errorf(CodeInvalidRequest, "tags[%d] must not be empty", i)
		}
		if len(t) > MaxTokenTagBytes {
			return Errorf(CodeLimitExceeded, "tags[%d] is %d bytes; the limit is %d", i, len(t), MaxTokenTagBytes)
		}
	}
	if len(c.Metadata) > 0 && !isNull(c.Metadata) {
		if len(c.Metadata) > MaxTokenMetadataBytes {
			return Errorf(CodeLimitExceeded, "metadata is %d bytes of JSON; the limit is %d", len(c.Metadata), MaxTokenMetadataBytes)
		}
		if err := CheckJSON(c.Metadata); err != nil {
			return Errorf(CodeInvalidRequest, "metadata: %v", err)
		}
		if m := bytes.TrimSpace(c.Metadata); m[0] != '{' {
			return Errorf(CodeInvalidRequest, "metadata must be a JSON object, not %s", jsonKind(m))
		}
	}
	if len(c.IdempotencyKey) > MaxIdempotencyKeyBytes {
		return Errorf(CodeInvalidRequest, "idempotency_key is longer than %d bytes", MaxIdempotencyKeyBytes)
	}
	return nil
}

// TokenState is a token's current state. Data is the completion data of a
// completed token. Schema is the JSON Schema a completion must satisfy,
// that of the token's latest wait that gave one; absent, any JSON does.
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
	Schema            json.RawMessage `json:"schema,omitempty"`
}

// TokenPage is one page of tokens.
type TokenPage struct {
	Tokens     []TokenState `json:"tokens"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// TokenComplete is the body of POST /v1/tokens/{id}/complete: the data to
// complete the token with, any JSON. When decoding, "result" is accepted in
// place of "data" (not both), and a body with neither completes with null.
type TokenComplete struct {
	Data           json.RawMessage `json:"data"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// UnmarshalJSON decodes a JSON object with only the fields data (or its alias
// result) and idempotency_key, matched exactly; Data is kept as compact JSON,
// null when absent.
func (c *TokenComplete) UnmarshalJSON(b []byte) error {
	m, err := strictObject(b, "the token completion", "data", "result", "idempotency_key")
	if err != nil {
		return Errorf(CodeInvalidRequest, "%v", err)
	}
	data, hasData := m["data"]
	result, hasResult := m["result"]
	switch {
	case hasData && hasResult:
		return Errorf(CodeInvalidRequest, "the token completion has both data and result; give one (result is another name for data)")
	case hasResult:
		data = result
	case !hasData:
		data = json.RawMessage("null")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return Errorf(CodeInvalidRequest, "data: not valid JSON: %v", err)
	}
	key, err := stringField(m, "idempotency_key", "idempotency_key", false)
	if err != nil {
		return Errorf(CodeInvalidRequest, "%v", err)
	}
	*c = TokenComplete{Data: buf.Bytes(), IdempotencyKey: key}
	return nil
}

// ParseTokenComplete decodes a completion body as UnmarshalJSON does (an empty
// body completes with null) and checks that the data has finite numbers and
// is at most MaxTokenDataBytes of compact JSON.
func ParseTokenComplete(raw []byte) (*TokenComplete, error) {
	if len(raw) > MaxTokenCompleteBody {
		return nil, Errorf(CodeLimitExceeded, "the token completion is %d bytes; the limit is %d", len(raw), MaxTokenCompleteBody)
	}
	c := &TokenComplete{Data: json.RawMessage("null")}
	if len(bytes.TrimSpace(raw)) == 0 {
		return c, nil
	}
	if err := c.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	if len(c.Data) > MaxTokenDataBytes {
		return nil, Errorf(CodeLimitExceeded, "data is %d bytes of JSON; the limit is %d", len(c.Data), MaxTokenDataBytes)
	}
	if err := CheckJSON(c.Data); err != nil {
		return nil, Errorf(CodeInvalidRequest, "data: %v", err)
	}
	if len(c.IdempotencyKey) > MaxIdempotencyKeyBytes {
		return nil, Errorf(CodeInvalidRequest, "idempotency_key is longer than %d bytes", MaxIdempotencyKeyBytes)
	}
	return c, nil
}

// TokenCompletion answers a token completion: Status is TokenCompleted for
// the completion that completed the token, TokenAlreadyCompleted for a repeat
// with the same canonical data (see CanonicalJSON).
type TokenCompletion struct {
	Status string     `json:"status"`
	Token  TokenState `json:"token"`
}

// CanonicalJSON rewrites raw so that JSON texts that JSON.parse reads as the
// same value have the same bytes: numbers as JSON.stringify writes a float64
// (-0 as 0), object keys sorted, no space, no HTML escaping. Invalid JSON and
// non-finite numbers are errors.
func CanonicalJSON(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("not valid JSON: data after the value")
	}
	v, err := canonicalValue(v)
	if err != nil {
		return nil, err
	}
	return marshalPlain(v)
}

// canonicalValue turns the json.Numbers of v into float64s, in place.
func canonicalValue(v any) (any, error) {
	var err error
	switch x := v.(type) {
	case json.Number:
		f, perr := strconv.ParseFloat(string(x), 64)
		if perr != nil {
			return nil, fmt.Errorf("the number %s is not finite", x)
		}
		if f == 0 {
			f = 0 // not -0
		}
		return f, nil
	case []any:
		for i, e := range x {
			if x[i], err = canonicalValue(e); err != nil {
				return nil, err
			}
		}
	case map[string]any:
		for k, e := range x {
			if x[k], err = canonicalValue(e); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}
