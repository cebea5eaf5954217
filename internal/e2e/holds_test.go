package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/store"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
)

// child makes a Session owned by parent (the runtime MCP issue's spawn will
// make these) and admits a Turn with input in it.
func (p *plane) child(parent, input string) (sid, turnID string) {
	p.t.Helper()
	ctx := context.Background()
	sid = engine.NewID()
	err := p.cp.Store.Update(ctx, func(tx store.Tx) error {
		s, err := tx.GetSession(ctx, parent)
		if err != nil {
			return err
		}
		s.ID, s.ParentSessionID, s.RequesterSessionID, s.Key, s.InitialTurnID, s.ComputerID = sid, parent, parent, "", "", ""
		s.CreatedAt = time.Now()
		return tx.InsertSession(ctx, s)
	})
	if err != nil {
		p.t.Fatal(err)
	}
	var ts helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: text(input)}, &ts)
	return sid, ts.ID
}

func (p *plane) session(sid string) helmrtype.Session {
	p.t.Helper()
	var s helmrtype.Session
	p.must("GET", "/v1/sessions/"+sid, nil, &s)
	return s
}

func (p *plane) turnStatus(sid, turnID string) string {
	p.t.Helper()
	var ts helmrtype.TurnState
	p.must("GET", "/v1/sessions/"+sid+"/turns/"+turnID, nil, &ts)
	return ts.Status
}

// Interrupt holds a Session and two levels of Sessions it owns: their
// running Turns are interrupted, queued Turns wait, the hold shows on the
// children as inherited, and only resume of that hold on its owner
// releases them.
func TestInterruptHoldsTheOwnedTree(t *testing.T) {
	p := startPlane(t, "")
	root := p.create("chat", text("root"))
	rid := root.Session.ID
	waitOutput(t, p, rid, "listening")
	cid, cturn := p.child(rid, "child")
	waitOutput(t, p, cid, "listening")
	gid, gturn := p.child(cid, "grandchild")
	waitOutput(t, p, gid, "listening")

	var rec helmrtype.SessionControlReceipt
	p.must("POST", "/v1/sessions/"+rid+"/interrupt", map[string]any{"idempotency_key": "int-1"}, &rec)
	if rec.Status != "accepted" || rec.HoldID == "" || rec.SessionID != rid || rec.ID == "" {
		t.Fatalf("interrupt receipt: %+v", rec)
	}
	for _, st := range []struct{ sid, turn string }{{rid, root.Turn.ID}, {cid, cturn}, {gid, gturn}} {
		if o := p.wait(st.sid, st.turn); o.Status != "interrupted" {
			t.Fatalf("running turn of %s after interrupt: %+v", st.sid, o)
		}
	}
	// The grandchild shows the root's hold, inherited.
	hs := p.session(gid).Holds
	if len(hs) != 1 || hs[0].ID == nil || *hs[0].ID != rec.HoldID || *hs[0].SessionID != rid || hs[0].Kind != "interrupt" || !hs[0].CanRelease {
		t.Fatalf("grandchild holds: %+v", hs)
	}
	// Queued work stays queued while held.
	var queued helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+gid+"/turns", helmrtype.EnqueueRequest{Input: text("later")}, &queued)
	time.Sleep(300 * time.Millisecond) // nothing may start it; there is no event to wait for
	if st := p.turnStatus(gid, queued.ID); st != "queued" {
		t.Fatalf("queued turn of a held session is %s", st)
	}
	// Resume of the inherited hold on the child is refused; a made-up hold
	// is not found.
	err := p.call("POST", "/v1/sessions/"+gid+"/resume", map[string]any{"hold_id": rec.HoldID}, nil)
	if !errors.Is(err, helmrtype.CodeConflict) {
		t.Fatalf("resume of an inherited hold on the child: %v", err)
	}
	if err := p.call("POST", "/v1/sessions/"+rid+"/resume", map[string]any{"hold_id": engine.NewID()}, nil); !errors.Is(err, helmrtype.CodeNotFound) {
		t.Fatalf("resume of an unknown hold: %v", err)
	}
	var res helmrtype.SessionControlReceipt
	p.must("POST", "/v1/sessions/"+rid+"/resume", map[string]any{"hold_id": rec.HoldID}, &res)
	if res.HoldID != rec.HoldID || res.Status != "accepted" {
		t.Fatalf("resume receipt: %+v", res)
	}
	waitOutput(t, p, gid, "listening") // the queued Turn runs now
	if len(p.session(gid).Holds) != 0 {
		t.Fatal("holds remain after resume")
	}
	// A stale hold is refused.
	if err := p.call("POST", "/v1/sessions/"+rid+"/resume", map[string]any{"hold_id": rec.HoldID}, nil); !errors.Is(err, helmrtype.CodeConflict) {
		t.Fatalf("resume of a released hold: %v", err)
	}
	for _, k := range []string{helmrtype.EventSessionInterrupt, helmrtype.EventSessionResume} {
		if !hasEvent(p, rid, k) {
			t.Errorf("no %s event", k)
		}
	}
}

// Close drains the queued Turns, then the Session is closed; it admits no
// new Turn, and closing again changes nothing.
func TestCloseDrainsQueuedTurns(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("echo", text("sleep 300ms"))
	sid := r.Session.ID
	var q []helmrtype.TurnState
	for _, in := range []string{"one", "two"} {
		var ts helmrtype.TurnState
		p.must("POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: text(in)}, &ts)
		q = append(q, ts)
	}
	var rec helmrtype.SessionStatusReceipt
	p.must("POST", "/v1/sessions/"+sid+"/close", map[string]any{}, &rec)
	if rec.Status != "closing" || rec.SessionID != sid {
		t.Fatalf("close receipt: %+v", rec)
	}
	if err := p.call("POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: text("three")}, nil); !errors.Is(err, helmrtype.CodeSessionClosed) {
		t.Fatalf("enqueue to a closing session: %v", err)
	}
	for i, ts := range append([]helmrtype.TurnState{*r.Turn}, q...) {
		if o := p.wait(sid, ts.ID); o.Status != "completed" {
			t.Fatalf("turn %d while closing: %+v", i, o)
		}
	}
	p.waitEvent(sid, helmrtype.EventSessionClosed)
	if s := p.session(sid); s.Status != "closed" {
		t.Fatalf("session after draining: %s", s.Status)
	}
	p.must("POST", "/v1/sessions/"+sid+"/close", map[string]any{}, &rec)
	if rec.Status != "closed" {
		t.Fatalf("close of a closed session: %+v", rec)
	}
	if !hasEvent(p, sid, helmrtype.EventSessionClose) {
		t.Error("no session.close event")
	}
}

// Cancel cancels the queued and running work of the Session and the
// Sessions it owns, and closes them.
func TestCancelTree(t *testing.T) {
	p := startPlane(t, "")
	root := p.create("chat", text("root"))
	rid := root.Session.ID
	waitOutput(t, p, rid, "listening")
	var queued helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+rid+"/turns", helmrtype.EnqueueRequest{Input: text("queued")}, &queued)
	cid, cturn := p.child(rid, "child")
	waitOutput(t, p, cid, "listening")

	var rec helmrtype.SessionStatusReceipt
	p.must("POST", "/v1/sessions/"+rid+"/cancel", map[string]any{"idempotency_key": "cancel-1"}, &rec)
	if rec.Status != "closed" {
		t.Fatalf("cancel receipt: %+v", rec)
	}
	for _, st := range []struct{ sid, turn string }{{rid, root.Turn.ID}, {rid, queued.ID}, {cid, cturn}} {
		if o := p.wait(st.sid, st.turn); o.Status != "cancelled" {
			t.Fatalf("turn %s after cancel: %+v", st.turn, o)
		}
	}
	for _, sid := range []string{rid, cid} {
		if s := p.session(sid); s.Status != "closed" {
			t.Fatalf("session %s after cancel: %s", sid, s.Status)
		}
		if !hasEvent(p, sid, helmrtype.EventSessionCancelled) {
			t.Errorf("no session.cancelled event in %s", sid)
		}
	}
	// Again: the same status, nothing changes.
	p.must("POST", "/v1/sessions/"+rid+"/cancel", map[string]any{}, &rec)
	if rec.Status != "closed" {
		t.Fatalf("cancel of a closed session: %+v", rec)
	}
}

// resumeHold resumes the Session's one hold of kind, which must be there.
func (p *plane) resumeHold(sid, kind string) {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, h := range p.session(sid).Holds {
			if h.Kind == kind && h.ID != nil {
				p.must("POST", "/v1/sessions/"+sid+"/resume", map[string]any{"hold_id": *h.ID}, nil)
				return
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no %s hold on session %s", kind, sid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill -9 of a session process mid-Turn: the Turn fails (never replayed),
// the Session is held process_failed, and resume reconstructs the process.
func TestKilledSessionProcessHoldsSession(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("slow", text("x"))
	sid := r.Session.ID
	p.waitEvent(sid, "turn.output")
	pid := sessionPID(t, p, sid)
	var next helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: text("quick")}, &next)
	syscall.Kill(pid, syscall.SIGKILL)
	o := p.wait(sid, r.Turn.ID)
	if o.Status != "failed" || o.Error.Code != helmrtype.CodeProcessExited || !strings.Contains(o.Error.Message, "killed") {
		t.Fatalf("turn of a killed process: %+v %+v", o, o.Error)
	}
	hs := p.session(sid).Holds
	if len(hs) != 1 || hs[0].Kind != helmrtype.HoldProcessFailed || !hs[0].CanRelease {
		t.Fatalf("holds after kill -9: %+v", hs)
	}
	if st := p.turnStatus(sid, next.ID); st != "queued" {
		t.Fatalf("queued turn is %s while held", st)
	}
	p.resumeHold(sid, helmrtype.HoldProcessFailed)
	o = p.wait(sid, next.ID)
	var res map[string]int
	json.Unmarshal(o.Result, &res)
	if o.Status != "completed" || res["pid"] == pid || res["pid"] == 0 {
		t.Fatalf("turn after resume: %+v (killed pid %d)", o, pid)
	}
	runs := 0
	for _, e := range p.events(sid) {
		if e.Kind == "turn.running" && *e.TurnID == r.Turn.ID {
			runs++
		}
	}
	if runs != 1 {
		t.Fatalf("the killed turn ran %d times", runs)
	}
}

// An OnCancel callback that blocks past the cleanup period: the Turn
// settles with cleanup_failed, the process tree is ended and the Session is
// held process_failed.
func TestBlockingOnCancelOverrunsCleanup(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the 10 s cleanup period")
	}
	p := startPlane(t, "")
	r := p.create("slow", text("blockcleanup"))
	sid := r.Session.ID
	p.waitEvent(sid, "turn.output")
	pid := sessionPID(t, p, sid)
	p.must("POST", "/v1/sessions/"+sid+"/turns/"+r.Turn.ID+"/interrupt", nil, nil)
	o := p.wait(sid, r.Turn.ID)
	if o.Status != "interrupted" || o.Error.Code != helmrtype.CodeCleanupFailed {
		t.Fatalf("turn with a blocking OnCancel: %+v %+v", o, o.Error)
	}
	waitGone(t, pid)
	p.resumeHold(sid, helmrtype.HoldProcessFailed)
	if !hasEvent(p, sid, helmrtype.EventProcessFailed) {
		t.Error("no session.process_failed event")
	}
}

func TestSessionControlsCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the helmr binary")
	}
	p := startPlane(t, "")
	api := &server{url: p.url, key: p.key}
	r := p.create("chat", text("hi"))
	sid := r.Session.ID
	waitOutput(t, p, sid, "listening")
	out, errOut, code := api.cli(t, "session", "interrupt", sid, "--json")
	var rec helmrtype.SessionControlReceipt
	if json.Unmarshal([]byte(out), &rec); code != 0 || rec.HoldID == "" {
		t.Fatalf("session interrupt: exit %d %s %s", code, out, errOut)
	}
	if o := p.wait(sid, r.Turn.ID); o.Status != "interrupted" {
		t.Fatalf("turn after interrupt: %+v", o)
	}
	if out, _, code := api.cli(t, "session", "get", sid); code != 0 || !strings.Contains(out, "interrupt "+rec.HoldID) {
		t.Fatalf("session get shows no hold: exit %d %s", code, out)
	}
	if out, _, code := api.cli(t, "session", "resume", sid, "--hold", rec.HoldID); code != 0 || !strings.Contains(out, "released") {
		t.Fatalf("session resume: exit %d %s", code, out)
	}
	if _, _, code := api.cli(t, "session", "resume", sid, "--hold", rec.HoldID); code != 4 {
		t.Fatalf("resume of a released hold: exit %d, want 4", code)
	}
	if out, _, code := api.cli(t, "session", "close", sid); code != 0 || !strings.Contains(out, "closed") {
		t.Fatalf("session close: exit %d %s", code, out)
	}
	if out, _, code := api.cli(t, "session", "cancel", sid); code != 0 || !strings.Contains(out, "closed") {
		t.Fatalf("session cancel of a closed session: exit %d %s", code, out)
	}
}

// Holds, close and the process_failed path on PostgreSQL.
func TestHoldsOnPostgreSQL(t *testing.T) {
	db := pgtest.URL(t)
	p := startPlaneWith(t, t.TempDir(), "127.0.0.1:0", db)
	r := p.create("chat", text("hi"))
	sid := r.Session.ID
	waitOutput(t, p, sid, "listening")
	var rec helmrtype.SessionControlReceipt
	p.must("POST", "/v1/sessions/"+sid+"/interrupt", map[string]any{}, &rec)
	if o := p.wait(sid, r.Turn.ID); o.Status != "interrupted" {
		t.Fatalf("interrupt on PostgreSQL: %+v", o)
	}
	var q helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: text("again")}, &q)
	if st := p.turnStatus(sid, q.ID); st != "queued" {
		t.Fatalf("queued turn while held: %s", st)
	}
	p.must("POST", "/v1/sessions/"+sid+"/resume", map[string]any{"hold_id": rec.HoldID}, nil)
	waitOutput(t, p, sid, "listening")
	pid := sessionPID(t, p, sid)
	syscall.Kill(pid, syscall.SIGKILL)
	p.wait(sid, q.ID)
	p.resumeHold(sid, helmrtype.HoldProcessFailed)
	var st helmrtype.SessionStatusReceipt
	p.must("POST", "/v1/sessions/"+sid+"/close", map[string]any{}, &st)
	if st.Status != "closed" {
		t.Fatalf("close of an idle session on PostgreSQL: %+v", st)
	}
}
