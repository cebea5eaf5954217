package e2e

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/helmr-go/helmr/helmrtype"
)

func TestCreateWithAndWithoutInput(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("echo", nil)
	if r.Turn != nil || r.Session.InitialTurn != nil || r.Session.Status != "open" || r.Session.IdleSince == nil {
		t.Fatalf("create without input: %+v", r)
	}
	r = p.create("echo", text("hello"))
	if r.Turn == nil || r.Turn.Status != "queued" || r.Turn.Sequence != 1 || r.Session.InitialTurn.ID != r.Turn.ID {
		t.Fatalf("create with input: %+v", r)
	}
	o := p.wait(r.Session.ID, r.Turn.ID)
	if o.Status != "completed" || o.Response.PlainText() != "hello" {
		t.Fatalf("outcome: %+v", o)
	}
	var res map[string]any
	json.Unmarshal(o.Result, &res)
	if res["session"] != r.Session.ID || res["recovery"] != "initial" || res["source"] != "api_key" {
		t.Fatalf("result: %v", res)
	}
	var s helmrtype.Session
	p.must("GET", "/v1/sessions/"+r.Session.ID, nil, &s)
	if s.InitialTurn.Status != "completed" || s.ComputerID == nil || s.DeploymentID == "" || s.CloseAfterIdle != "7d" || s.IdleSince == nil {
		t.Fatalf("session after: %+v", s)
	}
	var kinds []string
	var out strings.Builder
	for _, e := range p.events(r.Session.ID) {
		kinds = append(kinds, e.Kind)
		if e.Kind == "turn.output" {
			var d struct{ Content helmrtype.Content }
			json.Unmarshal(e.Data, &d)
			out.WriteString(d.Content.PlainText())
		}
	}
	want := "turn.queued turn.running turn.output turn.output turn.completed"
	if strings.Join(kinds, " ") != want {
		t.Fatalf("events %v, want %s", kinds, want)
	}
	if out.String() != "echo: hello" {
		t.Fatalf("output %q", out.String())
	}
}

func TestFIFOOfEnqueuedTurns(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("echo", text("sleep 200ms"))
	var turns []helmrtype.TurnState
	for _, in := range []string{"one", "two", "three"} {
		var ts helmrtype.TurnState
		p.must("POST", "/v1/sessions/"+r.Session.ID+"/turns", helmrtype.EnqueueRequest{Input: text(in)}, &ts)
		turns = append(turns, ts)
	}
	for i, ts := range turns {
		o := p.wait(r.Session.ID, ts.ID)
		if o.Status != "completed" || ts.Sequence != int64(i+2) {
			t.Fatalf("turn %d: %+v %+v", i, ts, o)
		}
	}
	// Turns ran one at a time in admission order.
	var order []string
	running := 0
	for _, e := range p.events(r.Session.ID) {
		switch e.Kind {
		case "turn.running":
			running++
			if running > 1 {
				t.Fatal("two turns ran at once")
			}
			order = append(order, *e.TurnID)
		case "turn.completed":
			running--
		}
	}
	want := []string{r.Turn.ID, turns[0].ID, turns[1].ID, turns[2].ID}
	if strings.Join(order, ",") != strings.Join(want, ",") {
		t.Fatalf("order %v want %v", order, want)
	}
	var page helmrtype.TurnPage
	p.must("GET", "/v1/sessions/"+r.Session.ID+"/turns?limit=2", nil, &page)
	if len(page.Turns) != 2 || page.NextCursor == "" || page.Turns[0].ID != r.Turn.ID {
		t.Fatalf("turn page %+v", page)
	}
}

func TestTypedInputAndResultValidation(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("typed", json.RawMessage(`{"issue": 7}`))
	o := p.wait(r.Session.ID, r.Turn.ID)
	if o.Status != "completed" || string(o.Result) != `{"reviewed":true,"note":"init=42 (checked)"}` || o.Response.PlainText() != "issue 7" {
		t.Fatalf("valid: %+v %s", o, o.Result)
	}
	var ts helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+r.Session.ID+"/turns", helmrtype.EnqueueRequest{Input: json.RawMessage(`{"issue":"seven"}`)}, &ts)
	o = p.wait(r.Session.ID, ts.ID)
	if o.Status != "failed" || o.Error == nil || o.Error.Code != helmrtype.CodeInputInvalid {
		t.Fatalf("invalid input: %+v", o)
	}
	p.must("POST", "/v1/sessions/"+r.Session.ID+"/turns", helmrtype.EnqueueRequest{Input: json.RawMessage(`{"issue":13}`)}, &ts)
	o = p.wait(r.Session.ID, ts.ID)
	if o.Status != "failed" || o.Error == nil || o.Error.Code != helmrtype.CodeResultInvalid || o.Response != nil || o.Result != nil {
		t.Fatalf("invalid result: %+v", o)
	}
	// Text agents refuse non-text input at admission.
	err := p.call("POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "echo", Input: json.RawMessage(`"just a string"`)}, nil)
	if !errors.Is(err, helmrtype.CodeInputInvalid) {
		t.Fatalf("text agent with string input: %v", err)
	}
}

func TestHandlerErrorsAndLimits(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("echo", text("fail"))
	o := p.wait(r.Session.ID, r.Turn.ID)
	if o.Status != "failed" || o.Error == nil || !strings.Contains(o.Error.Message, "boom: the handler failed") {
		t.Fatalf("fail: %+v", o)
	}
	var ts helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+r.Session.ID+"/turns", helmrtype.EnqueueRequest{Input: text("panic")}, &ts)
	if o := p.wait(r.Session.ID, ts.ID); o.Status != "failed" || !strings.Contains(o.Error.Message, "kaboom") {
		t.Fatalf("panic: %+v", o)
	}
	// The process survived both: the next Turn completes.
	p.must("POST", "/v1/sessions/"+r.Session.ID+"/turns", helmrtype.EnqueueRequest{Input: text("after")}, &ts)
	if o := p.wait(r.Session.ID, ts.ID); o.Status != "completed" {
		t.Fatalf("after failures: %+v", o)
	}

	r = p.create("limits", text("go"))
	o = p.wait(r.Session.ID, r.Turn.ID)
	var got map[string]string
	json.Unmarshal(o.Result, &got)
	want := map[string]string{"respond1": "ok", "respond2": "response_already_staged", "too_large": "limit_exceeded",
		"too_many_parts": "limit_exceeded", "budget": "limit_exceeded"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if o.Status != "completed" || o.Response == nil || len(o.Response) != 1 || o.Response.PlainText() != "" {
		t.Fatalf("limits outcome: %+v", o)
	}
}

func TestOutputPipeAndContext(t *testing.T) {
	p := startPlane(t, "")
	var r helmrtype.SessionCreateReceipt
	p.must("POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "echo", Input: text("pipe"), Key: "conv"}, &r)
	o := p.wait(r.Session.ID, r.Turn.ID)
	if o.Status != "completed" {
		t.Fatalf("pipe: %+v", o)
	}
	var res map[string]string
	json.Unmarshal(o.Result, &res)
	var s helmrtype.Session
	p.must("GET", "/v1/sessions/"+r.Session.ID, nil, &s)
	if res["computer"] != *s.ComputerID || res["deployment"] != s.DeploymentID || res["key"] != "conv" {
		t.Fatalf("context %v vs session %+v", res, s)
	}
	var parts []string
	for _, e := range p.events(r.Session.ID) {
		if e.Kind == "turn.output" {
			var d struct{ Content helmrtype.Content }
			json.Unmarshal(e.Data, &d)
			for _, part := range d.Content {
				if part.Type == "text" {
					parts = append(parts, part.Text)
				} else {
					parts = append(parts, string(part.Value))
				}
			}
		}
	}
	if strings.Join(parts, "|") != `a|b|c|d|{"n":1}` {
		t.Fatalf("piped output %q", parts)
	}
}

func TestConcurrentOutputAndEmptyContent(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("echo", text("concurrent"))
	o := p.wait(r.Session.ID, r.Turn.ID)
	var res struct{ Seqs []int64 }
	json.Unmarshal(o.Result, &res)
	seen := map[int64]bool{}
	for _, s := range res.Seqs {
		if s == 0 || seen[s] {
			t.Fatalf("output receipts %v: each write needs its own sequence", res.Seqs)
		}
		seen[s] = true
	}
	n := 0
	for _, e := range p.events(r.Session.ID) {
		if e.Kind == "turn.output" {
			n++
			if !seen[e.Sequence] {
				t.Fatalf("output record %d has no receipt", e.Sequence)
			}
		}
	}
	if o.Status != "completed" || n != 10 {
		t.Fatalf("%s with %d output records, want 10", o.Status, n)
	}

	// An explicit empty response stays distinct from none.
	var ts helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+r.Session.ID+"/turns", helmrtype.EnqueueRequest{Input: text("empty")}, &ts)
	p.wait(r.Session.ID, ts.ID)
	var raw map[string]json.RawMessage
	p.must("GET", "/v1/sessions/"+r.Session.ID+"/turns/"+ts.ID, nil, &raw)
	if string(raw["response"]) != "[]" {
		t.Fatalf("explicit empty response: %s in %v", raw["response"], raw)
	}
	events := p.events(r.Session.ID)
	for _, e := range events {
		if e.Kind == "turn.output" && *e.TurnID == ts.ID && string(e.Data) != `{"content":[]}` {
			t.Fatalf("empty output record: %s", e.Data)
		}
	}
	var first map[string]json.RawMessage
	p.must("GET", "/v1/sessions/"+r.Session.ID+"/turns/"+r.Turn.ID, nil, &first)
	if _, ok := first["response"]; ok {
		t.Fatalf("a turn that staged no response shows one: %s", first["response"])
	}
}

func TestInitFailureFailsEachTurnOnce(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("badinit", text("one"))
	var more []helmrtype.TurnState
	for _, in := range []string{"two", "three"} {
		var ts helmrtype.TurnState
		p.must("POST", "/v1/sessions/"+r.Session.ID+"/turns", helmrtype.EnqueueRequest{Input: text(in)}, &ts)
		more = append(more, ts)
	}
	// Each failed init costs the Turn it would have run and holds the
	// Session (process_failed): no loop; a resume tries again.
	for i, id := range []string{r.Turn.ID, more[0].ID, more[1].ID} {
		if i > 0 {
			p.resumeHold(r.Session.ID, helmrtype.HoldProcessFailed)
		}
		o := p.wait(r.Session.ID, id)
		if o.Status != "failed" || !strings.Contains(o.Error.Message, "no credentials for the model") {
			t.Fatalf("turn %s: %+v", id, o.Error)
		}
	}
	p.waitEvent(r.Session.ID, "session.process_failed")
}
