package e2e

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/controlplane"
)

// offsetClock is the wall clock moved forward by an offset a test sets.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) Now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *offsetClock) advance(d time.Duration) { c.off.Add(int64(d)) }

// closeAfterIdle (default 7d) closes a Session idle that long, by the
// control plane's clock; idleSince is the moment its last Turn settled.
func TestCloseAfterIdle(t *testing.T) {
	clock := &offsetClock{}
	p := startPlaneConfig(t, "127.0.0.1:0", controlplane.Config{Clock: clock})
	r := p.create("echo", text("hi"))
	sid := r.Session.ID
	p.wait(sid, r.Turn.ID)
	var ts helmrtype.TurnState
	p.must("GET", "/v1/sessions/"+sid+"/turns/"+r.Turn.ID, nil, &ts)
	s := p.session(sid)
	if s.CloseAfterIdle != "7d" || s.IdleSince == nil || !s.IdleSince.Equal(*ts.TerminalAt) {
		t.Fatalf("idle session: close_after_idle %s, idle_since %v, turn settled %v", s.CloseAfterIdle, s.IdleSince, ts.TerminalAt)
	}
	clock.advance(7*24*time.Hour - time.Minute)
	if n, err := p.cp.Engine.SweepIdle(t.Context()); err != nil || n != 0 {
		t.Fatalf("sweep a minute early: %d %v", n, err)
	}
	clock.advance(2 * time.Minute)
	if n, err := p.cp.Engine.SweepIdle(t.Context()); err != nil || n != 1 {
		t.Fatalf("sweep after 7d: %d %v", n, err)
	}
	if s := p.session(sid); s.Status != "closed" {
		t.Fatalf("session after 7d idle: %s", s.Status)
	}
	p.waitEvent(sid, helmrtype.EventSessionClosed)
	p.waitEvent(sid, helmrtype.EventProcessStopped) // its process is stopped
	// A Session with work is not idle, whatever the clock says.
	busy := p.create("chat", text("busy"))
	waitOutput(t, p, busy.Session.ID, "listening")
	clock.advance(30 * 24 * time.Hour)
	if n, err := p.cp.Engine.SweepIdle(t.Context()); err != nil || n != 0 {
		t.Fatalf("sweep of a busy session: %d %v", n, err)
	}
}

// hibernateAfterIdle freezes an idle Session's process; the next Turn wakes
// it without running init again.
func TestHibernateAfterIdle(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("sleepy", text("one"))
	sid := r.Session.ID
	first := completedResult[waitResult](t, p.wait(sid, r.Turn.ID))
	p.waitEvent(sid, helmrtype.EventWaitSuspended)
	if !p.cp.Supervisor.Suspended(sid) {
		t.Fatal("the idle session's process is not frozen")
	}
	var ts helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: text("two")}, &ts)
	second := completedResult[waitResult](t, p.wait(sid, ts.ID))
	if second.PID != first.PID || second.Init != first.Init {
		t.Fatalf("after hibernation: %+v, before %+v", second, first)
	}
	if !hasEvent(p, sid, helmrtype.EventWaitResumed) {
		t.Error("no wait.resumed event")
	}
}

// When the store's disk runs below its floor, new work is refused with
// storage_pressure and Sessions with work are held (a hold no resume can
// release); when space is back the holds go and the work goes on.
func TestStoragePressure(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 40)
	cfg := controlplane.Config{MinFreeBytes: 1 << 30, FreeSpace: func(string) (uint64, error) { return uint64(free.Load()), nil }}
	p := startPlaneConfig(t, "127.0.0.1:0", cfg)
	r := p.create("chat", text("hi"))
	sid := r.Session.ID
	waitOutput(t, p, sid, "listening")
	var queued helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: text("next")}, &queued)

	free.Store(1 << 20) // 1 MiB left
	p.cp.CheckDisk(t.Context())
	err := p.call("POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: text("more")}, nil)
	var he *helmrtype.Error
	if !errors.As(err, &he) || he.Code != helmrtype.CodeStoragePressure || he.Status != 507 {
		t.Fatalf("enqueue under storage pressure: %v", err)
	}
	if err := p.call("POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "echo", Input: text("x")}, nil); !errors.Is(err, helmrtype.CodeStoragePressure) {
		t.Fatalf("create under storage pressure: %v", err)
	}
	hs := p.session(sid).Holds
	if len(hs) != 1 || hs[0].Kind != helmrtype.HoldStoragePressure || hs[0].CanRelease {
		t.Fatalf("holds under storage pressure: %+v", hs)
	}
	if err := p.call("POST", "/v1/sessions/"+sid+"/resume", map[string]any{"hold_id": *hs[0].ID}, nil); !errors.Is(err, helmrtype.CodeConflict) {
		t.Fatalf("resume of a storage_pressure hold: %v", err)
	}
	// The running Turn finishes; the queued one waits for space.
	p.must("POST", "/v1/sessions/"+sid+"/turns/"+r.Turn.ID+"/messages", helmrtype.MessageRequest{Content: text("done")}, nil)
	if o := p.wait(sid, r.Turn.ID); o.Status != "completed" {
		t.Fatalf("running turn under pressure: %+v", o)
	}
	if st := p.turnStatus(sid, queued.ID); st != "queued" {
		t.Fatalf("queued turn under pressure is %s", st)
	}
	free.Store(1 << 40)
	p.cp.CheckDisk(t.Context())
	waitOutput(t, p, sid, "listening") // the queued Turn runs
	if len(p.session(sid).Holds) != 0 {
		t.Fatal("the storage_pressure hold remains")
	}
}
