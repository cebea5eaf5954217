package helmrtype

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Answer kinds of a Question.
const (
	AnswerText   = "text"
	AnswerChoice = "choice"
)

// Question states.
const (
	AskPending   = "pending"
	AskResponded = "responded"
	AskCancelled = "cancelled"
)

// Limits of questions and answers.
const (
	MaxQuestionBytes          = 256 << 10
	MaxAnswerBytes            = 64 << 10
	MaxOptions                = 100
	MaxOptionIDBytes          = 128
	MaxOptionLabelBytes       = 256
	MaxOptionDescriptionBytes = 2 << 10
	MaxAnswerTextBytes        = 8 << 10
)

// Question is what a Turn asks a person: a prompt and the kind of answer.
type Question struct {
	Prompt Content    `json:"prompt"`
	Answer AnswerSpec `json:"answer"`
}

// AnswerSpec is the kind of answer a Question takes: free text, or a choice
// among options (several with Multiple, plus free text with AllowText).
type AnswerSpec struct {
	Type      string         `json:"type"`
	Options   []ChoiceOption `json:"options,omitempty"`
	Multiple  bool           `json:"multiple,omitempty"`
	AllowText bool           `json:"allow_text,omitempty"`
}

// ChoiceOption is one option of a choice Question.
type ChoiceOption struct {
	ID          string          `json:"id"`
	Label       string          `json:"label"`
	Value       json.RawMessage `json:"value"`
	Description string          `json:"description,omitempty"`
}

// ChoiceAnswer is the answer to a choice Question: the selected options in
// their declared order, and free text when the Question allows it.
type ChoiceAnswer struct {
	Selected []SelectedOption `json:"selected"`
	Text     string           `json:"text,omitempty"`
}

// SelectedOption is one selected option of a ChoiceAnswer.
type SelectedOption struct {
	ID    string          `json:"id"`
	Value json.RawMessage `json:"value"`
}

// Responder is who answered a Question: kind "user" or "api_key", and its ID.
type Responder struct {
	Kind string `json:"kind"`
	ID   string `json:"id,omitempty"`
}

// AskState is a question as the REST API shows it.
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

// AskPage is a page of a Turn's questions.
type AskPage struct {
	Asks       []AskState `json:"asks"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// AskRespond is the body of POST …/asks/{ask_id}/respond. ResponseID makes
// the call safe to retry.
type AskRespond struct {
	Answer     json.RawMessage `json:"answer"`
	ResponseID string          `json:"response_id"`
}

// ParseQuestion decodes a Question strictly and checks it.
func ParseQuestion(raw json.RawMessage) (*Question, error) {
	var q Question
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&q); err != nil {
		return nil, Errorf(CodeInvalidRequest, "question: %v", err)
	}
	if d.More() {
		return nil, Errorf(CodeInvalidRequest, "question: trailing data after the JSON value")
	}
	if err := q.Check(); err != nil {
		return nil, err
	}
	return &q, nil
}

// Check enforces the rules and limits of a Question.
func (q *Question) Check() error {
	if len(q.Prompt) == 0 {
		return Errorf(CodeInvalidRequest, "question.prompt is empty: ask something")
	}
	if err := q.Prompt.Check(); err != nil {
		return err
	}
	a := &q.Answer
	switch a.Type {
	case AnswerText:
		if len(a.Options) > 0 || a.Multiple || a.AllowText {
			return Errorf(CodeInvalidRequest, "question.answer: a text answer takes no options, multiple or allow_text")
		}
	case AnswerChoice:
		if len(a.Options) == 0 {
			return Errorf(CodeInvalidRequest, "question.answer.options: a choice needs at least one option")
		}
		if len(a.Options) > MaxOptions {
			return Errorf(CodeLimitExceeded, "question.answer.options has %d options; the limit is %d", len(a.Options), MaxOptions)
		}
		seen := map[string]bool{}
		for i, o := range a.Options {
			f := fmt.Sprintf("question.answer.options[%d]", i)
			switch {
			case o.ID == "":
				return Errorf(CodeInvalidRequest, "%s.id is empty", f)
			case len(o.ID) > MaxOptionIDBytes:
				return Errorf(CodeLimitExceeded, "%s.id is %d bytes; the limit is %d", f, len(o.ID), MaxOptionIDBytes)
			case seen[o.ID]:
				return Errorf(CodeInvalidRequest, "%s.id %q is used twice", f, o.ID)
			case o.Label == "":
				return Errorf(CodeInvalidRequest, "%s.label is empty", f)
			case len(o.Label) > MaxOptionLabelBytes:
				return Errorf(CodeLimitExceeded, "%s.label is %d bytes; the limit is %d", f, len(o.Label), MaxOptionLabelBytes)
			case len(o.Description) > MaxOptionDescriptionBytes:
				return Errorf(CodeLimitExceeded, "%s.description is %d bytes; the limit is %d", f, len(o.Description), MaxOptionDescriptionBytes)
			case len(o.Value) == 0:
				return Errorf(CodeInvalidRequest, "%s.value is missing", f)
			}
			if err := CheckJSON(o.Value); err != nil {
				return Errorf(CodeInvalidRequest, "%s.value: %v", f, err)
			}
			seen[o.ID] = true
		}
	default:
		return Errorf(CodeInvalidRequest, "question.answer.type %q: want text or choice", a.Type)
	}
	b, err := marshalPlain(q)
	if err != nil {
		return Errorf(CodeInvalidRequest, "question: %v", err)
	}
	if len(b) > MaxQuestionBytes {
		return Errorf(CodeLimitExceeded, "the question is %d bytes of JSON; the limit is %d", len(b), MaxQuestionBytes)
	}
	return nil
}

// CheckAnswer checks what a person answers and returns the canonical
// answer: a JSON string for a text Question; for a choice, a ChoiceAnswer
// with the selected options in declared order, with their values. A
// selection may name an option by its ID or as {"id": …}.
func (q *Question) CheckAnswer(answer json.RawMessage) (json.RawMessage, error) {
	if len(answer) > MaxAnswerBytes {
		return nil, Errorf(CodeLimitExceeded, "the answer is %d bytes; the limit is %d", len(answer), MaxAnswerBytes)
	}
	if len(bytes.TrimSpace(answer)) == 0 {
		return nil, Errorf(CodeAnswerInvalid, "answer is missing")
	}
	if q.Answer.Type == AnswerText {
		var s string
		if err := json.Unmarshal(answer, &s); err != nil {
			return nil, Errorf(CodeAnswerInvalid, "this question takes a text answer: a JSON string")
		}
		if s == "" {
			return nil, Errorf(CodeAnswerInvalid, "the answer is empty")
		}
		return marshalPlain(s)
	}
	var in struct {
		Selected []json.RawMessage `json:"selected"`
		Text     string            `json:"text"`
	}
	d := json.NewDecoder(bytes.NewReader(answer))
	d.DisallowUnknownFields()
	if err := d.Decode(&in); err != nil {
		return nil, Errorf(CodeAnswerInvalid, "this question takes a choice: {\"selected\": [option ids], \"text\": …}: %v", err)
	}
	picked := map[string]bool{}
	for i, raw := range in.Selected {
		var id string
		var val json.RawMessage
		if json.Unmarshal(raw, &id) != nil {
			var o struct {
				ID    string          `json:"id"`
				Value json.RawMessage `json:"value"`
			}
			if err := json.Unmarshal(raw, &o); err != nil || o.ID == "" {
				return nil, Errorf(CodeAnswerInvalid, "selected[%d]: want an option id or {\"id\": …}", i)
			}
			id, val = o.ID, o.Value
		}
		opt := q.option(id)
		if opt == nil {
			return nil, Errorf(CodeAnswerInvalid, "selected[%d]: no option %q", i, id)
		}
		if picked[id] {
			return nil, Errorf(CodeAnswerInvalid, "selected[%d]: option %q is selected twice", i, id)
		}
		if val != nil && !sameJSON(val, opt.Value) {
			return nil, Errorf(CodeAnswerInvalid, "selected[%d]: the value differs from option %q's", i, id)
		}
		picked[id] = true
	}
	if len(picked) > 1 && !q.Answer.Multiple {
		return nil, Errorf(CodeAnswerInvalid, "this question takes one selection, not %d", len(picked))
	}
	if in.Text != "" && !q.Answer.AllowText {
		return nil, Errorf(CodeAnswerInvalid, "this question takes no free text")
	}
	if len(in.Text) > MaxAnswerTextBytes {
		return nil, Errorf(CodeLimitExceeded, "the answer's text is %d bytes; the limit is %d", len(in.Text), MaxAnswerTextBytes)
	}
	if len(picked) == 0 && in.Text == "" {
		return nil, Errorf(CodeAnswerInvalid, "select at least one option or give text")
	}
	out := ChoiceAnswer{Selected: []SelectedOption{}, Text: in.Text}
	for _, o := range q.Answer.Options {
		if picked[o.ID] {
			out.Selected = append(out.Selected, SelectedOption{ID: o.ID, Value: o.Value})
		}
	}
	return marshalPlain(out)
}

func (q *Question) option(id string) *ChoiceOption {
	for i := range q.Answer.Options {
		if q.Answer.Options[i].ID == id {
			return &q.Answer.Options[i]
		}
	}
	return nil
}

// sameJSON reports whether two JSON values are equal after decoding.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&x) != nil || db.Decode(&y) != nil {
		return false
	}
	bx, _ := marshalPlain(x)
	by, _ := marshalPlain(y)
	return bytes.Equal(bx, by)
}
