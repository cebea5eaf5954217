package helmrtype

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// opt returns an option with the id, a label and the JSON value.
func opt(id, value string) ChoiceOption {
	return ChoiceOption{ID: id, Label: "Label " + id, Value: json.RawMessage(value)}
}

func choiceQuestion(multiple, allowText bool, opts ...ChoiceOption) *Question {
	return &Question{Prompt: Text("Pick one"), Answer: AnswerSpec{Type: AnswerChoice, Options: opts, Multiple: multiple, AllowText: allowText}}
}

func textQuestion() *Question {
	return &Question{Prompt: Text("Why?"), Answer: AnswerSpec{Type: AnswerText}}
}

// nOptions returns n options with ids o0, o1, … and small values.
func nOptions(n int) []ChoiceOption {
	opts := make([]ChoiceOption, n)
	for i := range opts {
		opts[i] = opt(fmt.Sprintf("o%d", i), fmt.Sprint(i))
	}
	return opts
}

func wantCode(t *testing.T, what string, err error, code Code, msg string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %s", what, code)
		return
	}
	if got := CodeOf(err); got != code {
		t.Errorf("%s: error %v has code %s, want %s", what, err, got, code)
	}
	if msg != "" && !strings.Contains(err.Error(), msg) {
		t.Errorf("%s: error %q does not say %q", what, err, msg)
	}
}

func TestParseQuestionValid(t *testing.T) {
	for _, c := range []struct {
		name, raw, want string
	}{
		{"text", `{"prompt":[{"type":"text","text":"Why?"}],"answer":{"type":"text"}}`,
			`{"prompt":[{"type":"text","text":"Why?"}],"answer":{"type":"text"}}`},
		{"text, falsy choice fields", `{"prompt":[{"type":"text","text":"Why?"}],"answer":{"type":"text","options":[],"multiple":false,"allow_text":null}}`,
			`{"prompt":[{"type":"text","text":"Why?"}],"answer":{"type":"text"}}`},
		{"field order and space", " {\"answer\" : {\"type\":\"text\"},\n\"prompt\":[{\"text\":\"a\",\"type\":\"text\"}]} \n",
			`{"prompt":[{"type":"text","text":"a"}],"answer":{"type":"text"}}`},
		{"json prompt part", `{"prompt":[{"type":"text","text":"Deploy?"},{"type":"json","value":{"env": "prod"}}],"answer":{"type":"text"}}`,
			`{"prompt":[{"type":"text","text":"Deploy?"},{"type":"json","value":{"env":"prod"}}],"answer":{"type":"text"}}`},
		{"choice", `{"prompt":[{"type":"text","text":"Deploy?"}],"answer":{"type":"choice","options":[
			{"id":"yes","label":"Yes","value":true,"description":"Go ahead"},
			{"id":"no","label":"No","value":false},
			{"id":"later","label":"<Later>","value":{"delay": "1h"},"description":null},
			{"id":"none","label":"None","value":null}],"multiple":true,"allow_text":true}}`,
			`{"prompt":[{"type":"text","text":"Deploy?"}],"answer":{"type":"choice","options":[` +
				`{"id":"yes","label":"Yes","value":true,"description":"Go ahead"},` +
				`{"id":"no","label":"No","value":false},` +
				`{"id":"later","label":"<Later>","value":{"delay":"1h"}},` +
				`{"id":"none","label":"None","value":null}],"multiple":true,"allow_text":true}}`},
		{"choice, options null fields", `{"prompt":[{"type":"text","text":"?"}],"answer":{"type":"choice","multiple":null,"options":[{"id":"a","label":"A","value":1}]}}`,
			`{"prompt":[{"type":"text","text":"?"}],"answer":{"type":"choice","options":[{"id":"a","label":"A","value":1}]}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, err := ParseQuestion(json.RawMessage(c.raw))
			if err != nil {
				t.Fatalf("ParseQuestion: %v", err)
			}
			b, err := marshalPlain(q)
			if err != nil || string(b) != c.want {
				t.Errorf("marshal = %s, %v\nwant %s", b, err, c.want)
			}
		})
	}
}

func TestParseQuestionRefused(t *testing.T) {
	const p = `"prompt":[{"type":"text","text":"?"}]`
	for _, c := range []struct {
		name, raw string
		code      Code
		msg       string
	}{
		{"empty", ``, CodeInvalidRequest, "must be a JSON object"},
		{"null", `null`, CodeInvalidRequest, "not null"},
		{"array", `[]`, CodeInvalidRequest, "not array"},
		{"string", `"q"`, CodeInvalidRequest, "must be a JSON object"},
		{"truncated", `{` + p, CodeInvalidRequest, "must be a JSON object"},
		{"trailing data", `{` + p + `,"answer":{"type":"text"}} {}`, CodeInvalidRequest, "nothing after it"},
		{"trailing garbage", `{` + p + `,"answer":{"type":"text"}}x`, CodeInvalidRequest, "nothing after it"},
		{"unknown field", `{` + p + `,"answer":{"type":"text"},"title":"x"}`, CodeInvalidRequest, `unknown field "title"`},
		{"field in capitals", `{"Prompt":[{"type":"text","text":"?"}],"answer":{"type":"text"}}`, CodeInvalidRequest, `unknown field "Prompt"`},
		{"no prompt", `{"answer":{"type":"text"}}`, CodeInvalidRequest, "prompt is required"},
		{"null prompt", `{"prompt":null,"answer":{"type":"text"}}`, CodeInvalidRequest, "prompt: "},
		{"string prompt", `{"prompt":"Why?","answer":{"type":"text"}}`, CodeInvalidRequest, "prompt: "},
		{"empty prompt", `{"prompt":[],"answer":{"type":"text"}}`, CodeInvalidRequest, "at least one part"},
		{"bad prompt part", `{"prompt":[{"type":"text","text":"?","x":1}],"answer":{"type":"text"}}`, CodeInvalidRequest, "prompt: part 0"},
		{"image prompt part", `{"prompt":[{"type":"image","url":"x"}],"answer":{"type":"text"}}`, CodeInvalidRequest, "prompt: part 0"},
		{"non-finite prompt value", `{"prompt":[{"type":"json","value":1e400}],"answer":{"type":"text"}}`, CodeInvalidRequest, "prompt[0].value"},
		{"too many prompt parts", `{"prompt":[` + strings.Repeat(`{"type":"text","text":"x"},`, MaxContentParts) + `{"type":"text","text":"x"}],"answer":{"type":"text"}}`,
			CodeLimitExceeded, "prompt has 65 parts; the limit is 64"},
		{"no answer", `{` + p + `}`, CodeInvalidRequest, "answer is required"},
		{"null answer", `{` + p + `,"answer":null}`, CodeInvalidRequest, "answer must be a JSON object"},
		{"answer string", `{` + p + `,"answer":"text"}`, CodeInvalidRequest, "answer must be a JSON object"},
		{"no type", `{` + p + `,"answer":{}}`, CodeInvalidRequest, "answer.type is required"},
		{"null type", `{` + p + `,"answer":{"type":null}}`, CodeInvalidRequest, "answer.type must be a string"},
		{"empty type", `{` + p + `,"answer":{"type":""}}`, CodeInvalidRequest, "answer.type is required"},
		{"unknown type", `{` + p + `,"answer":{"type":"number"}}`, CodeInvalidRequest, `not "number"`},
		{"type in capitals", `{` + p + `,"answer":{"type":"TEXT"}}`, CodeInvalidRequest, `not "TEXT"`},
		{"unknown answer field", `{` + p + `,"answer":{"type":"text","allowText":true}}`, CodeInvalidRequest, `answer has an unknown field "allowText"`},
		{"text with options", `{` + p + `,"answer":{"type":"text","options":[{"id":"a","label":"A","value":1}]}}`, CodeInvalidRequest, "answer.options is only for choice"},
		{"text with multiple", `{` + p + `,"answer":{"type":"text","multiple":true}}`, CodeInvalidRequest, "answer.multiple is only for choice"},
		{"text with allow_text", `{` + p + `,"answer":{"type":"text","allow_text":true}}`, CodeInvalidRequest, "answer.allow_text is only for choice"},
		{"multiple not bool", `{` + p + `,"answer":{"type":"choice","multiple":"yes","options":[{"id":"a","label":"A","value":1}]}}`, CodeInvalidRequest, "answer.multiple must be true or false, not a string"},
		{"allow_text not bool", `{` + p + `,"answer":{"type":"choice","allow_text":1,"options":[{"id":"a","label":"A","value":1}]}}`, CodeInvalidRequest, "answer.allow_text must be true or false, not a number"},
		{"choice without options", `{` + p + `,"answer":{"type":"choice"}}`, CodeInvalidRequest, "at least one option"},
		{"choice with no options", `{` + p + `,"answer":{"type":"choice","options":[]}}`, CodeInvalidRequest, "at least one option"},
		{"options not array", `{` + p + `,"answer":{"type":"choice","options":{"a":1}}}`, CodeInvalidRequest, "answer.options must be an array of options, not an object"},
		{"option not object", `{` + p + `,"answer":{"type":"choice","options":["a"]}}`, CodeInvalidRequest, "answer.options[0] must be a JSON object"},
		{"option unknown field", `{` + p + `,"answer":{"type":"choice","options":[{"id":"a","label":"A","value":1,"hint":"h"}]}}`, CodeInvalidRequest, `answer.options[0] has an unknown field "hint"`},
		{"option without id", `{` + p + `,"answer":{"type":"choice","options":[{"label":"A","value":1}]}}`, CodeInvalidRequest, "answer.options[0].id is required"},
		{"option id number", `{` + p + `,"answer":{"type":"choice","options":[{"id":1,"label":"A","value":1}]}}`, CodeInvalidRequest, "answer.options[0].id must be a string, not a number"},
		{"option id null", `{` + p + `,"answer":{"type":"choice","options":[{"id":null,"label":"A","value":1}]}}`, CodeInvalidRequest, "answer.options[0].id must be a string, not null"},
		{"option without label", `{` + p + `,"answer":{"type":"choice","options":[{"id":"a","value":1}]}}`, CodeInvalidRequest, "answer.options[0].label is required"},
		{"option without value", `{` + p + `,"answer":{"type":"choice","options":[{"id":"a","label":"A","value":1},{"id":"b","label":"B"}]}}`, CodeInvalidRequest, "answer.options[1].value is required"},
		{"option non-finite value", `{` + p + `,"answer":{"type":"choice","options":[{"id":"a","label":"A","value":-1e999}]}}`, CodeInvalidRequest, "answer.options[0].value: the number -1e999 is not finite"},
		{"option description number", `{` + p + `,"answer":{"type":"choice","options":[{"id":"a","label":"A","value":1,"description":2}]}}`, CodeInvalidRequest, "answer.options[0].description must be a string"},
		{"duplicate ids", `{` + p + `,"answer":{"type":"choice","options":[{"id":"a","label":"A","value":1},{"id":"a","label":"B","value":2}]}}`, CodeInvalidRequest, `answer.options[1].id "a" is also the id of answer.options[0]`},
		{"too many options", `{` + p + `,"answer":{"type":"choice","options":[` + strings.Repeat(`{"id":"a","label":"A","value":1},`, MaxOptions) + `{"id":"a","label":"A","value":1}]}}`,
			CodeLimitExceeded, "answer.options has 101 options; the limit is 100"},
		{"too large", `{` + p + `,"answer":{"type":"text"}}` + strings.Repeat(" ", MaxQuestionBytes), CodeLimitExceeded, "the limit is 262144"},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, err := ParseQuestion(json.RawMessage(c.raw))
			if err == nil {
				t.Fatalf("ParseQuestion(%s) = %+v, want an error", c.raw, q)
			}
			wantCode(t, "ParseQuestion", err, c.code, c.msg)
		})
	}
}

func TestQuestionCheck(t *testing.T) {
	many := func(n int) Content {
		c := make(Content, n)
		for i := range c {
			c[i] = ContentPart{Type: PartText, Text: "x"}
		}
		return c
	}
	withOption := func(o ChoiceOption) *Question { return choiceQuestion(false, false, opt("a", "1"), o) }
	for _, c := range []struct {
		name string
		q    *Question
		code Code // "" for valid
		msg  string
	}{
		{"text", textQuestion(), "", ""},
		{"choice", choiceQuestion(false, false, opt("a", "1")), "", ""},
		{"empty text prompt part", &Question{Prompt: Text(""), Answer: AnswerSpec{Type: AnswerText}}, "", ""},
		{"json part without value", &Question{Prompt: Content{{Type: PartJSON}}, Answer: AnswerSpec{Type: AnswerText}}, "", ""},
		{"no prompt", &Question{Answer: AnswerSpec{Type: AnswerText}}, CodeInvalidRequest, "prompt must have at least one part"},
		{"64 prompt parts", &Question{Prompt: many(64), Answer: AnswerSpec{Type: AnswerText}}, "", ""},
		{"65 prompt parts", &Question{Prompt: many(65), Answer: AnswerSpec{Type: AnswerText}}, CodeLimitExceeded, "prompt has 65 parts; the limit is 64"},
		{"prompt part type", &Question{Prompt: Content{{Type: PartText}, {Type: "image"}}, Answer: AnswerSpec{Type: AnswerText}}, CodeInvalidRequest, `prompt[1].type must be "text" or "json", not "image"`},
		{"prompt part invalid value", &Question{Prompt: Content{{Type: PartJSON, Value: json.RawMessage(`{`)}}, Answer: AnswerSpec{Type: AnswerText}}, CodeInvalidRequest, "prompt[0].value: not valid JSON"},
		{"no type", &Question{Prompt: Text("?")}, CodeInvalidRequest, "answer.type is required"},
		{"unknown type", &Question{Prompt: Text("?"), Answer: AnswerSpec{Type: "rating"}}, CodeInvalidRequest, `not "rating"`},
		{"text with options", &Question{Prompt: Text("?"), Answer: AnswerSpec{Type: AnswerText, Options: []ChoiceOption{opt("a", "1")}}}, CodeInvalidRequest, "answer.options is only for choice questions"},
		{"text with multiple", &Question{Prompt: Text("?"), Answer: AnswerSpec{Type: AnswerText, Multiple: true}}, CodeInvalidRequest, "answer.multiple"},
		{"text with allow_text", &Question{Prompt: Text("?"), Answer: AnswerSpec{Type: AnswerText, AllowText: true}}, CodeInvalidRequest, "answer.allow_text"},
		{"choice without options", choiceQuestion(true, true), CodeInvalidRequest, "answer.options must have at least one option"},
		{"100 options", choiceQuestion(true, false, nOptions(100)...), "", ""},
		{"101 options", choiceQuestion(true, false, nOptions(101)...), CodeLimitExceeded, "answer.options has 101 options; the limit is 100"},
		{"empty id", withOption(opt("", "1")), CodeInvalidRequest, "answer.options[1].id must not be empty"},
		{"id 128 bytes", withOption(opt(strings.Repeat("i", 128), "1")), "", ""},
		{"id 129 bytes", withOption(opt(strings.Repeat("i", 129), "1")), CodeLimitExceeded, "answer.options[1].id is 129 bytes; the limit is 128"},
		{"id counted in bytes", withOption(opt(strings.Repeat("é", 65), "1")), CodeLimitExceeded, "answer.options[1].id is 130 bytes"},
		{"duplicate id", choiceQuestion(true, false, opt("a", "1"), opt("b", "2"), opt("a", "3")), CodeInvalidRequest, `answer.options[2].id "a" is also the id of answer.options[0]`},
		{"empty label", withOption(ChoiceOption{ID: "b", Value: json.RawMessage(`1`)}), CodeInvalidRequest, "answer.options[1].label must not be empty"},
		{"label 256 bytes", withOption(ChoiceOption{ID: "b", Label: strings.Repeat("l", 256), Value: json.RawMessage(`1`)}), "", ""},
		{"label 257 bytes", withOption(ChoiceOption{ID: "b", Label: strings.Repeat("l", 257), Value: json.RawMessage(`1`)}), CodeLimitExceeded, "answer.options[1].label is 257 bytes; the limit is 256"},
		{"description 2048 bytes", withOption(ChoiceOption{ID: "b", Label: "B", Description: strings.Repeat("d", 2048), Value: json.RawMessage(`1`)}), "", ""},
		{"description 2049 bytes", withOption(ChoiceOption{ID: "b", Label: "B", Description: strings.Repeat("d", 2049), Value: json.RawMessage(`1`)}), CodeLimitExceeded, "answer.options[1].description is 2049 bytes; the limit is 2048"},
		{"missing value", withOption(ChoiceOption{ID: "b", Label: "B"}), CodeInvalidRequest, "answer.options[1].value is required"},
		{"null value", withOption(opt("b", "null")), "", ""},
		{"invalid value", withOption(opt("b", "{")), CodeInvalidRequest, "answer.options[1].value: not valid JSON"},
		{"two values", withOption(opt("b", "1 2")), CodeInvalidRequest, "answer.options[1].value: not valid JSON"},
		{"non-finite value", withOption(opt("b", "[1e309]")), CodeInvalidRequest, "answer.options[1].value: the number 1e309 is not finite"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.q.Check()
			if c.code == "" {
				if err != nil {
					t.Errorf("Check: %v", err)
				}
				return
			}
			wantCode(t, "Check", err, c.code, c.msg)
		})
	}
	// The documented example message.
	q := choiceQuestion(false, false, nOptions(4)...)
	q.Answer.Options[3].Label = strings.Repeat("l", 300)
	if err := q.Check(); err == nil || err.Error() != "limit_exceeded: answer.options[3].label is 300 bytes; the limit is 256" {
		t.Errorf("Check = %v", err)
	}
}

func TestQuestionSizeLimit(t *testing.T) {
	q := textQuestion()
	q.Prompt = Text("")
	q.Prompt[0].Text = strings.Repeat("<", MaxQuestionBytes-mustSize(t, q)) // not HTML-escaped
	if n := mustSize(t, q); n != MaxQuestionBytes {
		t.Fatalf("built a question of %d bytes", n)
	}
	if err := q.Check(); err != nil {
		t.Errorf("question of MaxQuestionBytes: %v", err)
	}
	raw, _ := marshalPlain(q)
	if _, err := ParseQuestion(raw); err != nil {
		t.Errorf("ParseQuestion of MaxQuestionBytes: %v", err)
	}
	q.Prompt[0].Text += "x"
	wantCode(t, "question of MaxQuestionBytes+1", q.Check(), CodeLimitExceeded, "the question is 262145 bytes of JSON; the limit is 262144")
	raw, _ = marshalPlain(q)
	_, err := ParseQuestion(raw)
	wantCode(t, "ParseQuestion of MaxQuestionBytes+1", err, CodeLimitExceeded, "262145 bytes")

	// Raw input of the limit with space in it is accepted; one byte more is not.
	small := `{"prompt":[{"type":"text","text":"?"}],"answer":{"type":"text"}}`
	pad := small + strings.Repeat(" ", MaxQuestionBytes-len(small))
	if _, err := ParseQuestion(json.RawMessage(pad)); err != nil {
		t.Errorf("ParseQuestion of %d bytes with space: %v", len(pad), err)
	}
	_, err = ParseQuestion(json.RawMessage(pad + " "))
	wantCode(t, "ParseQuestion over the limit with space", err, CodeLimitExceeded, "")

	// A choice question's size counts its options.
	c := choiceQuestion(true, false, nOptions(40)...)
	for i := range c.Answer.Options {
		c.Answer.Options[i].Description = strings.Repeat("d", MaxOptionDescriptionBytes)
	}
	c.Prompt[0].Text = ""
	c.Prompt[0].Text = strings.Repeat("p", MaxQuestionBytes-mustSize(t, c))
	if err := c.Check(); err != nil {
		t.Errorf("choice question of MaxQuestionBytes: %v", err)
	}
	c.Prompt[0].Text += "p"
	wantCode(t, "choice question of MaxQuestionBytes+1", c.Check(), CodeLimitExceeded, "the question is")
}

func mustSize(t *testing.T, v any) int {
	t.Helper()
	b, err := marshalPlain(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// bigValue returns a JSON string value whose selection-only answer (for the
// option id "a", alone) is exactly n bytes.
func bigValue(t *testing.T, n int) json.RawMessage {
	t.Helper()
	base := mustSize(t, ChoiceAnswer{Selected: []SelectedOption{{ID: "a", Value: json.RawMessage(`""`)}}})
	return json.RawMessage(`"` + strings.Repeat("v", n-base) + `"`)
}

func TestQuestionSelectionSize(t *testing.T) {
	// Single choice: each option alone must make an answer within the limit.
	q := choiceQuestion(false, true, opt("b", "1"), ChoiceOption{ID: "a", Label: "A", Value: bigValue(t, MaxAnswerBytes)})
	if err := q.Check(); err != nil {
		t.Errorf("option making an answer of MaxAnswerBytes: %v", err)
	}
	ans, err := q.CheckAnswer(json.RawMessage(`{"selected":["a"]}`))
	if err != nil || len(ans) != MaxAnswerBytes {
		t.Errorf("CheckAnswer = %d bytes, %v; want %d", len(ans), err, MaxAnswerBytes)
	}
	// With text it is over: limit_exceeded, for the answer.
	_, err = q.CheckAnswer(json.RawMessage(`{"selected":["a"],"text":"x"}`))
	wantCode(t, "answer over the limit with its values", err, CodeLimitExceeded, "with the selected options' values, is 65547 bytes")
	q.Answer.Options[1].Value = bigValue(t, MaxAnswerBytes+1)
	wantCode(t, "option making an answer of MaxAnswerBytes+1", q.Check(), CodeLimitExceeded, "answer.options[1]: an answer selecting it would be 65537 bytes")

	// Multiple choice: all options together.
	opts := nOptions(3)
	all := mustSize(t, ChoiceAnswer{Selected: []SelectedOption{{ID: "o0", Value: opts[0].Value}, {ID: "o1", Value: opts[1].Value}, {ID: "a", Value: json.RawMessage(`""`)}}})
	one := mustSize(t, ChoiceAnswer{Selected: []SelectedOption{{ID: "a", Value: json.RawMessage(`""`)}}})
	mq := choiceQuestion(true, false, opts[0], opts[1], ChoiceOption{ID: "a", Label: "A", Value: bigValue(t, MaxAnswerBytes-(all-one))})
	if err := mq.Check(); err != nil {
		t.Errorf("all options making an answer of MaxAnswerBytes: %v", err)
	}
	ans, err = mq.CheckAnswer(json.RawMessage(`{"selected":["a","o1","o0"]}`))
	if err != nil || len(ans) != MaxAnswerBytes {
		t.Errorf("CheckAnswer(all) = %d bytes, %v; want %d", len(ans), err, MaxAnswerBytes)
	}
	mq.Answer.Options[2].Value = bigValue(t, MaxAnswerBytes-(all-one)+1)
	wantCode(t, "all options making an answer of MaxAnswerBytes+1", mq.Check(), CodeLimitExceeded, "selecting every option would be 65537 bytes")
	// The same options are fine for a single choice.
	mq.Answer.Multiple = false
	if err := mq.Check(); err != nil {
		t.Errorf("single choice: %v", err)
	}
}

func TestCheckAnswerText(t *testing.T) {
	q := textQuestion()
	for _, c := range []struct{ raw, want string }{
		{`"yes"`, `"yes"`},
		{` "yes" ` + "\n", `"yes"`},
		{`" "`, `" "`},
		{`"<b>&"`, `"<b>&"`},
		{`"\u00e9\ud83d\ude00"`, `"é😀"`},
		{`"line\nbreak \"q\""`, `"line\nbreak \"q\""`},
		{"\"\xff\"", `"` + "\ufffd" + `"`},
	} {
		got, err := q.CheckAnswer(json.RawMessage(c.raw))
		if err != nil || string(got) != c.want {
			t.Errorf("CheckAnswer(%s) = %s, %v; want %s", c.raw, got, err, c.want)
		}
	}
	for _, c := range []struct{ raw, msg string }{
		{``, "must be a JSON string"},
		{`""`, "must not be an empty string"},
		{`null`, "not null"},
		{`1`, "not a number"},
		{`true`, "not a boolean"},
		{`["yes"]`, "not an array"},
		{`{"text":"yes"}`, "not an object"},
		{`"a" "b"`, "nothing after it"},
		{`"a`, "must be a JSON string"},
		{`'a'`, "must be a JSON string"},
	} {
		_, err := q.CheckAnswer(json.RawMessage(c.raw))
		wantCode(t, "CheckAnswer("+c.raw+")", err, CodeAnswerInvalid, c.msg)
	}
	// The limit is of the answer as posted…
	at := `"` + strings.Repeat("a", MaxAnswerBytes-2) + `"`
	if got, err := q.CheckAnswer(json.RawMessage(at)); err != nil || string(got) != at {
		t.Errorf("text answer of MaxAnswerBytes: %d bytes, %v", len(got), err)
	}
	_, err := q.CheckAnswer(json.RawMessage(at + " "))
	wantCode(t, "text answer of MaxAnswerBytes+1", err, CodeLimitExceeded, "the answer is 65537 bytes of JSON; the limit is 65536")
	// …and canonical: an invalid byte becomes U+FFFD, 3 bytes.
	_, err = q.CheckAnswer(json.RawMessage("\"" + strings.Repeat("\xff", 30000) + "\""))
	wantCode(t, "text answer growing over the limit", err, CodeLimitExceeded, "the limit is 65536")
}

func TestCheckAnswerChoice(t *testing.T) {
	opts := []ChoiceOption{
		opt("a", `1`),
		opt("b", `{"x": [1, 2.5], "y": "<&>"}`),
		opt("c", `null`),
		opt("d", `"d"`),
	}
	single := choiceQuestion(false, false, opts...)
	singleText := choiceQuestion(false, true, opts...)
	multi := choiceQuestion(true, false, opts...)
	multiText := choiceQuestion(true, true, opts...)
	for _, c := range []struct {
		name string
		q    *Question
		raw  string
		want string
	}{
		{"id", single, `{"selected":["a"]}`, `{"selected":[{"id":"a","value":1}]}`},
		{"object", single, `{"selected":[{"id":"b"}]}`, `{"selected":[{"id":"b","value":{"x":[1,2.5],"y":"<&>"}}]}`},
		{"object with value", single, `{"selected":[{"value":1,"id":"a"}]}`, `{"selected":[{"id":"a","value":1}]}`},
		{"value canonically equal", single, `{"selected":[{"id":"b","value":{"y":"\u003c&>","x":[1.0,25e-1]}}]}`, `{"selected":[{"id":"b","value":{"x":[1,2.5],"y":"<&>"}}]}`},
		{"null value", single, `{"selected":[{"id":"c","value":null}]}`, `{"selected":[{"id":"c","value":null}]}`},
		{"null value filled", single, `{"selected":["c"]}`, `{"selected":[{"id":"c","value":null}]}`},
		{"space", single, " { \"selected\" : [ \"d\" ] } ", `{"selected":[{"id":"d","value":"d"}]}`},
		{"empty text dropped", single, `{"selected":["a"],"text":""}`, `{"selected":[{"id":"a","value":1}]}`},
		{"null text", single, `{"selected":["a"],"text":null}`, `{"selected":[{"id":"a","value":1}]}`},
		{"declared order", multi, `{"selected":["d","a",{"id":"c"}]}`, `{"selected":[{"id":"a","value":1},{"id":"c","value":null},{"id":"d","value":"d"}]}`},
		{"all", multi, `{"selected":["d","c","b","a"]}`, `{"selected":[{"id":"a","value":1},{"id":"b","value":{"x":[1,2.5],"y":"<&>"}},{"id":"c","value":null},{"id":"d","value":"d"}]}`},
		{"one of multiple", multi, `{"selected":["b"]}`, `{"selected":[{"id":"b","value":{"x":[1,2.5],"y":"<&>"}}]}`},
		{"text and selection", singleText, `{"selected":["a"],"text":"and <more>"}`, `{"selected":[{"id":"a","value":1}],"text":"and <more>"}`},
		{"text only", singleText, `{"text":"other"}`, `{"selected":[],"text":"other"}`},
		{"text, selected null", multiText, `{"selected":null,"text":"other"}`, `{"selected":[],"text":"other"}`},
		{"text, selected empty", multiText, `{"text":"other","selected":[]}`, `{"selected":[],"text":"other"}`},
		{"text and selections", multiText, `{"text":"x","selected":["d","b"]}`, `{"selected":[{"id":"b","value":{"x":[1,2.5],"y":"<&>"}},{"id":"d","value":"d"}],"text":"x"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.q.CheckAnswer(json.RawMessage(c.raw))
			if err != nil || string(got) != c.want {
				t.Fatalf("CheckAnswer(%s) = %s, %v\nwant %s", c.raw, got, err, c.want)
			}
			again, err := c.q.CheckAnswer(got)
			if err != nil || !bytes.Equal(again, got) {
				t.Errorf("CheckAnswer(canonical %s) = %s, %v", got, again, err)
			}
		})
	}
	for _, c := range []struct {
		name string
		q    *Question
		raw  string
		msg  string
	}{
		{"empty", single, ``, "must be a JSON object"},
		{"null", single, `null`, "not null"},
		{"string", single, `"a"`, "must be a JSON object, not string"},
		{"array", single, `["a"]`, "must be a JSON object, not array"},
		{"trailing", single, `{"selected":["a"]} {}`, "nothing after it"},
		{"nothing", single, `{}`, "the answer must select an option"},
		{"nothing, text allowed", singleText, `{}`, "must select an option or give text"},
		{"empty selection", multi, `{"selected":[]}`, "must select an option"},
		{"empty text only", multiText, `{"selected":[],"text":""}`, "must select an option or give text"},
		{"unknown field", single, `{"selected":["a"],"comment":"x"}`, `unknown field "comment"`},
		{"field in capitals", single, `{"Selected":["a"]}`, `unknown field "Selected"`},
		{"selected object", single, `{"selected":{"id":"a"}}`, "answer.selected must be an array of option ids, not an object"},
		{"selected string", single, `{"selected":"a"}`, "answer.selected must be an array of option ids, not a string"},
		{"item number", single, `{"selected":[1]}`, "answer.selected[0] must be an option id or an object"},
		{"item null", single, `{"selected":[null]}`, "answer.selected[0] must be an option id or an object"},
		{"item array", single, `{"selected":[["a"]]}`, "answer.selected[0] must be an option id or an object"},
		{"item without id", single, `{"selected":[{"value":1}]}`, "answer.selected[0].id is required"},
		{"item id number", single, `{"selected":[{"id":1}]}`, "answer.selected[0].id must be a string"},
		{"item extra field", single, `{"selected":[{"id":"a","label":"Label a"}]}`, `answer.selected[0] has an unknown field "label"`},
		{"unknown id", single, `{"selected":["z"]}`, `answer.selected[0]: the question has no option with the id "z"`},
		{"id in capitals", single, `{"selected":["A"]}`, `no option with the id "A"`},
		{"duplicate", multi, `{"selected":["a","b","a"]}`, `answer.selected[2]: option "a" is selected twice`},
		{"duplicate, object", multi, `{"selected":["a",{"id":"a"}]}`, `answer.selected[1]: option "a" is selected twice`},
		{"two on single", single, `{"selected":["a","b"]}`, "answer.selected has 2 options; this question takes one"},
		{"two on single with text", singleText, `{"selected":["a","b"],"text":"x"}`, "this question takes one"},
		{"wrong value", single, `{"selected":[{"id":"a","value":2}]}`, `answer.selected[0].value is not the value of option "a"`},
		{"wrong value type", single, `{"selected":[{"id":"a","value":"1"}]}`, `is not the value of option "a"`},
		{"null for a value", single, `{"selected":[{"id":"a","value":null}]}`, `is not the value of option "a"`},
		{"value where null", single, `{"selected":[{"id":"c","value":0}]}`, `is not the value of option "c"`},
		{"non-finite value", single, `{"selected":[{"id":"a","value":1e999}]}`, "answer.selected[0].value: the number 1e999 is not finite"},
		{"text not allowed", single, `{"selected":["a"],"text":"x"}`, "answer.text is not allowed"},
		{"text only not allowed", multi, `{"text":"x"}`, "answer.text is not allowed"},
		{"text number", singleText, `{"text":1}`, "answer.text must be a string, not a number"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.q.CheckAnswer(json.RawMessage(c.raw))
			if err == nil {
				t.Fatalf("CheckAnswer(%s) = %s, want an error", c.raw, got)
			}
			wantCode(t, "CheckAnswer("+c.raw+")", err, CodeAnswerInvalid, c.msg)
		})
	}

	// Free text: MaxAnswerTextBytes, counted in UTF-8 bytes of the decoded text.
	at := strings.Repeat("t", MaxAnswerTextBytes)
	if _, err := singleText.CheckAnswer(json.RawMessage(`{"text":"` + at + `"}`)); err != nil {
		t.Errorf("text of MaxAnswerTextBytes: %v", err)
	}
	_, err := singleText.CheckAnswer(json.RawMessage(`{"text":"` + at + `t"}`))
	wantCode(t, "text of MaxAnswerTextBytes+1", err, CodeLimitExceeded, "answer.text is 8193 bytes; the limit is 8192")
	escaped := strings.Repeat(`\u00e9`, MaxAnswerTextBytes/2) // 6 bytes posted, 2 decoded
	if _, err := singleText.CheckAnswer(json.RawMessage(`{"text":"` + escaped + `"}`)); err != nil {
		t.Errorf("escaped text of MaxAnswerTextBytes: %v", err)
	}
	_, err = singleText.CheckAnswer(json.RawMessage(`{"text":"` + escaped + `x"}`))
	wantCode(t, "escaped text of MaxAnswerTextBytes+1", err, CodeLimitExceeded, "answer.text is 8193 bytes")

	// The answer as posted: MaxAnswerBytes.
	body := `{"selected":["a"]}`
	pad := body[:len(body)-1] + strings.Repeat(" ", MaxAnswerBytes-len(body)) + "}"
	if got, err := single.CheckAnswer(json.RawMessage(pad)); err != nil || string(got) != `{"selected":[{"id":"a","value":1}]}` {
		t.Errorf("answer of MaxAnswerBytes = %s, %v", got, err)
	}
	_, err = single.CheckAnswer(json.RawMessage(pad + " "))
	wantCode(t, "answer of MaxAnswerBytes+1", err, CodeLimitExceeded, "the answer is 65537 bytes of JSON; the limit is 65536")

	// A question that is not valid.
	_, err = (&Question{Prompt: Text("?"), Answer: AnswerSpec{Type: "rating"}}).CheckAnswer(json.RawMessage(`"x"`))
	wantCode(t, "answer to a question of an unknown type", err, CodeInvalidRequest, "")
}

func TestAskCodes(t *testing.T) {
	for code, want := range map[Code]int{
		CodeAnswerInvalid:           http.StatusBadRequest,
		CodeAskNotPending:           http.StatusConflict,
		CodeTokenCancelled:          http.StatusConflict,
		CodeTokenExpired:            http.StatusConflict,
		CodeTokenCompletionConflict: http.StatusConflict,
		CodeWaitTimeout:             http.StatusRequestTimeout,
	} {
		if got := HTTPStatus(code); got != want {
			t.Errorf("HTTPStatus(%s) = %d, want %d", code, got, want)
		}
	}
}

func TestAskStateJSON(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	s := AskState{
		ID: "ask-1", SessionID: "ses-1", TurnID: "trn-1", Status: AskResponded,
		Question:    *choiceQuestion(false, true, opt("a", "1")),
		Answer:      json.RawMessage(`{"selected":[{"id":"a","value":1}]}`),
		RespondedBy: &Responder{Kind: ResponderAPIKey, ID: "key-1"}, ResponseID: "r-1",
		CreatedAt: at, RespondedAt: &at,
	}
	want := `{"id":"ask-1","session_id":"ses-1","turn_id":"trn-1","status":"responded",` +
		`"question":{"prompt":[{"type":"text","text":"Pick one"}],"answer":{"type":"choice","options":[{"id":"a","label":"Label a","value":1}],"allow_text":true}},` +
		`"answer":{"selected":[{"id":"a","value":1}]},"responded_by":{"kind":"api_key","id":"key-1"},"response_id":"r-1",` +
		`"created_at":"2025-01-02T03:04:05Z","responded_at":"2025-01-02T03:04:05Z"}`
	if b, err := json.Marshal(s); err != nil || string(b) != want {
		t.Errorf("json.Marshal(AskState) = %s, %v\nwant %s", b, err, want)
	}
	pending := AskState{ID: "ask-2", Status: AskPending, Question: *textQuestion(), CreatedAt: at}
	b, err := json.Marshal(AskPage{Asks: []AskState{pending}})
	wantPage := `{"asks":[{"id":"ask-2","session_id":"","turn_id":"","status":"pending","question":{"prompt":[{"type":"text","text":"Why?"}],"answer":{"type":"text"}},"created_at":"2025-01-02T03:04:05Z"}]}`
	if err != nil || string(b) != wantPage {
		t.Errorf("json.Marshal(AskPage) = %s, %v\nwant %s", b, err, wantPage)
	}
	var r AskRespond
	if err := json.Unmarshal([]byte(`{"answer":"yes","response_id":"r-2"}`), &r); err != nil || string(r.Answer) != `"yes"` || r.ResponseID != "r-2" {
		t.Errorf("json.Unmarshal(AskRespond) = %+v, %v", r, err)
	}
}

var fuzzQuestions = []string{
	`{"prompt":[{"type":"text","text":"Why?"}],"answer":{"type":"text"}}`,
	`{"prompt":[{"type":"text","text":"Deploy?"}],"answer":{"type":"choice","options":[{"id":"yes","label":"Yes","value":true},{"id":"no","label":"No","value":false}]}}`,
	`{"prompt":[{"type":"text","text":"Which?"},{"type":"json","value":[1,2]}],"answer":{"type":"choice","multiple":true,"options":[` +
		`{"id":"a","label":"A","value":1.50},{"id":"b","label":"B","value":{"k":["<&>","\u2028"],"j":-0}},{"id":"c","label":"C","value":null},{"id":"é","label":"E","value":"é"}]}}`,
	`{"prompt":[{"type":"text","text":"Other?"}],"answer":{"type":"choice","allow_text":true,"options":[{"id":"x","label":"X","value":123456789012345678901234567890}]}}`,
	`{"prompt":[{"type":"text","text":"Any?"}],"answer":{"type":"choice","multiple":true,"allow_text":true,"options":[{"id":"1","label":"1","value":1},{"id":"2","label":"2","value":2e0}]}}`,
}

func FuzzParseQuestion(f *testing.F) {
	for _, s := range fuzzQuestions {
		f.Add([]byte(s))
	}
	for _, s := range []string{
		``, `null`, `{}`, `{"prompt":[],"answer":{"type":"text"}}`,
		`{"prompt":[{"type":"text","text":"?"}],"answer":{"type":"choice","options":[{"id":"a","label":"A"}]}}`,
		`{"prompt":[{"type":"text","text":"?"}],"answer":{"type":"choice","options":[{"id":"a","label":"A","value":1},{"id":"a","label":"A","value":1}]}}`,
		`{"prompt":[{"type":"text","text":"?"}],"answer":{"type":"text","options":null,"multiple":null}} x`,
		"{\"prompt\":[{\"type\":\"text\",\"text\":\"\xff\"}],\"answer\":{\"type\":\"choice\",\"options\":[{\"id\":\"\xfe\",\"label\":\"\xfd\",\"value\":\"\xfc\"}]}}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		q, err := ParseQuestion(raw)
		if err != nil {
			if c := CodeOf(err); c != CodeInvalidRequest && c != CodeLimitExceeded {
				t.Fatalf("ParseQuestion(%q): error %v has code %s", raw, err, c)
			}
			return
		}
		if err := q.Check(); err != nil {
			t.Fatalf("ParseQuestion(%q) accepted a question that Check refuses: %v", raw, err)
		}
		if n := len(q.Prompt); n < 1 || n > MaxContentParts {
			t.Fatalf("%d prompt parts accepted", n)
		}
		if q.Answer.Type == AnswerChoice && (len(q.Answer.Options) < 1 || len(q.Answer.Options) > MaxOptions) {
			t.Fatalf("%d options accepted", len(q.Answer.Options))
		}
		b, err := marshalPlain(q)
		if err != nil || len(b) > MaxQuestionBytes {
			t.Fatalf("marshal = %d bytes, %v", len(b), err)
		}
		q2, err := ParseQuestion(b)
		if err != nil {
			t.Fatalf("ParseQuestion(marshal) = %v; marshaled %s", err, b)
		}
		b2, err := marshalPlain(q2)
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("marshal is not stable: %s then %s (%v)", b, b2, err)
		}
	})
}

func FuzzCheckAnswer(f *testing.F) {
	answers := []string{
		`"yes"`, `""`, `{"selected":["yes"]}`, `{"selected":[{"id":"no","value":false}]}`,
		`{"selected":["c","a",{"id":"b","value":{"j":0,"k":["\u003c&>","\u2028"]}}]}`, `{"selected":[{"id":"a","value":1.5e0}]}`,
		`{"text":"other"}`, `{"selected":["x"],"text":"<more>"}`, `{"selected":["2","1"],"text":""}`,
		`{"selected":["a","a"]}`, `{"selected":null,"text":null}`, `{"selected":[{"id":"x","value":1.2345678901234568e+29}]}`,
		"\"\xff\"", `{"selected":[]}`, `[]`, `null`,
	}
	for i, q := range fuzzQuestions {
		for _, a := range answers {
			f.Add([]byte(q), []byte(a))
		}
		f.Add([]byte{byte(i)}, []byte(`"x"`))
	}
	f.Fuzz(func(t *testing.T, qraw, answer []byte) {
		q, err := ParseQuestion(qraw)
		if err != nil {
			// Fall back to a known question, so that answers are fuzzed anyway.
			if q, err = ParseQuestion(json.RawMessage(fuzzQuestions[len(qraw)%len(fuzzQuestions)])); err != nil {
				t.Fatal(err)
			}
		}
		got, err := q.CheckAnswer(answer)
		if err != nil {
			if c := CodeOf(err); c != CodeAnswerInvalid && c != CodeLimitExceeded {
				t.Fatalf("CheckAnswer(%q): error %v has code %s", answer, err, c)
			}
			return
		}
		if len(got) > MaxAnswerBytes || !json.Valid(got) {
			t.Fatalf("CheckAnswer(%q) = %d bytes, valid %t", answer, len(got), json.Valid(got))
		}
		again, err := q.CheckAnswer(got)
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("CheckAnswer(canonical %s) = %s, %v", got, again, err)
		}
		a := q.Answer
		if a.Type == AnswerText {
			var s string
			if err := json.Unmarshal(got, &s); err != nil || s == "" {
				t.Fatalf("text answer %s: %v", got, err)
			}
			return
		}
		dec := json.NewDecoder(bytes.NewReader(got))
		dec.DisallowUnknownFields()
		var ca ChoiceAnswer
		if err := dec.Decode(&ca); err != nil {
			t.Fatalf("choice answer %s: %v", got, err)
		}
		if ca.Selected == nil || len(ca.Selected) == 0 && ca.Text == "" {
			t.Fatalf("choice answer %s selects nothing", got)
		}
		if len(ca.Selected) > 1 && !a.Multiple || ca.Text != "" && !a.AllowText || len(ca.Text) > MaxAnswerTextBytes {
			t.Fatalf("choice answer %s does not fit %+v", got, a)
		}
		next := 0 // selected options come in declared order, once each
		for _, s := range ca.Selected {
			for next < len(a.Options) && a.Options[next].ID != s.ID {
				next++
			}
			if next == len(a.Options) {
				t.Fatalf("choice answer %s: %q out of order or unknown", got, s.ID)
			}
			if !sameJSON(s.Value, a.Options[next].Value) {
				t.Fatalf("choice answer %s: value of %q is not the option's %s", got, s.ID, a.Options[next].Value)
			}
			next++
		}
	})
}
