package helmr

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
)

// schemaValidator validates JSON against the JSON Schema of a Go type and
// decodes it into that type.
type schemaValidator[T any] struct {
	raw      json.RawMessage
	resolved *jsonschema.Resolved
}

// SchemaFor derives a Validator from T's JSON Schema (struct fields without
// omitempty are required; unknown fields are refused). As an Agent's
// result validator it checks the result's JSON and does not transform it.
func SchemaFor[T any]() (Validator[T], error) {
	t := reflect.TypeFor[T]()
	if t.Kind() == reflect.Interface {
		// any: every JSON value is accepted.
		return &schemaValidator[T]{raw: json.RawMessage(`{}`)}, nil
	}
	s, err := jsonschema.For[T](nil)
	if err != nil {
		return nil, err
	}
	// Go encodes a nil map or pointer as null; the schema allows what the
	// type can encode (slices already include null).
	if (t.Kind() == reflect.Map || t.Kind() == reflect.Pointer) && s.Type != "" {
		s.Types, s.Type = []string{"null", s.Type}, ""
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return nil, err
	}
	return &schemaValidator[T]{raw: raw, resolved: r}, nil
}

func (v *schemaValidator[T]) JSONSchema() json.RawMessage { return v.raw }

func (v *schemaValidator[T]) Validate(_ context.Context, raw json.RawMessage) (T, error) {
	var out T
	if v.resolved != nil {
		var inst any
		dec := json.NewDecoder(bytes.NewReader(raw))
		if err := dec.Decode(&inst); err != nil {
			return out, fmt.Errorf("not valid JSON: %v", err)
		}
		if err := v.resolved.Validate(inst); err != nil {
			return out, err
		}
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, err
	}
	return out, nil
}

// checkEncoded validates raw as Validate does (the schema, and that it
// decodes into T) and keeps nothing of the decoded value: SchemaFor's
// validators do not transform, so raw itself is what they accept.
func (v *schemaValidator[T]) checkEncoded(raw json.RawMessage) error {
	_, err := v.Validate(context.Background(), raw)
	return err
}

// encodedChecker is a Validator that does not transform what it accepts:
// JSON that a value of its type encodes to is checked, and kept as it is
// rather than encoded again from the decoded value. SchemaFor's
// validators are.
type encodedChecker interface {
	checkEncoded(raw json.RawMessage) error
}
