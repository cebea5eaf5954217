package e2e

import (
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

type counted struct {
	N    int `json:"n"`
	PID  int `json:"pid"`
	Init int `json:"init"`
}

func countOf(t *testing.T, o helmrtype.TurnOutcome) counted {
	t.Helper()
	return completedResult[counted](t, o)
}

// An Actor receives a Session's Turns in one loop, in FIFO order, keeping
// its state; between Turns it is suspended after its idle timeout and a new
// Turn wakes it.
func TestActorReceivesTurnsInOrder(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("counter", text("a"))
	sid := r.Session.ID
	turns := []string{r.Turn.ID}
	for _, in := range []string{"b", "c"} {
		var ts helmrtype.TurnState
		p.must("POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: text(in)}, &ts)
		turns = append(turns, ts.ID)
	}
	var first counted
	for i, id := range turns {
		c := countOf(t, p.wait(sid, id))
		if i == 0 {
			first = c
		}
		if c.N != i+1 || c.PID != first.PID || c.Init != first.Init {
			t.Fatalf("turn %d: %+v (first %+v)", i, c, first)
		}
	}
	// Idle in Receive: suspended, then woken by the next Turn.
	p.waitEvent(sid, helmrtype.EventWaitSuspended)
	if !p.cp.Supervisor.Suspended(sid) {
		t.Fatal("the idle actor is not suspended")
	}
	enqueue := func(in string) string {
		var ts helmrtype.TurnState
		p.must("POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: text(in)}, &ts)
		return ts.ID
	}
	if c := countOf(t, p.wait(sid, enqueue("d"))); c.N != 4 || c.PID != first.PID {
		t.Fatalf("turn after suspension: %+v", c)
	}
	if !hasEvent(p, sid, helmrtype.EventWaitResumed) {
		t.Error("no wait.resumed event")
	}
	// A timer inside an Actor's Turn; a failed Turn; a Turn left to the
	// next Receive; the loop goes on after each.
	if c := countOf(t, p.wait(sid, enqueue("wait"))); c.N != 5 {
		t.Fatalf("timer turn: %+v", c)
	}
	if o := p.wait(sid, enqueue("fail")); o.Status != "failed" || o.Error.Code != helmrtype.CodeHandlerFailed {
		t.Fatalf("failed turn: %+v", o)
	}
	if o := p.wait(sid, enqueue("implicit")); o.Status != "completed" || string(o.Result) != "null" {
		t.Fatalf("implicitly completed turn: %+v %s", o, o.Result)
	}
	blocked := enqueue("block")
	waitRunning(t, p, sid, blocked)
	p.must("POST", "/v1/sessions/"+sid+"/turns/"+blocked+"/interrupt", map[string]any{}, nil)
	if o := p.wait(sid, blocked); o.Status != "interrupted" {
		t.Fatalf("interrupted actor turn: %+v", o)
	}
	if c := countOf(t, p.wait(sid, enqueue("e"))); c.N != 9 || c.PID != first.PID {
		t.Fatalf("turn after the others: %+v", c)
	}
}

// waitRunning waits until the Turn runs.
func waitRunning(t *testing.T, p *plane, sid, turnID string) {
	t.Helper()
	for range 3000 {
		var ts helmrtype.TurnState
		p.must("GET", "/v1/sessions/"+sid+"/turns/"+turnID, nil, &ts)
		if ts.Status == "running" {
			return
		}
		ch, stop := p.cp.Engine.Watch(sid)
		select {
		case <-ch:
		case <-time.After(10 * time.Millisecond):
		}
		stop()
	}
	t.Fatalf("turn %s never ran", turnID)
}
