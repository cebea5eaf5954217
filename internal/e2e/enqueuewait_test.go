package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
)

// TestEnqueueAndWait: POST /v1/sessions and POST …/turns with ?wait=
// answer the admitted Turn settled when it settles in time (through
// helmrclient's Wait option, whose handle then waits without another
// request), the receipt when the wait runs out first, and refuse a bad
// wait before admitting anything.
func TestEnqueueAndWait(t *testing.T) {
	p := startPlane(t, "")
	c := helmrclient.New(p.url, p.key)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	rec, err := c.Sessions.Create(ctx, "echo", helmrclient.Text("first"), helmrclient.CreateOptions{Wait: 50 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if st := rec.Turn.State(); st.Status != helmrtype.TurnCompleted || len(st.Result) == 0 || rec.Replayed {
		t.Fatalf("create with wait: %+v", st)
	}
	sess := rec.Session
	for i := range 3 {
		tr, err := sess.Enqueue(ctx, helmrclient.Text("again"), helmrclient.EnqueueOptions{Wait: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		st := tr.State()
		if st.Status != helmrtype.TurnCompleted || st.Sequence != int64(i+2) || st.TerminalAt == nil || string(st.Input) != `[{"type":"text","text":"again"}]` {
			t.Fatalf("enqueue with wait: %+v", st)
		}
		// The handle knows the settlement: Wait needs no server (a
		// cancelled context would fail any request).
		done, stop := context.WithCancel(ctx)
		stop()
		o, err := tr.Wait(done)
		if err != nil || o.Status != helmrtype.TurnCompleted || string(o.Result) != string(st.Result) {
			t.Fatalf("wait on a settled handle: %+v %v", o, err)
		}
	}

	// A Turn that does not settle within the wait: the receipt, queued.
	chat := p.create("chat", text("hi"))
	waitOutput(t, p, chat.Session.ID, "listening")
	var queued helmrtype.TurnState
	start := time.Now()
	p.must("POST", "/v1/sessions/"+chat.Session.ID+"/turns?wait=200ms", helmrtype.EnqueueRequest{Input: text("next")}, &queued)
	if queued.Status != helmrtype.TurnQueued || queued.ID == "" {
		t.Fatalf("enqueue whose wait ran out: %+v", queued)
	}
	if time.Since(start) < 200*time.Millisecond {
		t.Fatalf("answered before its wait of 200ms ran out")
	}

	// A bad wait is refused, and nothing is admitted.
	before := p.turnCount(chat.Session.ID)
	err = p.call("POST", "/v1/sessions/"+chat.Session.ID+"/turns?wait=soon", helmrtype.EnqueueRequest{Input: text("never")}, nil)
	var he *helmrtype.Error
	if !errors.As(err, &he) || he.Code != helmrtype.CodeInvalidRequest || he.Status != 400 {
		t.Fatalf("enqueue with a bad wait: %v", err)
	}
	if err := p.call("POST", "/v1/sessions?wait=-1s", helmrtype.SessionCreateRequest{Agent: "echo", Input: text("x")}, nil); !errors.Is(err, helmrtype.CodeInvalidRequest) {
		t.Fatalf("create with a bad wait: %v", err)
	}
	if after := p.turnCount(chat.Session.ID); after != before {
		t.Fatalf("a refused enqueue admitted a Turn: %d -> %d", before, after)
	}

	// helmr session create --wait waits in the creation: settled, or exit
	// 5 when --timeout runs out first (the Turn goes on).
	srv := &server{url: p.url, key: p.key}
	out, errOut, code := srv.cli(t, "session", "create", "--agent", "echo", "--text", "hi", "--wait", "--json")
	var created struct {
		Turn    helmrtype.TurnState    `json:"turn"`
		Outcome *helmrtype.TurnOutcome `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(out), &created); code != 0 || err != nil || created.Outcome == nil ||
		created.Outcome.Status != helmrtype.TurnCompleted || created.Turn.Status != helmrtype.TurnCompleted {
		t.Fatalf("session create --wait: exit %d %v: %s %s", code, err, out, errOut)
	}
	if out, errOut, code := srv.cli(t, "session", "create", "--agent", "chat", "--text", "hi", "--wait", "--timeout", "1s"); code != 5 || !strings.Contains(out+errOut, "1s") {
		t.Fatalf("session create --wait --timeout 1s on a Turn that waits: exit %d: %q %q", code, out, errOut)
	}
}

// turnCount is how many Turns the Session has.
func (p *plane) turnCount(sid string) int {
	var page helmrtype.TurnPage
	p.must("GET", "/v1/sessions/"+sid+"/turns?limit=100", nil, &page)
	return len(page.Turns)
}
