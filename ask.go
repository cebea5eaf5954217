package helmr

import (
	"context"
	"encoding/json"

	"github.com/helmr-go/helmr/helmrtype"
)

// Question is what a Turn asks a person: a prompt and the kind of answer
// (TextAnswer or a Choice).
type Question = helmrtype.Question

// ChoiceOption is one option of a choice question.
type ChoiceOption = helmrtype.ChoiceOption

// Responder is who answered: Kind "user" or "api_key", and its ID.
type Responder = helmrtype.Responder

// TextAnswer is the answer spec of a question answered with free text.
func TextAnswer() helmrtype.AnswerSpec { return helmrtype.AnswerSpec{Type: helmrtype.AnswerText} }

// Choice is the answer spec of a question answered by picking options:
// one, or several with multiple; allowText also takes free text.
func Choice(multiple, allowText bool, options ...ChoiceOption) helmrtype.AnswerSpec {
	return helmrtype.AnswerSpec{Type: helmrtype.AnswerChoice, Options: options, Multiple: multiple, AllowText: allowText}
}

// Option is a ChoiceOption whose value is v encoded as JSON.
func Option(id, label string, v any) ChoiceOption {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte("null")
	}
	return ChoiceOption{ID: id, Label: label, Value: b}
}

// AskAnswer is a person's answer. For a text question Text is set; for a
// choice, Selected (in declared order) and Text when free text was given.
type AskAnswer struct {
	Text        string
	Selected    []helmrtype.SelectedOption
	Raw         json.RawMessage
	RespondedBy Responder
}

// AskOptions tune a question's wait.
type AskOptions struct {
	// IdleTimeout is how long the process stays hot while waiting (1ms–1h;
	// default the Agent's, else 30s). After it the process may be
	// suspended; the answer still arrives.
	IdleTimeout string
}

// Ask asks a person q and waits for the answer; the question and its answer
// are durable. Only root Sessions may ask. The wait ends with the Turn's
// ctx (interrupt, deadline), and the pending question is then withdrawn.
func (t *Turn[I]) Ask(ctx context.Context, q Question, opts ...AskOptions) (*AskAnswer, error) {
	var o AskOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	out, err := t.rt.Ask(ctx, q, o.IdleTimeout)
	if err != nil {
		return nil, err
	}
	if out.Status != helmrtype.OutcomeResolved {
		return nil, out.Error
	}
	a := &AskAnswer{Raw: out.Value}
	if out.RespondedBy != nil {
		a.RespondedBy = *out.RespondedBy
	}
	if q.Answer.Type == helmrtype.AnswerText {
		json.Unmarshal(out.Value, &a.Text)
		return a, nil
	}
	var c helmrtype.ChoiceAnswer
	json.Unmarshal(out.Value, &c)
	a.Selected, a.Text = c.Selected, c.Text
	return a, nil
}
