package helmrtype

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestTokenCreateCheck(t *testing.T) {
	tags := func(n int) []string {
		s := make([]string, n)
		for i := range s {
			s[i] = fmt.Sprintf("tag-%d", i)
		}
		return s
	}
	// metadata returns a JSON object of exactly n bytes.
	metadata := func(n int) json.RawMessage {
		return json.RawMessage(`{"k":"` + strings.Repeat("m", n-len(`{"k":""}`)) + `"}`)
	}
	for _, c := range []struct {
		name string
		c    TokenCreate
		code Code // "" for valid
		msg  string
	}{
		{"empty", TokenCreate{}, "", ""},
		{"all fields", TokenCreate{Timeout: "1h30m", Tags: []string{"a", "b"}, Metadata: json.RawMessage(`{"order": 42}`), IdempotencyKey: "k"}, "", ""},
		{"timeout 1ms", TokenCreate{Timeout: "1ms"}, "", ""},
		{"timeout 365d", TokenCreate{Timeout: "365d"}, "", ""},
		{"timeout 8760h", TokenCreate{Timeout: "8760h"}, "", ""},
		{"timeout over 365d", TokenCreate{Timeout: "365d1ms"}, CodeInvalidRequest, `timeout "365d1ms" is longer than the limit of 365d`},
		{"timeout 366d", TokenCreate{Timeout: "366d"}, CodeInvalidRequest, "longer than the limit"},
		{"timeout 0s", TokenCreate{Timeout: "0s"}, CodeInvalidRequest, "must be positive"},
		{"timeout without unit", TokenCreate{Timeout: "30"}, CodeInvalidRequest, "timeout: "},
		{"timeout Go form", TokenCreate{Timeout: "1h0m0s"}, "", ""},
		{"timeout bogus", TokenCreate{Timeout: "soon"}, CodeInvalidRequest, "timeout: "},
		{"timeout huge", TokenCreate{Timeout: "999999999999d"}, CodeInvalidRequest, "timeout: "},
		{"20 tags", TokenCreate{Tags: tags(20)}, "", ""},
		{"21 tags", TokenCreate{Tags: tags(21)}, CodeLimitExceeded, "tags has 21 tags; the limit is 20"},
		{"empty tag", TokenCreate{Tags: []string{"a", ""}}, CodeInvalidRequest, "tags[1] must not be empty"},
		{"tag 128 bytes", TokenCreate{Tags: []string{strings.Repeat("t", 128)}}, "", ""},
		{"tag 129 bytes", TokenCreate{Tags: []string{"a", strings.Repeat("t", 129)}}, CodeLimitExceeded, "tags[1] is 129 bytes; the limit is 128"},
		{"metadata null", TokenCreate{Metadata: json.RawMessage(`null`)}, "", ""},
		{"metadata empty object", TokenCreate{Metadata: json.RawMessage(` {} `)}, "", ""},
		{"metadata array", TokenCreate{Metadata: json.RawMessage(`[1]`)}, CodeInvalidRequest, "metadata must be a JSON object, not an array"},
		{"metadata string", TokenCreate{Metadata: json.RawMessage(`"x"`)}, CodeInvalidRequest, "metadata must be a JSON object, not a string"},
		{"metadata number", TokenCreate{Metadata: json.RawMessage(`1`)}, CodeInvalidRequest, "metadata must be a JSON object, not a number"},
		{"metadata invalid", TokenCreate{Metadata: json.RawMessage(`{"a":}`)}, CodeInvalidRequest, "metadata: not valid JSON"},
		{"metadata two values", TokenCreate{Metadata: json.RawMessage(`{} {}`)}, CodeInvalidRequest, "metadata: not valid JSON"},
		{"metadata non-finite", TokenCreate{Metadata: json.RawMessage(`{"a":1e999}`)}, CodeInvalidRequest, "not finite"},
		{"metadata 64 KiB", TokenCreate{Metadata: metadata(MaxTokenMetadataBytes)}, "", ""},
		{"metadata over 64 KiB", TokenCreate{Metadata: metadata(MaxTokenMetadataBytes + 1)}, CodeLimitExceeded, "metadata is 65537 bytes of JSON; the limit is 65536"},
		{"idempotency key 256 bytes", TokenCreate{IdempotencyKey: strings.Repeat("k", 256)}, "", ""},
		{"idempotency key 257 bytes", TokenCreate{IdempotencyKey: strings.Repeat("k", 257)}, CodeInvalidRequest, "idempotency_key is longer than 256 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.c.Check()
			if c.code == "" {
				if err != nil {
					t.Errorf("Check: %v", err)
				}
				return
			}
			wantCode(t, "Check", err, c.code, c.msg)
		})
	}
	if MaxTokenTimeout != 8760*time.Hour {
		t.Errorf("MaxTokenTimeout = %v", MaxTokenTimeout)
	}
}

func TestParseTokenComplete(t *testing.T) {
	for _, c := range []struct {
		name, raw, data, key string
	}{
		{"data", `{"data":{"approved": true, "by": "ann"}}`, `{"approved":true,"by":"ann"}`, ""},
		{"result", `{"result":[1, 2.50, "<&>"]}`, `[1,2.50,"<&>"]`, ""},
		{"key", `{"idempotency_key":"k-1","data":"x"}`, `"x"`, "k-1"},
		{"null data", `{"data":null}`, `null`, ""},
		{"null result", `{"result":null}`, `null`, ""},
		{"null key", `{"data":1,"idempotency_key":null}`, `1`, ""},
		{"no data", `{}`, `null`, ""},
		{"key only", `{"idempotency_key":"k"}`, `null`, "k"},
		{"empty body", ``, `null`, ""},
		{"space body", " \n\t", `null`, ""},
		{"space", " { \"data\" : [ 1 , { \"a\" : \"b c\" } ] }\n", `[1,{"a":"b c"}]`, ""},
		{"big number kept", `{"data":123456789012345678901234567890}`, `123456789012345678901234567890`, ""},
		{"escapes kept", `{"data":"\u003c\u2028"}`, `"\u003c\u2028"`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseTokenComplete([]byte(c.raw))
			if err != nil {
				t.Fatalf("ParseTokenComplete(%s): %v", c.raw, err)
			}
			if string(got.Data) != c.data || got.IdempotencyKey != c.key {
				t.Errorf("ParseTokenComplete(%s) = {%s %q}, want {%s %q}", c.raw, got.Data, got.IdempotencyKey, c.data, c.key)
			}
		})
	}
	for _, c := range []struct {
		name, raw string
		code      Code
		msg       string
	}{
		{"null", `null`, CodeInvalidRequest, "not null"},
		{"array", `[]`, CodeInvalidRequest, "must be a JSON object, not array"},
		{"bare data", `"done"`, CodeInvalidRequest, "must be a JSON object, not string"},
		{"both", `{"data":1,"result":1}`, CodeInvalidRequest, "both data and result"},
		{"unknown field", `{"data":1,"status":"ok"}`, CodeInvalidRequest, `unknown field "status"`},
		{"field in capitals", `{"Data":1}`, CodeInvalidRequest, `unknown field "Data"`},
		{"trailing", `{"data":1} {}`, CodeInvalidRequest, "nothing after it"},
		{"truncated", `{"data":1`, CodeInvalidRequest, "must be a JSON object"},
		{"invalid", `{"data":tru}`, CodeInvalidRequest, "must be a JSON object"},
		{"non-finite", `{"data":{"n":[1e400]}}`, CodeInvalidRequest, "data: the number 1e400 is not finite"},
		{"key number", `{"data":1,"idempotency_key":7}`, CodeInvalidRequest, "idempotency_key must be a string"},
		{"key 257 bytes", `{"data":1,"idempotency_key":"` + strings.Repeat("k", 257) + `"}`, CodeInvalidRequest, "idempotency_key is longer than 256 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseTokenComplete([]byte(c.raw))
			if err == nil {
				t.Fatalf("ParseTokenComplete(%s) = %+v, want an error", c.raw, got)
			}
			wantCode(t, "ParseTokenComplete", err, c.code, c.msg)
		})
	}

	// The data limit is of compact JSON; space does not count.
	data := `"` + strings.Repeat("d", MaxTokenDataBytes-2) + `"`
	spaced := `{"data":  ` + data + strings.Repeat(" ", 1000) + `}`
	if got, err := ParseTokenComplete([]byte(spaced)); err != nil || string(got.Data) != data {
		t.Errorf("data of MaxTokenDataBytes: %d bytes, %v", len(got.Data), err)
	}
	_, err := ParseTokenComplete([]byte(`{"data":"` + strings.Repeat("d", MaxTokenDataBytes-1) + `"}`))
	wantCode(t, "data of MaxTokenDataBytes+1", err, CodeLimitExceeded, "data is 262145 bytes of JSON; the limit is 262144")
	key := `{"data":1,"idempotency_key":"` + strings.Repeat("k", 256) + `"}`
	if got, err := ParseTokenComplete([]byte(key)); err != nil || len(got.IdempotencyKey) != 256 {
		t.Errorf("idempotency key of 256 bytes: %v", err)
	}
	body := []byte(`{"data":1` + strings.Repeat(" ", MaxTokenCompleteBody-len(`{"data":1}`)) + `}`)
	if _, err := ParseTokenComplete(body); err != nil {
		t.Errorf("body of the limit: %v", err)
	}
	_, err = ParseTokenComplete(append(body, ' '))
	wantCode(t, "body over the limit", err, CodeLimitExceeded, "")
}

func TestTokenCompleteJSON(t *testing.T) {
	// json.Unmarshal uses the same strict decoding.
	var c TokenComplete
	if err := json.Unmarshal([]byte(`{"result":{"a": 1},"idempotency_key":"k"}`), &c); err != nil || string(c.Data) != `{"a":1}` || c.IdempotencyKey != "k" {
		t.Errorf("json.Unmarshal = %+v, %v", c, err)
	}
	if err := json.Unmarshal([]byte(`{"data":1,"extra":2}`), &c); CodeOf(err) != CodeInvalidRequest {
		t.Errorf("json.Unmarshal with an unknown field = %v", err)
	}
	var wrapped struct{ C TokenComplete }
	if err := json.Unmarshal([]byte(`{"C":{}}`), &wrapped); err != nil || string(wrapped.C.Data) != "null" {
		t.Errorf("json.Unmarshal nested = %+v, %v", wrapped, err)
	}
	for _, c := range []struct {
		c    TokenComplete
		want string
	}{
		{TokenComplete{}, `{"data":null}`},
		{TokenComplete{Data: json.RawMessage(`[1]`), IdempotencyKey: "k"}, `{"data":[1],"idempotency_key":"k"}`},
	} {
		if b, err := json.Marshal(c.c); err != nil || string(b) != c.want {
			t.Errorf("json.Marshal(%+v) = %s, %v; want %s", c.c, b, err, c.want)
		}
	}
}

func TestTokenStateJSON(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	s := TokenCompletion{Status: TokenAlreadyCompleted, Token: TokenState{
		ID: "tok-1", SessionID: "ses-1", TurnID: "trn-1", Status: TokenCompleted, Tags: []string{"a"},
		Metadata: json.RawMessage(`{"m":1}`), Data: json.RawMessage(`{"d":2}`), CallbackURL: "https://x/cb", PublicAccessToken: "pat",
		CreatedAt: at, ExpiresAt: &at, CompletedAt: &at,
	}}
	want := `{"status":"already_completed","token":{"id":"tok-1","session_id":"ses-1","turn_id":"trn-1","status":"completed","tags":["a"],` +
		`"metadata":{"m":1},"data":{"d":2},"callback_url":"https://x/cb","public_access_token":"pat",` +
		`"created_at":"2025-01-02T03:04:05Z","expires_at":"2025-01-02T03:04:05Z","completed_at":"2025-01-02T03:04:05Z"}}`
	if b, err := json.Marshal(s); err != nil || string(b) != want {
		t.Errorf("json.Marshal = %s, %v\nwant %s", b, err, want)
	}
	b, err := json.Marshal(TokenState{ID: "tok-2", Status: TokenExpired, CreatedAt: at, ExpiredAt: &at})
	if want := `{"id":"tok-2","status":"expired","tags":null,"created_at":"2025-01-02T03:04:05Z","expired_at":"2025-01-02T03:04:05Z"}`; err != nil || string(b) != want {
		t.Errorf("json.Marshal = %s, %v\nwant %s", b, err, want)
	}
}

func TestCanonicalJSON(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{`1`, `1`},
		{`1.0`, `1`},
		{`1e2`, `100`},
		{`-0`, `0`},
		{`-0.0`, `0`},
		{`1e-400`, `0`},
		{`0.1`, `0.1`},
		{`1e21`, `1e+21`},
		{`1e20`, `100000000000000000000`},
		{`0.000001`, `0.000001`},
		{`1E-7`, `1e-7`},
		{`9007199254740993`, `9007199254740992`},
		{`"<&>\u2028"`, `"<&>\u2028"`},
		{`"\u00e9"`, `"é"`},
		{` { "b" : [ 1 , true , null ] , "a" : { "d" : 1 , "c" : 2 } } `, `{"a":{"c":2,"d":1},"b":[1,true,null]}`},
		{`{"a":1,"a":2}`, `{"a":2}`},
		{`[]`, `[]`},
		{`{}`, `{}`},
	} {
		got, err := CanonicalJSON([]byte(c.raw))
		if err != nil || string(got) != c.want {
			t.Errorf("CanonicalJSON(%s) = %s, %v; want %s", c.raw, got, err, c.want)
		}
	}
	for _, raw := range []string{``, `{`, `1 2`, `[1] x`, `1e400`, `{"a":[-1e999]}`, `'a'`} {
		if got, err := CanonicalJSON([]byte(raw)); err == nil {
			t.Errorf("CanonicalJSON(%s) = %s, want an error", raw, got)
		}
	}
	// Same data, different text: same canonical bytes.
	a, _ := CanonicalJSON([]byte(`{"ok":true,"n":[1,2.50]}`))
	b, _ := CanonicalJSON([]byte(`{ "n" : [ 1.0 , 25e-1 ] , "ok" : true }`))
	if !bytes.Equal(a, b) {
		t.Errorf("canonical forms differ: %s and %s", a, b)
	}
}

func FuzzParseTokenComplete(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"data":{"a":[1,2.5,"<&>"]}}`, `{"result":null}`, `{"data":1,"result":2}`,
		`{"data":"x","idempotency_key":"k"}`, `{"Data":1}`, `{"data":1e400}`, `{"data":-0}`, `null`, `[]`,
		`{"data":1} x`, "{\"data\":\"\xff\u2028\"}", `{"data":{"a":1,"a":2}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := ParseTokenComplete(raw)
		if err != nil {
			if code := CodeOf(err); code != CodeInvalidRequest && code != CodeLimitExceeded {
				t.Fatalf("ParseTokenComplete(%q): error %v has code %s", raw, err, code)
			}
			return
		}
		if len(c.Data) == 0 || len(c.Data) > MaxTokenDataBytes || CheckJSON(c.Data) != nil {
			t.Fatalf("ParseTokenComplete(%q): data %q", raw, c.Data)
		}
		if len(c.IdempotencyKey) > MaxIdempotencyKeyBytes {
			t.Fatalf("idempotency key of %d bytes", len(c.IdempotencyKey))
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, c.Data); err != nil || !bytes.Equal(compact.Bytes(), c.Data) {
			t.Fatalf("data %q is not compact", c.Data)
		}
		if _, err := CanonicalJSON(c.Data); err != nil {
			t.Fatalf("CanonicalJSON(%q): %v", c.Data, err)
		}
		b, err := marshalPlain(c)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		c2, err := ParseTokenComplete(b)
		if err != nil || !bytes.Equal(c2.Data, c.Data) || c2.IdempotencyKey != c.IdempotencyKey {
			t.Fatalf("re-parsed %s as %+v, %v", b, c2, err)
		}
	})
}
