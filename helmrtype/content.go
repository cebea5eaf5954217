package helmrtype

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Limits from the specification's Content table. The server enforces them;
// the SDK checks them early so that authors get good errors.
const (
	// MaxContentBytes is the largest encoded JSON of one Content value or question.
	MaxContentBytes = 256 << 10
	// MaxContentParts is the largest number of parts in one Content value.
	MaxContentParts = 64
	// MaxTurnOutputBytes is the cumulative output plus questions budget of one Turn.
	MaxTurnOutputBytes = 8 << 20
	// MaxResponseBytes is the allowance of a Turn's response, separate from output.
	MaxResponseBytes = 256 << 10
	// MaxResultBytes bounds a Turn's machine result.
	MaxResultBytes = 1 << 20
	// MaxInputBytes bounds a Turn's input or a message's content.
	MaxInputBytes = 256 << 10
)

// Part types.
const (
	PartText = "text"
	PartJSON = "json"
)

// ContentPart is one part of Content: {"type":"text","text":…} or
// {"type":"json","value":…}.
type ContentPart struct {
	Type  string          `json:"type"`
	Text  string          `json:"text,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// MarshalJSON writes a text part with its text even when empty, and a JSON
// part with its value.
func (p ContentPart) MarshalJSON() ([]byte, error) {
	switch p.Type {
	case PartText:
		return marshalPlain(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{p.Type, p.Text})
	case PartJSON:
		v := p.Value
		if len(v) == 0 {
			v = json.RawMessage("null")
		}
		return marshalPlain(struct {
			Type  string          `json:"type"`
			Value json.RawMessage `json:"value"`
		}{p.Type, v})
	}
	return nil, fmt.Errorf("content part type %q: want text or json", p.Type)
}

// Content is an ordered list of text and JSON parts.
type Content []ContentPart

// InputContent is conversational input: text parts only.
type InputContent = Content

// Text returns a Content with one text part.
func Text(s string) Content { return Content{{Type: PartText, Text: s}} }

// PlainText concatenates the text parts of c.
func (c Content) PlainText() string {
	var b bytes.Buffer
	for _, p := range c {
		if p.Type == PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// ParseContent decodes and checks a Content value: a JSON array of parts,
// each text (with a string "text") or json (with a "value"), at most
// MaxContentParts parts and maxBytes encoded bytes. With textOnly, JSON parts
// are refused (the InputContent rule).
func ParseContent(raw json.RawMessage, maxBytes int, textOnly bool) (Content, error) {
	if len(raw) > maxBytes {
		return nil, fmt.Errorf("content is %d bytes of JSON; the limit is %d", len(raw), maxBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var parts []map[string]json.RawMessage
	if err := dec.Decode(&parts); err != nil || parts == nil {
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) || err == nil {
			return nil, fmt.Errorf("content must be an array of parts, not null")
		}
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field == "" {
			return nil, fmt.Errorf("content must be an array of parts, not %s", ute.Value)
		}
		return nil, fmt.Errorf("content must be an array of parts: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("content must be one array of parts, with nothing after it")
	}
	if len(parts) > MaxContentParts {
		return nil, fmt.Errorf("content has %d parts; the limit is %d", len(parts), MaxContentParts)
	}
	out := make(Content, 0, len(parts))
	for i, p := range parts {
		var typ string
		if err := json.Unmarshal(p["type"], &typ); err != nil {
			return nil, fmt.Errorf("part %d: type must be \"text\" or \"json\"", i)
		}
		switch typ {
		case PartText:
			if len(p) != 2 {
				return nil, fmt.Errorf("part %d: a text part has exactly the fields type and text", i)
			}
			var s string
			if err := json.Unmarshal(p["text"], &s); err != nil || p["text"] == nil || bytes.Equal(p["text"], []byte("null")) {
				return nil, fmt.Errorf("part %d: text must be a string", i)
			}
			out = append(out, ContentPart{Type: PartText, Text: s})
		case PartJSON:
			if textOnly {
				return nil, fmt.Errorf("part %d: input content takes text parts only", i)
			}
			v, ok := p["value"]
			if !ok || len(p) != 2 {
				return nil, fmt.Errorf("part %d: a json part has exactly the fields type and value", i)
			}
			out = append(out, ContentPart{Type: PartJSON, Value: v})
		default:
			return nil, fmt.Errorf("part %d: type must be \"text\" or \"json\", not %q", i, typ)
		}
	}
	return out, nil
}

// marshalPlain encodes v as JSON without HTML escaping: limits count the
// bytes of plain JSON (as JSON.stringify writes it), not Go's \u003c forms.
func marshalPlain(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// EncodedSize returns the length of c encoded as plain JSON.
func (c Content) EncodedSize() int {
	b, err := marshalPlain(c)
	if err != nil {
		return 0
	}
	return len(b)
}

// CheckJSON reports whether raw is valid JSON whose numbers are all finite
// (representable as float64), as inputs, results and JSON parts must be.
func CheckJSON(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("not valid JSON: %v", err)
	}
	if dec.More() {
		return fmt.Errorf("not valid JSON: data after the value")
	}
	return checkFinite(v)
}

func checkFinite(v any) error {
	switch x := v.(type) {
	case json.Number:
		if _, err := strconv.ParseFloat(string(x), 64); err != nil {
			return fmt.Errorf("the number %s is not finite", x)
		}
	case []any:
		for _, e := range x {
			if err := checkFinite(e); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, e := range x {
			if err := checkFinite(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// Check reports whether c is valid Content within one value's limits: a
// part of another type or an invalid JSON value is output_invalid, too many
// parts or bytes is limit_exceeded.
func (c Content) Check() error {
	if len(c) > MaxContentParts {
		return Errorf(CodeLimitExceeded, "content has %d parts; the limit is %d", len(c), MaxContentParts)
	}
	for i, p := range c {
		if p.Type != PartText && p.Type != PartJSON {
			return Errorf(CodeOutputInvalid, "part %d: type must be \"text\" or \"json\", not %q", i, p.Type)
		}
		if p.Type == PartJSON && len(p.Value) > 0 {
			if err := CheckJSON(p.Value); err != nil {
				return Errorf(CodeOutputInvalid, "part %d: value: %v", i, err)
			}
		}
	}
	if n := c.EncodedSize(); n > MaxContentBytes {
		return Errorf(CodeLimitExceeded, "content is %d bytes of JSON; the limit is %d", n, MaxContentBytes)
	}
	return nil
}
