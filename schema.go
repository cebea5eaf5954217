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
	if err := v.check(raw); err != nil {
		return out, err
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, err
	}
	return out, nil
}

// check validates raw against the schema without decoding it into T.
func (v *schemaValidator[T]) check(raw json.RawMessage) error {
	if v.resolved == nil {
		return nil
	}
	var inst any
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&inst); err != nil {
		return fmt.Errorf("not valid JSON: %v", err)
	}
	return v.resolved.Validate(inst)
}

// encodedChecker is a Validator that does not transform what it accepts:
// JSON that a value of its type encodes to is checked as it is, with no
// decoding into the type and encoding again. SchemaFor's validators are.
type encodedChecker interface {
	check(raw json.RawMessage) error
}
