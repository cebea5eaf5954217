package helmrtype

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"
)

// Limits of questions and answers. Sizes of JSON are of plain JSON (no HTML
// escaping); sizes of strings are of their UTF-8 bytes.
const (
	// MaxQuestionBytes is the largest encoded JSON of one Question.
	MaxQuestionBytes = 256 << 10
	// MaxAnswerBytes is the largest encoded JSON of one answer, as posted and
	// in its canonical form.
	MaxAnswerBytes = 64 << 10
	// MaxOptions is the largest number of options of a choice question.
	MaxOptions = 100
	// MaxOptionIDBytes bounds an option's id.
	MaxOptionIDBytes = 128
	// MaxOptionLabelBytes bounds an option's label.
	MaxOptionLabelBytes = 256
	// MaxOptionDescriptionBytes bounds an option's description.
	MaxOptionDescriptionBytes = 2 << 10
	// MaxAnswerTextBytes bounds the free text of a choice answer.
	MaxAnswerTextBytes = 8 << 10
)

// Answer types of a question.
const (
	// AnswerText asks for free text: the answer is a JSON string.
	AnswerText = "text"
	// AnswerChoice asks to pick among options: the answer is a ChoiceAnswer.
	AnswerChoice = "choice"
)

// Ask statuses.
const (
	AskPending   = "pending"
	AskResponded = "responded"
	AskCancelled = "cancelled"
)

// Responder kinds.
const (
	ResponderUser   = "user"
	ResponderAPIKey = "api_key"
)

// Question is what turn.ask puts to a person: a prompt and the kind of
// answer it wants.
type Question struct {
	Prompt Content    `json:"prompt"`
	Answer AnswerSpec `json:"answer"`
}

// AnswerSpec says what answer a Question takes: free text, or a choice among
// options, optionally several and optionally with free text besides.
type AnswerSpec struct {
	// Type is AnswerText or AnswerChoice.
	Type string `json:"type"`
	// Options, Multiple and AllowText are for choice questions only.
	Options   []ChoiceOption `json:"options,omitempty"`
	Multiple  bool           `json:"multiple,omitempty"`
	AllowText bool           `json:"allow_text,omitempty"`
}

// ChoiceOption is one option of a choice question. Value is the JSON value
// an answer carries when the option is selected.
type ChoiceOption struct {
	ID          string          `json:"id"`
	Label       string          `json:"label"`
	Value       json.RawMessage `json:"value"`
	Description string          `json:"description,omitempty"`
}

// ChoiceAnswer is the canonical answer to a choice question: the selected
// options in the question's order, each with its value, and any free text.
type ChoiceAnswer struct {
	Selected []SelectedOption `json:"selected"`
	Text     string           `json:"text,omitempty"`
}

// SelectedOption is one selected option of a ChoiceAnswer.
type SelectedOption struct {
	ID    string          `json:"id"`
	Value json.RawMessage `json:"value"`
}

// Responder says who answered a question: Kind is ResponderUser or
// ResponderAPIKey, ID the user or API key.
type Responder struct {
	Kind string `json:"kind"`
	ID   string `json:"id,omitempty"`
	// Slack names the Slack user who answered in a Slack thread.
	Slack *SlackUserRef `json:"slack,omitempty"`
}

// AskState is the REST view of a question: the question, its status and,
// once responded, the canonical answer and who gave it.
type AskState struct {
	ID          string          `json:"id"`
	SessionID   string          `json:"session_id"`
	TurnID      string          `json:"turn_id"`
	Status      string          `json:"status"`
	Question    Question        `json:"question"`
	Answer      json.RawMessage `json:"answer,omitempty"`
	RespondedBy *Responder      `json:"responded_by,omitempty"`
	ResponseID  string          `json:"response_id,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	RespondedAt *time.Time      `json:"responded_at,omitempty"`
	CancelledAt *time.Time      `json:"cancelled_at,omitempty"`
}

// AskPage is one page of questions.
type AskPage struct {
	Asks       []AskState `json:"asks"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// AskRespond is the body of POST …/asks/{ask_id}/respond. ResponseID names
// the response, so that a retried post is recognised.
type AskRespond struct {
	Answer     json.RawMessage `json:"answer"`
	ResponseID string          `json:"response_id"`
}

// ParseQuestion decodes a Question strictly (exact field names, no unknown
// fields, nothing after it; an optional field given as null is absent) and
// checks it with Check.
func ParseQuestion(raw json.RawMessage) (*Question, error) {
	if len(raw) > MaxQuestionBytes {
		return nil, Errorf(CodeLimitExceeded, "the question is %d bytes of JSON; the limit is %d", len(raw), MaxQuestionBytes)
	}
	q, err := decodeQuestion(raw)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, Errorf(CodeInvalidRequest, "%v", err)
	}
	if err := q.Check(); err != nil {
		return nil, err
	}
	return q, nil
}

func decodeQuestion(raw []byte) (*Question, error) {
	m, err := strictObject(raw, "the question", "prompt", "answer")
	if err != nil {
		return nil, err
	}
	var q Question
	prompt, ok := m["prompt"]
	if !ok {
		return nil, fmt.Errorf("prompt is required")
	}
	if q.Prompt, err = ParseContent(prompt, MaxQuestionBytes, false); err != nil {
		var parts []json.RawMessage
		if json.Unmarshal(prompt, &parts) == nil && len(parts) > MaxContentParts {
			return nil, Errorf(CodeLimitExceeded, "prompt has %d parts; the limit is %d", len(parts), MaxContentParts)
		}
		return nil, fmt.Errorf("prompt: %v", err)
	}
	answer, ok := m["answer"]
	if !ok {
		return nil, fmt.Errorf("answer is required")
	}
	a, err := strictObject(answer, "answer", "type", "options", "multiple", "allow_text")
	if err != nil {
		return nil, err
	}
	if q.Answer.Type, err = stringField(a, "type", "answer.type", true); err != nil {
		return nil, err
	}
	if q.Answer.Multiple, err = boolField(a, "multiple", "answer.multiple"); err != nil {
		return nil, err
	}
	if q.Answer.AllowText, err = boolField(a, "allow_text", "answer.allow_text"); err != nil {
		return nil, err
	}
	if opts, ok := a["options"]; ok && !isNull(opts) {
		var items []json.RawMessage
		if err := json.Unmarshal(opts, &items); err != nil {
			return nil, fmt.Errorf("answer.options must be an array of options, not %s", jsonKind(opts))
		}
		if len(items) > MaxOptions {
			return nil, Errorf(CodeLimitExceeded, "answer.options has %d options; the limit is %d", len(items), MaxOptions)
		}
		q.Answer.Options = make([]ChoiceOption, len(items))
		for i, item := range items {
			name := fmt.Sprintf("answer.options[%d]", i)
			o, err := strictObject(item, name, "id", "label", "value", "description")
			if err != nil {
				return nil, err
			}
			opt := &q.Answer.Options[i]
			if opt.ID, err = stringField(o, "id", name+".id", true); err != nil {
				return nil, err
			}
			if opt.Label, err = stringField(o, "label", name+".label", true); err != nil {
				return nil, err
			}
			if opt.Description, err = stringField(o, "description", name+".description", false); err != nil {
				return nil, err
			}
			opt.Value = o["value"] // a missing value is reported by Check
		}
	}
	return &q, nil
}

// Check reports whether q is a well-formed question within the limits: a
// prompt of 1 to MaxContentParts text or json parts, and for a choice 1 to
// MaxOptions options with unique ids, labels and required values (any
// selection of them without text must fit MaxAnswerBytes). Shape problems are
// invalid_request, sizes limit_exceeded.
func (q *Question) Check() error {
	if len(q.Prompt) == 0 {
		return Errorf(CodeInvalidRequest, "prompt must have at least one part")
	}
	if len(q.Prompt) > MaxContentParts {
		return Errorf(CodeLimitExceeded, "prompt has %d parts; the limit is %d", len(q.Prompt), MaxContentParts)
	}
	for i, p := range q.Prompt {
		switch p.Type {
		case PartText:
		case PartJSON:
			if len(p.Value) > 0 {
				if err := CheckJSON(p.Value); err != nil {
					return Errorf(CodeInvalidRequest, "prompt[%d].value: %v", i, err)
				}
			}
		default:
			return Errorf(CodeInvalidRequest, "prompt[%d].type must be \"text\" or \"json\", not %q", i, p.Type)
		}
	}
	a := &q.Answer
	switch a.Type {
	case AnswerText:
		switch {
		case len(a.Options) > 0:
			return Errorf(CodeInvalidRequest, "answer.options is only for choice questions")
		case a.Multiple:
			return Errorf(CodeInvalidRequest, "answer.multiple is only for choice questions")
		case a.AllowText:
			return Errorf(CodeInvalidRequest, "answer.allow_text is only for choice questions")
		}
	case AnswerChoice:
		if err := a.checkOptions(); err != nil {
			return err
		}
	case "":
		return Errorf(CodeInvalidRequest, "answer.type is required: \"text\" or \"choice\"")
	default:
		return Errorf(CodeInvalidRequest, "answer.type must be \"text\" or \"choice\", not %q", a.Type)
	}
	b, err := marshalPlain(q)
	if err != nil {
		return Errorf(CodeInvalidRequest, "the question cannot be encoded: %v", err)
	}
	if len(b) > MaxQuestionBytes {
		return Errorf(CodeLimitExceeded, "the question is %d bytes of JSON; the limit is %d", len(b), MaxQuestionBytes)
	}
	if a.Type == AnswerChoice {
		return a.checkSelectionSize()
	}
	return nil
}

func (a *AnswerSpec) checkOptions() error {
	if len(a.Options) == 0 {
		return Errorf(CodeInvalidRequest, "answer.options must have at least one option")
	}
	if len(a.Options) > MaxOptions {
		return Errorf(CodeLimitExceeded, "answer.options has %d options; the limit is %d", len(a.Options), MaxOptions)
	}
	ids := make(map[string]int, len(a.Options))
	for i, o := range a.Options {
		name := fmt.Sprintf("answer.options[%d]", i)
		switch {
		case o.ID == "":
			return Errorf(CodeInvalidRequest, "%s.id must not be empty", name)
		case len(o.ID) > MaxOptionIDBytes:
			return Errorf(CodeLimitExceeded, "%s.id is %d bytes; the limit is %d", name, len(o.ID), MaxOptionIDBytes)
		case o.Label == "":
			return Errorf(CodeInvalidRequest, "%s.label must not be empty", name)
		case len(o.Label) > MaxOptionLabelBytes:
			return Errorf(CodeLimitExceeded, "%s.label is %d bytes; the limit is %d", name, len(o.Label), MaxOptionLabelBytes)
		case len(o.Description) > MaxOptionDescriptionBytes:
			return Errorf(CodeLimitExceeded, "%s.description is %d bytes; the limit is %d", name, len(o.Description), MaxOptionDescriptionBytes)
		case len(o.Value) == 0:
			return Errorf(CodeInvalidRequest, "%s.value is required: the JSON value an answer carries when the option is selected (null is allowed)", name)
		}
		if j, dup := ids[o.ID]; dup {
			return Errorf(CodeInvalidRequest, "%s.id %q is also the id of answer.options[%d]", name, o.ID, j)
		}
		ids[o.ID] = i
		if err := CheckJSON(o.Value); err != nil {
			return Errorf(CodeInvalidRequest, "%s.value: %v", name, err)
		}
	}
	return nil
}

// checkSelectionSize makes sure that every answer selecting options without
// text fits MaxAnswerBytes: all options when several may be selected, each
// option alone otherwise.
func (a *AnswerSpec) checkSelectionSize() error {
	if a.Multiple {
		sel := make([]SelectedOption, len(a.Options))
		for i, o := range a.Options {
			sel[i] = SelectedOption{ID: o.ID, Value: o.Value}
		}
		b, err := marshalPlain(ChoiceAnswer{Selected: sel})
		if err == nil && len(b) > MaxAnswerBytes {
			return Errorf(CodeLimitExceeded, "answer.options: an answer selecting every option would be %d bytes of JSON; the limit of an answer is %d", len(b), MaxAnswerBytes)
		}
		return nil
	}
	for i, o := range a.Options {
		b, err := marshalPlain(ChoiceAnswer{Selected: []SelectedOption{{ID: o.ID, Value: o.Value}}})
		if err == nil && len(b) > MaxAnswerBytes {
			return Errorf(CodeLimitExceeded, "answer.options[%d]: an answer selecting it would be %d bytes of JSON; the limit of an answer is %d", i, len(b), MaxAnswerBytes)
		}
	}
	return nil
}

// CheckAnswer checks an answer to q (which must have passed Check) and
// returns it in canonical form: a non-empty JSON string for a text question; for
// a choice, a ChoiceAnswer from {"selected": [id or {"id", "value"}…], "text"}
// with the options in declared order, each with its value. Answers that do not
// fit the question are answer_invalid, sizes limit_exceeded.
func (q *Question) CheckAnswer(answer json.RawMessage) (json.RawMessage, error) {
	if len(answer) > MaxAnswerBytes {
		return nil, Errorf(CodeLimitExceeded, "the answer is %d bytes of JSON; the limit is %d", len(answer), MaxAnswerBytes)
	}
	var out []byte
	var err error
	switch q.Answer.Type {
	case AnswerText:
		out, err = checkTextAnswer(answer)
	case AnswerChoice:
		out, err = q.Answer.checkChoiceAnswer(answer)
	default:
		return nil, Errorf(CodeInvalidRequest, "the question's answer.type %q is not \"text\" or \"choice\"", q.Answer.Type)
	}
	if err != nil {
		return nil, err
	}
	if len(out) > MaxAnswerBytes {
		return nil, Errorf(CodeLimitExceeded, "the answer, with the selected options' values, is %d bytes of JSON; the limit is %d", len(out), MaxAnswerBytes)
	}
	return out, nil
}

func checkTextAnswer(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, Errorf(CodeAnswerInvalid, "the answer must be a JSON string: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, Errorf(CodeAnswerInvalid, "the answer must be one JSON string, with nothing after it")
	}
	s, ok := v.(string)
	if !ok {
		return nil, Errorf(CodeAnswerInvalid, "the answer to a text question is a JSON string, not %s", jsonKind(raw))
	}
	if s == "" {
		return nil, Errorf(CodeAnswerInvalid, "the answer must not be an empty string")
	}
	b, err := marshalPlain(s)
	if err != nil {
		return nil, Errorf(CodeAnswerInvalid, "the answer cannot be encoded: %v", err)
	}
	return b, nil
}

func (a *AnswerSpec) checkChoiceAnswer(raw []byte) ([]byte, error) {
	invalid := func(err error) error { return Errorf(CodeAnswerInvalid, "%v", err) }
	m, err := strictObject(raw, "the answer to a choice question", "selected", "text")
	if err != nil {
		return nil, invalid(err)
	}
	index := make(map[string]int, len(a.Options))
	for i, o := range a.Options {
		if _, dup := index[o.ID]; !dup {
			index[o.ID] = i
		}
	}
	chosen := make([]bool, len(a.Options))
	count := 0
	if sel, ok := m["selected"]; ok && !isNull(sel) {
		var items []json.RawMessage
		if err := json.Unmarshal(sel, &items); err != nil {
			return nil, Errorf(CodeAnswerInvalid, "answer.selected must be an array of option ids, not %s", jsonKind(sel))
		}
		for i, item := range items {
			name := fmt.Sprintf("answer.selected[%d]", i)
			item = bytes.TrimSpace(item)
			var id string
			var value json.RawMessage
			switch {
			case len(item) > 0 && item[0] == '"':
				if err := json.Unmarshal(item, &id); err != nil {
					return nil, Errorf(CodeAnswerInvalid, "%s: %v", name, err)
				}
			case len(item) > 0 && item[0] == '{':
				o, err := strictObject(item, name, "id", "value")
				if err != nil {
					return nil, invalid(err)
				}
				if id, err = stringField(o, "id", name+".id", true); err != nil {
					return nil, invalid(err)
				}
				value = o["value"]
			default:
				return nil, Errorf(CodeAnswerInvalid, "%s must be an option id or an object {\"id\": …}, not %s", name, jsonKind(item))
			}
			k, ok := index[id]
			if !ok {
				return nil, Errorf(CodeAnswerInvalid, "%s: the question has no option with the id %q", name, id)
			}
			if chosen[k] {
				return nil, Errorf(CodeAnswerInvalid, "%s: option %q is selected twice", name, id)
			}
			if value != nil {
				given, err := CanonicalJSON(value)
				if err != nil {
					return nil, Errorf(CodeAnswerInvalid, "%s.value: %v", name, err)
				}
				want, err := CanonicalJSON(a.Options[k].Value)
				if err != nil || !bytes.Equal(given, want) {
					return nil, Errorf(CodeAnswerInvalid, "%s.value is not the value of option %q; give the id alone", name, id)
				}
			}
			chosen[k] = true
			count++
		}
	}
	if count > 1 && !a.Multiple {
		return nil, Errorf(CodeAnswerInvalid, "answer.selected has %d options; this question takes one", count)
	}
	text, err := stringField(m, "text", "answer.text", false)
	if err != nil {
		return nil, invalid(err)
	}
	if text != "" && !a.AllowText {
		return nil, Errorf(CodeAnswerInvalid, "answer.text is not allowed: this question takes no free text")
	}
	if len(text) > MaxAnswerTextBytes {
		return nil, Errorf(CodeLimitExceeded, "answer.text is %d bytes; the limit is %d", len(text), MaxAnswerTextBytes)
	}
	if count == 0 && text == "" {
		if a.AllowText {
			return nil, Errorf(CodeAnswerInvalid, "the answer must select an option or give text")
		}
		return nil, Errorf(CodeAnswerInvalid, "the answer must select an option")
	}
	out := ChoiceAnswer{Selected: make([]SelectedOption, 0, count), Text: text}
	for i, o := range a.Options {
		if chosen[i] {
			out.Selected = append(out.Selected, SelectedOption{ID: o.ID, Value: o.Value})
		}
	}
	b, err := marshalPlain(out)
	if err != nil {
		return nil, Errorf(CodeInvalidRequest, "the answer cannot be encoded: %v", err)
	}
	return b, nil
}

// strictObject decodes raw as one JSON object whose keys are all among
// fields, matched exactly (not case-insensitively, as encoding/json does).
func strictObject(raw []byte, name string, fields ...string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field == "" {
			return nil, fmt.Errorf("%s must be a JSON object, not %s", name, ute.Value)
		}
		return nil, fmt.Errorf("%s must be a JSON object: %v", name, err)
	}
	if m == nil {
		return nil, fmt.Errorf("%s must be a JSON object, not null", name)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s must be one JSON object, with nothing after it", name)
	}
	var unknown []string
	for k := range m {
		known := false
		for _, f := range fields {
			known = known || k == f
		}
		if !known {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("%s has an unknown field %q", name, unknown[0])
	}
	return m, nil
}

// stringField reads m[key] as a string; an optional field may be absent or null.
func stringField(m map[string]json.RawMessage, key, name string, required bool) (string, error) {
	v, ok := m[key]
	if !ok {
		if required {
			return "", fmt.Errorf("%s is required", name)
		}
		return "", nil
	}
	if isNull(v) {
		if required {
			return "", fmt.Errorf("%s must be a string, not null", name)
		}
		return "", nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("%s must be a string, not %s", name, jsonKind(v))
	}
	return s, nil
}

// boolField reads an optional m[key] as a boolean; absent or null is false.
func boolField(m map[string]json.RawMessage, key, name string) (bool, error) {
	v, ok := m[key]
	if !ok || isNull(v) {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		return false, fmt.Errorf("%s must be true or false, not %s", name, jsonKind(v))
	}
	return b, nil
}

func isNull(v []byte) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

// jsonKind names the kind of the JSON value raw starts with.
func jsonKind(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return "a number"
	}
	return "invalid JSON"
}
