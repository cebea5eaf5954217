package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

func (p *plane) send(sessionID, turnID, msg string) helmrtype.MessageReceipt {
	p.t.Helper()
	var rec helmrtype.MessageReceipt
	p.must("POST", "/v1/sessions/"+sessionID+"/turns/"+turnID+"/messages", helmrtype.MessageRequest{Content: text(msg)}, &rec)
	if rec.Status != "accepted" || rec.ID == "" {
		p.t.Fatalf("message receipt %+v", rec)
	}
	return rec
}

func TestMessagesDeliveredAndRejected(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("chat", text("start"))
	sid, tid := r.Session.ID, r.Turn.ID
	p.waitEvent(sid, "turn.running")
	ok1 := p.send(sid, tid, "ok one")
	no := p.send(sid, tid, "no thanks")
	ok2 := p.send(sid, tid, "ok two")
	p.send(sid, tid, "done")
	o := p.wait(sid, tid)
	if o.Status != "completed" || string(o.Result) != `["ok one","ok two"]` {
		t.Fatalf("outcome %+v %s", o, o.Result)
	}
	delivered, rejected := map[string]bool{}, map[string]string{}
	for _, e := range p.events(sid) {
		var d map[string]any
		json.Unmarshal(e.Data, &d)
		switch e.Kind {
		case "message.delivered":
			delivered[d["message_id"].(string)] = true
		case "message.rejected":
			rejected[d["message_id"].(string)] = d["reason"].(string)
			if d["delivery"] != "not_delivered" {
				t.Errorf("rejected delivery %v", d["delivery"])
			}
		}
	}
	if !delivered[ok1.ID] || !delivered[ok2.ID] || rejected[no.ID] != "message_rejected" || delivered[no.ID] {
		t.Fatalf("delivered %v rejected %v", delivered, rejected)
	}
	// A message to a settled Turn is refused.
	err := p.call("POST", "/v1/sessions/"+sid+"/turns/"+tid+"/messages", helmrtype.MessageRequest{Content: text("late")}, nil)
	if !errors.Is(err, helmrtype.CodeTurnSettled) {
		t.Fatalf("late message: %v", err)
	}
	// A message handler that fails fails the Turn with callback_failed.
	var ts helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: text("again")}, &ts)
	p.send(sid, ts.ID, "explode")
	if o := p.wait(sid, ts.ID); o.Status != "failed" || o.Error.Code != helmrtype.CodeCallbackFailed {
		t.Fatalf("exploding handler: %+v", o)
	}
}

func TestInterruptRunsOnCancel(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("slow", text("x"))
	sid, tid := r.Session.ID, r.Turn.ID
	p.waitEvent(sid, "turn.output")
	var rec helmrtype.TurnInterruptReceipt
	p.must("POST", "/v1/sessions/"+sid+"/turns/"+tid+"/interrupt", map[string]string{"idempotency_key": "stop-1"}, &rec)
	if rec.Status != "accepted" || rec.TurnID != tid || rec.SessionID != sid {
		t.Fatalf("receipt %+v", rec)
	}
	o := p.wait(sid, tid)
	if o.Status != "interrupted" || o.Error == nil || o.Error.Code != helmrtype.CodeInterrupted || o.Result != nil {
		t.Fatalf("outcome %+v", o)
	}
	if !p.hasOutput(sid, "cleanup ran") {
		t.Fatal("OnCancel did not write its output")
	}
	// Same key: same receipt, even after the Turn settled.
	var again helmrtype.TurnInterruptReceipt
	p.must("POST", "/v1/sessions/"+sid+"/turns/"+tid+"/interrupt", map[string]string{"idempotency_key": "stop-1"}, &again)
	if again != rec {
		t.Fatalf("replay %+v != %+v", again, rec)
	}
	// A settled Turn cannot be interrupted anew; the process kept serving.
	if err := p.call("POST", "/v1/sessions/"+sid+"/turns/"+tid+"/interrupt", nil, nil); !errors.Is(err, helmrtype.CodeTurnSettled) {
		t.Fatalf("interrupt settled: %v", err)
	}
}

func TestDeadlineInterruptsTurn(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("deadline", text("x"))
	o := p.wait(r.Session.ID, r.Turn.ID)
	if o.Status != "interrupted" || o.Error == nil || o.Error.Code != helmrtype.CodeDeadlineExceeded {
		t.Fatalf("outcome %+v", o)
	}
	p.waitEvent(r.Session.ID, "session.deadline")
	var outputs []string
	for _, e := range p.events(r.Session.ID) {
		if e.Kind == "turn.output" {
			outputs = append(outputs, string(e.Data))
		}
	}
	if len(outputs) != 2 || !strings.Contains(outputs[0], "deadline set") || !strings.Contains(outputs[1], "deadline cleanup") {
		t.Fatalf("the turn's ctx had no deadline or OnCancel did not run: %q", outputs)
	}
}

func TestIdempotentCreateAndEnqueue(t *testing.T) {
	p := startPlane(t, "")
	req := helmrtype.SessionCreateRequest{Agent: "echo", Input: text("hi"), IdempotencyKey: "create-1"}
	var a, b helmrtype.SessionCreateReceipt
	p.must("POST", "/v1/sessions", req, &a)
	p.must("POST", "/v1/sessions", req, &b)
	if a.Session.ID != b.Session.ID || a.Turn.ID != b.Turn.ID {
		t.Fatalf("replay gave another receipt: %v %v", a.Session.ID, b.Session.ID)
	}
	req.Input = text("other")
	if err := p.call("POST", "/v1/sessions", req, nil); !errors.Is(err, helmrtype.CodeIdempotencyConflict) || err.(*helmrtype.Error).Status != 409 {
		t.Fatalf("different body: %v", err)
	}
	// A replay without input keeps its null Turn.
	var c, d helmrtype.SessionCreateReceipt
	p.must("POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "echo", IdempotencyKey: "create-2"}, &c)
	p.must("POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "echo", IdempotencyKey: "create-2"}, &d)
	if c.Turn != nil || d.Turn != nil || c.Session.ID != d.Session.ID {
		t.Fatalf("null turn replay %+v %+v", c, d)
	}
	enq := helmrtype.EnqueueRequest{Input: text("next"), IdempotencyKey: "enq-1"}
	var t1, t2 helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+a.Session.ID+"/turns", enq, &t1)
	p.must("POST", "/v1/sessions/"+a.Session.ID+"/turns", enq, &t2)
	if t1.ID != t2.ID || t1.Sequence != 2 {
		t.Fatalf("enqueue replay %+v %+v", t1, t2)
	}
	enq.Input = text("different")
	if err := p.call("POST", "/v1/sessions/"+a.Session.ID+"/turns", enq, nil); !errors.Is(err, helmrtype.CodeIdempotencyConflict) {
		t.Fatalf("enqueue conflict: %v", err)
	}
	var page helmrtype.TurnPage
	p.must("GET", "/v1/sessions/"+a.Session.ID+"/turns", nil, &page)
	if len(page.Turns) != 2 {
		t.Fatalf("%d turns, want 2", len(page.Turns))
	}
	// Keys: an occupied key conflicts; the exact lookup finds it.
	var k helmrtype.SessionCreateReceipt
	p.must("POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "echo", Key: "conv-1"}, &k)
	if err := p.call("POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "echo", Key: "conv-1"}, nil); !errors.Is(err, helmrtype.CodeSessionKeyConflict) {
		t.Fatalf("key conflict: %v", err)
	}
	var sp helmrtype.SessionPage
	p.must("GET", "/v1/sessions?agent=echo&key=conv-1", nil, &sp)
	if len(sp.Sessions) != 1 || sp.Sessions[0].ID != k.Session.ID {
		t.Fatalf("key lookup %+v", sp)
	}
}

func TestBadRequests(t *testing.T) {
	p := startPlane(t, "")
	for _, c := range []struct {
		method, path, body string
		code               helmrtype.Code
		status             int
	}{
		{"POST", "/v1/sessions", `{"agent":"nope"}`, helmrtype.CodeNotFound, 404},
		{"POST", "/v1/sessions", `{"agent":"echo","surprise":1}`, helmrtype.CodeInvalidRequest, 400},
		{"POST", "/v1/sessions", `not json`, helmrtype.CodeInvalidRequest, 400},
		{"POST", "/v1/sessions", ``, helmrtype.CodeInvalidRequest, 400},
		{"POST", "/v1/sessions", `{"agent":"echo","input":[{"type":"json","value":1}]}`, helmrtype.CodeInputInvalid, 400},
		{"GET", "/v1/sessions/00000000-0000-0000-0000-000000000000", ``, helmrtype.CodeNotFound, 404},
		{"GET", "/v1/sessions?limit=1000", ``, helmrtype.CodeInvalidRequest, 400},
		{"GET", "/v1/sessions?limit=0", ``, helmrtype.CodeInvalidRequest, 400},
		{"GET", "/v1/sessions?limit=x", ``, helmrtype.CodeInvalidRequest, 400},
		{"GET", "/v1/sessions?key=k", ``, helmrtype.CodeInvalidRequest, 400},
		{"GET", "/v1/sessions?agent=echo&key=k&limit=10", ``, helmrtype.CodeInvalidRequest, 400},
		{"GET", "/v1/sessions?agent=echo&key=k&cursor=x", ``, helmrtype.CodeInvalidRequest, 400},
		{"GET", "/v1/sessions?agent=echo&key=k&status=open", ``, helmrtype.CodeInvalidRequest, 400},
		{"GET", "/v1/agents/nope", ``, helmrtype.CodeNotFound, 404},
		{"GET", "/v1/nothing", ``, helmrtype.CodeNotFound, 404},
	} {
		req, _ := http.NewRequest(c.method, p.url+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+p.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var env helmrtype.ErrorEnvelope
		json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if resp.StatusCode != c.status || env.Error == nil || env.Error.Code != c.code || env.Error.Message == "" {
			t.Errorf("%s %s %s: %d %+v, want %d %s", c.method, c.path, c.body, resp.StatusCode, env.Error, c.status, c.code)
		}
	}
	req, _ := http.NewRequest("GET", p.url+"/v1/sessions", nil)
	req.Header.Set("Authorization", "Bearer wrong")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("bad key: %d", resp.StatusCode)
	}
}

// sseRead reads SSE records until n events arrived, returning them and the
// open response (for the caller to close).
func sseRead(t *testing.T, p *plane, sessionID string, lastID string, n int) ([]helmrtype.SessionEvent, *http.Response) {
	t.Helper()
	req, _ := http.NewRequest("GET", p.url+"/v1/sessions/"+sessionID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+p.key)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("stream status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var out []helmrtype.SessionEvent
	var id string
	for len(out) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			var e helmrtype.SessionEvent
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e); err != nil {
				t.Fatal(err)
			}
			if strconv.FormatInt(e.Sequence, 10) != id {
				t.Fatalf("id %s for sequence %d", id, e.Sequence)
			}
			out = append(out, e)
		}
	}
	return out, resp
}

func TestEventsPagedAndStreamedWithResume(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("echo", text("a"))
	p.wait(r.Session.ID, r.Turn.ID)
	var page helmrtype.SessionEventPage
	p.must("GET", "/v1/sessions/"+r.Session.ID+"/events?after=0&limit=2", nil, &page)
	if len(page.Records) != 2 || !page.HasMore || page.NextAfter != 2 || page.Records[0].Sequence != 1 {
		t.Fatalf("page %+v", page)
	}
	p.must("GET", "/v1/sessions/"+r.Session.ID+"/events?after=2&limit=1000", nil, &page)
	if page.HasMore || page.Records[0].Sequence != 3 {
		t.Fatalf("page 2 %+v", page)
	}
	total := int(page.NextAfter)
	// Stream: read the first 3, drop the connection, resume from the last.
	first, resp := sseRead(t, p, r.Session.ID, "", 3)
	resp.Body.Close()
	// New work arrives while disconnected.
	var ts helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+r.Session.ID+"/turns", helmrtype.EnqueueRequest{Input: text("b")}, &ts)
	p.wait(r.Session.ID, ts.ID)
	all := p.events(r.Session.ID)
	rest, resp := sseRead(t, p, r.Session.ID, fmt.Sprint(first[len(first)-1].Sequence), len(all)-3)
	defer resp.Body.Close()
	got := append(first, rest...)
	if len(got) != len(all) || len(all) <= total {
		t.Fatalf("streamed %d records, timeline has %d", len(got), len(all))
	}
	for i, e := range got {
		if e.Sequence != int64(i+1) || e.Kind != all[i].Kind {
			t.Fatalf("record %d: %d %s, want %d %s", i, e.Sequence, e.Kind, i+1, all[i].Kind)
		}
	}
	// Live: a stream that is caught up receives new records as they commit.
	live := make(chan helmrtype.SessionEvent, 16)
	go func() {
		evs, resp := sseRead(t, p, r.Session.ID, fmt.Sprint(len(all)), 1)
		resp.Body.Close()
		for _, e := range evs {
			live <- e
		}
	}()
	p.must("POST", "/v1/sessions/"+r.Session.ID+"/turns", helmrtype.EnqueueRequest{Input: text("c")}, &ts)
	select {
	case e := <-live:
		if e.Sequence != int64(len(all)+1) || e.Kind != "turn.queued" {
			t.Fatalf("live record %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no live record")
	}
}

func TestHealthAndReadiness(t *testing.T) {
	p := startPlane(t, "")
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(p.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	var d helmrtype.Deployment
	p.must("GET", "/v1/deployments/current", nil, &d)
	if !d.Current || len(d.Agents) != len(agentBinary(t).Manifest.Agents) || d.Manifest.Version != helmrtype.ManifestVersion {
		t.Fatalf("current deployment %+v", d)
	}
	var page helmrtype.DeploymentPage
	p.must("GET", "/v1/deployments", nil, &page)
	if len(page.Deployments) != 1 || page.Deployments[0].ID != d.ID {
		t.Fatalf("deployments %+v", page)
	}
}

// pidOf reads the process ID a slow-agent Turn reported.
func pidOf(t *testing.T, p *plane, sessionID, turnID string) string {
	t.Helper()
	for _, e := range p.events(sessionID) {
		if e.Kind == "turn.output" && *e.TurnID == turnID {
			if _, after, ok := strings.Cut(string(e.Data), "pid="); ok {
				return strings.TrimRight(after, `\n"}]`)
			}
		}
	}
	t.Fatalf("turn %s reported no pid", turnID)
	return ""
}

func TestInterruptedTurnLeavesAHealthyProcess(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("slow", text("x"))
	p.waitEvent(r.Session.ID, "turn.output")
	p.must("POST", "/v1/sessions/"+r.Session.ID+"/turns/"+r.Turn.ID+"/interrupt", nil, nil)
	p.wait(r.Session.ID, r.Turn.ID)
	var ts helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+r.Session.ID+"/turns", helmrtype.EnqueueRequest{Input: text("quick")}, &ts)
	o := p.wait(r.Session.ID, ts.ID)
	var res map[string]int
	json.Unmarshal(o.Result, &res)
	if o.Status != "completed" || fmt.Sprint(res["pid"]) != pidOf(t, p, r.Session.ID, r.Turn.ID) {
		t.Fatalf("next turn %+v ran in pid %d, the interrupted one in %s", o, res["pid"], pidOf(t, p, r.Session.ID, r.Turn.ID))
	}
}

func TestFailedCleanupRetiresTheProcess(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("slow", text("failcleanup"))
	var next helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+r.Session.ID+"/turns", helmrtype.EnqueueRequest{Input: text("quick")}, &next)
	p.waitEvent(r.Session.ID, "turn.output")
	p.must("POST", "/v1/sessions/"+r.Session.ID+"/turns/"+r.Turn.ID+"/interrupt", nil, nil)
	o := p.wait(r.Session.ID, r.Turn.ID)
	if o.Status != "interrupted" || o.Error == nil || o.Error.Code != helmrtype.CodeCleanupFailed {
		t.Fatalf("turn with a failing callback: %+v", o.Error)
	}
	// The Session is held (process_failed); after resume the queued Turn
	// runs on a new process, never on the unusable one.
	p.waitEvent(r.Session.ID, "session.process_failed")
	// The retired process is gone before anything else runs.
	var s helmrtype.Session
	p.must("GET", "/v1/sessions/"+r.Session.ID, nil, &s)
	for deadline := time.Now().Add(10 * time.Second); pidOfComputer(p, *s.ComputerID) != 0; {
		if time.Now().After(deadline) {
			t.Fatal("the unusable process is still alive")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.resumeHold(r.Session.ID, helmrtype.HoldProcessFailed)
	o = p.wait(r.Session.ID, next.ID)
	if o.Status != "completed" || pidOfComputer(p, *s.ComputerID) == 0 {
		t.Fatalf("queued turn after a failed cleanup: %+v (a new process should serve it)", o)
	}
	p.waitEvent(r.Session.ID, "session.process_failed")
}

func TestOnCancelRegisteredAfterCancellationRuns(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("slow", text("late"))
	p.waitEvent(r.Session.ID, "turn.output")
	p.must("POST", "/v1/sessions/"+r.Session.ID+"/turns/"+r.Turn.ID+"/interrupt", nil, nil)
	if o := p.wait(r.Session.ID, r.Turn.ID); o.Status != "interrupted" || o.Error.Code != helmrtype.CodeInterrupted {
		t.Fatalf("late registration: %+v", o.Error)
	}
	if !p.hasOutput(r.Session.ID, "cleanup ran") {
		t.Fatal("a callback registered after cancellation did not run")
	}
}

func TestMessagesToAQueuedTurnAndIdempotency(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("chat", text("first"))
	sid := r.Session.ID
	var second helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: text("second")}, &second)
	// Sent while the Turn is queued and before it registers its handler.
	var a, b helmrtype.MessageReceipt
	req := helmrtype.MessageRequest{Content: text("ok early"), IdempotencyKey: "m-1"}
	p.must("POST", "/v1/sessions/"+sid+"/turns/"+second.ID+"/messages", req, &a)
	p.must("POST", "/v1/sessions/"+sid+"/turns/"+second.ID+"/messages", req, &b)
	if a != b {
		t.Fatalf("replayed message: %+v vs %+v", a, b)
	}
	req.Content = text("ok different")
	if err := p.call("POST", "/v1/sessions/"+sid+"/turns/"+second.ID+"/messages", req, nil); !errors.Is(err, helmrtype.CodeIdempotencyConflict) {
		t.Fatalf("same key, other message: %v", err)
	}
	p.send(sid, r.Turn.ID, "done")
	p.waitEvent(sid, "message.delivered")
	p.send(sid, second.ID, "done")
	if o := p.wait(sid, second.ID); o.Status != "completed" || string(o.Result) != `["ok early"]` {
		t.Fatalf("queued turn's messages: %+v %s", o, o.Result)
	}
	n := 0
	for _, e := range p.events(sid) {
		if e.Kind == "message.admitted" && *e.TurnID == second.ID {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d messages admitted to the second turn, want 2 (the replay admits nothing)", n)
	}
}
