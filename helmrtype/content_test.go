package helmrtype

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParseContentValid(t *testing.T) {
	for _, c := range []struct {
		name     string
		raw      string
		textOnly bool
		want     Content
		// wantJSON is the re-marshaled form.
		wantJSON string
	}{
		{"text", `[{"type":"text","text":"hi"}]`, true, Content{{Type: PartText, Text: "hi"}}, `[{"type":"text","text":"hi"}]`},
		{"empty text", `[{"type":"text","text":""}]`, true, Content{{Type: PartText}}, `[{"type":"text","text":""}]`},
		{"empty array", `[]`, false, Content{}, `[]`},
		{"empty array, text only", ` [ ] `, true, Content{}, `[]`},
		{"field order and whitespace", " [ {\"text\" : \"a\",\n \"type\":\"text\"} ]\n", true, Content{{Type: PartText, Text: "a"}}, `[{"type":"text","text":"a"}]`},
		{"unicode", `[{"type":"text","text":"\u00e9\ud83d\ude00 \"q\""}]`, true, Content{{Type: PartText, Text: "é😀 \"q\""}}, `[{"type":"text","text":"é😀 \"q\""}]`},
		{"json object", `[{"type":"json","value":{"a":[1,2.5,"x"],"b":null}}]`, false,
			Content{{Type: PartJSON, Value: json.RawMessage(`{"a":[1,2.5,"x"],"b":null}`)}}, `[{"type":"json","value":{"a":[1,2.5,"x"],"b":null}}]`},
		{"json null", `[{"type":"json","value":null}]`, false, Content{{Type: PartJSON, Value: json.RawMessage(`null`)}}, `[{"type":"json","value":null}]`},
		{"json big number kept exactly", `[{"type":"json","value":123456789012345678901234567890}]`, false,
			Content{{Type: PartJSON, Value: json.RawMessage(`123456789012345678901234567890`)}}, `[{"type":"json","value":123456789012345678901234567890}]`},
		{"mixed, in order", `[{"type":"text","text":"a"},{"type":"json","value":[]},{"type":"text","text":"b"}]`, false,
			Content{{Type: PartText, Text: "a"}, {Type: PartJSON, Value: json.RawMessage(`[]`)}, {Type: PartText, Text: "b"}},
			`[{"type":"text","text":"a"},{"type":"json","value":[]},{"type":"text","text":"b"}]`},
		{"max parts", "[" + strings.Repeat(`{"type":"text","text":"x"},`, MaxContentParts-1) + `{"type":"text","text":"x"}]`, true,
			func() Content {
				c := make(Content, MaxContentParts)
				for i := range c {
					c[i] = ContentPart{Type: PartText, Text: "x"}
				}
				return c
			}(), "[" + strings.Repeat(`{"type":"text","text":"x"},`, MaxContentParts-1) + `{"type":"text","text":"x"}]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseContent(json.RawMessage(c.raw), MaxContentBytes, c.textOnly)
			if err != nil {
				t.Fatalf("ParseContent(%s): %v", c.raw, err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("ParseContent(%s) = %#v, want %#v", c.raw, got, c.want)
			}
			b, err := json.Marshal(got)
			if err != nil || string(b) != c.wantJSON {
				t.Errorf("json.Marshal = %s, %v; want %s", b, err, c.wantJSON)
			}
		})
	}
}

func TestParseContentRefused(t *testing.T) {
	for _, c := range []struct {
		name     string
		raw      string
		textOnly bool
	}{
		{"empty input", ``, false},
		{"null", `null`, false},
		{"null with spaces", ` null `, false},
		{"string", `"hello"`, false},
		{"empty string", `""`, false},
		{"object", `{"type":"text","text":"a"}`, false},
		{"empty object", `{}`, false},
		{"number", `1`, false},
		{"bool", `true`, false},
		{"truncated", `[{"type":"text","text":"a"}`, false},
		{"invalid JSON", `[{"type":"text","text":'a'}]`, false},
		{"null part", `[null]`, false},
		{"string part", `["a"]`, false},
		{"number part", `[1]`, false},
		{"array part", `[[]]`, false},
		{"empty part", `[{}]`, false},
		{"unknown type", `[{"type":"image","url":"x"}]`, false},
		{"type in capitals", `[{"type":"TEXT","text":"a"}]`, false},
		{"type null", `[{"type":null,"text":"a"}]`, false},
		{"type number", `[{"type":1,"text":"a"}]`, false},
		{"no type", `[{"text":"a"}]`, false},
		{"text missing", `[{"type":"text"}]`, false},
		{"text field in capitals", `[{"type":"text","Text":"a"}]`, false},
		{"text null", `[{"type":"text","text":null}]`, false},
		{"text number", `[{"type":"text","text":1}]`, false},
		{"text object", `[{"type":"text","text":{}}]`, false},
		{"text with extra field", `[{"type":"text","text":"a","extra":1}]`, false},
		{"text with value", `[{"type":"text","text":"a","value":1}]`, false},
		{"json missing value", `[{"type":"json"}]`, false},
		{"json with extra field", `[{"type":"json","value":1,"text":"a"}]`, false},
		{"json, text only", `[{"type":"json","value":1}]`, true},
		{"json after text, text only", `[{"type":"text","text":"a"},{"type":"json","value":{}}]`, true},
		{"second part bad", `[{"type":"text","text":"a"},{"type":"text"}]`, false},
		{"trailing array", `[{"type":"text","text":"a"}] []`, false},
		{"trailing garbage", `[] x`, false},
		{"two arrays", `[][]`, false},
		{"too many parts", "[" + strings.Repeat(`{"type":"text","text":"x"},`, MaxContentParts) + `{"type":"text","text":"x"}]`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseContent(json.RawMessage(c.raw), MaxContentBytes, c.textOnly)
			if err == nil {
				t.Errorf("ParseContent(%s) = %#v, want an error", c.raw, got)
			}
		})
	}
}

func TestParseContentSizeLimit(t *testing.T) {
	raw := []byte(`[{"type":"text","text":"` + strings.Repeat("a", 100) + `"}]`)
	if _, err := ParseContent(raw, len(raw), true); err != nil {
		t.Errorf("content of exactly maxBytes refused: %v", err)
	}
	if _, err := ParseContent(raw, len(raw)-1, true); err == nil {
		t.Error("content of maxBytes+1 accepted")
	}
	big := []byte(`[{"type":"text","text":"` + strings.Repeat("a", MaxContentBytes) + `"}]`)
	if _, err := ParseContent(big, MaxContentBytes, false); err == nil {
		t.Error("content over MaxContentBytes accepted")
	}
}

func TestContentHelpers(t *testing.T) {
	c := Content{{Type: PartText, Text: "a"}, {Type: PartJSON, Value: json.RawMessage(`1`)}, {Type: PartText, Text: "b"}}
	if got := c.PlainText(); got != "ab" {
		t.Errorf("PlainText = %q, want ab", got)
	}
	if !reflect.DeepEqual(Text("x"), Content{{Type: PartText, Text: "x"}}) {
		t.Errorf("Text(x) = %#v", Text("x"))
	}
	if err := c.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	if got, want := c.EncodedSize(), len(`[{"type":"text","text":"a"},{"type":"json","value":1},{"type":"text","text":"b"}]`); got != want {
		t.Errorf("EncodedSize = %d, want %d", got, want)
	}
	tooMany := make(Content, MaxContentParts+1)
	for i := range tooMany {
		tooMany[i] = ContentPart{Type: PartText}
	}
	if err := tooMany[1:].Check(); err != nil {
		t.Errorf("Check(%d parts): %v", MaxContentParts, err)
	}
	for name, bad := range map[string]Content{
		"unknown type":   {{Type: "image"}},
		"invalid value":  {{Type: PartJSON, Value: json.RawMessage(`{`)}},
		"too many parts": tooMany,
		"too large":      Text(strings.Repeat("a", MaxContentBytes)),
	} {
		if err := bad.Check(); err == nil {
			t.Errorf("Check(%s) accepted it", name)
		}
	}
	// A JSON part without a value is written as null.
	b, err := json.Marshal(Content{{Type: PartJSON}})
	if err != nil || string(b) != `[{"type":"json","value":null}]` {
		t.Errorf("json.Marshal(empty json part) = %s, %v", b, err)
	}
	if _, err := json.Marshal(Content{{Type: "image"}}); err == nil {
		t.Error("json.Marshal of an unknown part type succeeded")
	}
}

// sameJSON reports whether a and b encode the same JSON value.
func sameJSON(a, b []byte) bool {
	decode := func(data []byte) (any, error) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		err := dec.Decode(&v)
		return v, err
	}
	va, erra := decode(a)
	vb, errb := decode(b)
	return erra == nil && errb == nil && reflect.DeepEqual(va, vb)
}

func FuzzParseContent(f *testing.F) {
	for _, seed := range []string{
		`[]`,
		`[{"type":"text","text":"hi"}]`,
		`[{"type":"json","value":{"a":[1,2.5e10,"<&>"],"b":null}}]`,
		`[{"type":"text","text":"a"},{"type":"json","value":"\u2028"}]`,
		`[{"type":"text","text":null}]`,
		`[{"type":"json","value":1,"text":"a"}]`,
		`[] []`,
		`null`,
		`{"type":"text"}`,
		"[{\"type\":\"text\",\"text\":\"\xff\"}]",
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	f.Fuzz(func(t *testing.T, raw []byte, textOnly bool) {
		c, err := ParseContent(raw, MaxContentBytes, textOnly)
		if err != nil {
			return
		}
		if len(c) > MaxContentParts {
			t.Fatalf("%d parts accepted", len(c))
		}
		for i, p := range c {
			switch {
			case p.Type == PartJSON && textOnly:
				t.Fatalf("part %d: json part accepted with textOnly", i)
			case p.Type == PartJSON && !json.Valid(p.Value):
				t.Fatalf("part %d: invalid value %q", i, p.Value)
			case p.Type != PartText && p.Type != PartJSON:
				t.Fatalf("part %d: type %q", i, p.Type)
			}
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("json.Marshal(%#v): %v", c, err)
		}
		c2, err := ParseContent(b, len(b), textOnly)
		if err != nil {
			t.Fatalf("ParseContent(json.Marshal(%#v)) = %v; marshaled %s", c, err, b)
		}
		if len(c2) != len(c) {
			t.Fatalf("re-parsed %d parts, want %d", len(c2), len(c))
		}
		for i := range c {
			p, q := c[i], c2[i]
			if p.Type != q.Type || p.Text != q.Text || p.Type == PartJSON && !sameJSON(p.Value, q.Value) {
				t.Fatalf("part %d: parsed %#v, re-parsed %#v", i, p, q)
			}
		}
		b2, err := json.Marshal(c2)
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("marshal is not stable: %s then %s (%v)", b, b2, err)
		}
		if !sameJSON(raw, b) {
			t.Fatalf("ParseContent(%q) re-marshals to another value: %s", raw, b)
		}
	})
}
