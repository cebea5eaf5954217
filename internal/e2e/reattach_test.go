package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/freezer"
	"github.com/helmr-go/helmr/internal/store/sqlitestore"
)

// detach stops the control plane the way helmr server does: its session
// processes keep running, to reattach to the next one.
func (p *plane) detach() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	<-p.done
	p.cp.Detach(context.Background())
	p.cancel = nil
}

// listening starts a control plane on dir with a chat Session whose first
// Turn runs and listens for messages.
func listening(t *testing.T, dir string) (p *plane, sid, turnID string) {
	t.Helper()
	p = startPlane(t, dir)
	r := p.create("chat", text("hi"))
	waitOutput(t, p, r.Session.ID, "listening")
	return p, r.Session.ID, r.Turn.ID
}

// A control-plane restart does not disturb a running Turn: its process
// reconnects, keeps its state (init does not run again) and the Turn
// takes messages and completes.
func TestRestartReattachesRunningTurn(t *testing.T) {
	dir := t.TempDir()
	p, sid, turnID := listening(t, dir)
	var m1 helmrtype.MessageReceipt
	p.must("POST", "/v1/sessions/"+sid+"/turns/"+turnID+"/messages", helmrtype.MessageRequest{Content: text("ok before")}, &m1)
	waitOutput(t, p, sid, "got ok before")
	pid := sessionPID(t, p, sid)
	p.detach()

	p2 := startPlane(t, dir)
	// A message to the running Turn reaches the same process.
	p2.must("POST", "/v1/sessions/"+sid+"/turns/"+turnID+"/messages", helmrtype.MessageRequest{Content: text("ok after")}, nil)
	waitOutput(t, p2, sid, "got ok after")
	p2.must("POST", "/v1/sessions/"+sid+"/turns/"+turnID+"/messages", helmrtype.MessageRequest{Content: text("done")}, nil)
	o := p2.wait(sid, turnID)
	var got []string
	json.Unmarshal(o.Result, &got)
	if o.Status != "completed" || !slices.Equal(got, []string{"ok before", "ok after"}) {
		t.Fatalf("turn after restart: %+v", o)
	}
	if now := sessionPID(t, p2, sid); now != pid {
		t.Fatalf("the session process changed across the restart: %d then %d", pid, now)
	}
	for _, e := range p2.events(sid) {
		if e.Kind == helmrtype.EventProcessFailed || e.Kind == helmrtype.EventProcessStopped {
			t.Fatalf("unexpected %s: %s", e.Kind, e.Data)
		}
	}
	// The process serves the next Turn too.
	var next helmrtype.TurnState
	p2.must("POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: text("again")}, &next)
	waitOutput(t, p2, sid, "listening")
	p2.must("POST", "/v1/sessions/"+sid+"/turns/"+next.ID+"/messages", helmrtype.MessageRequest{Content: text("done")}, nil)
	if o := p2.wait(sid, next.ID); o.Status != "completed" {
		t.Fatalf("next turn: %+v", o)
	}
}

// A process that dies while no control plane runs is noticed at the next
// start: its Turn settles interrupted with execution_lost and queued Turns
// get a new process.
func TestRestartAfterProcessDiedWhileDown(t *testing.T) {
	dir := t.TempDir()
	p, sid, turnID := listening(t, dir)
	var queued helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: text("next")}, &queued)
	pid := sessionPID(t, p, sid)
	pgid, _ := syscall.Getpgid(pid) // the sandbox's whole tree
	p.detach()
	syscall.Kill(-pgid, syscall.SIGKILL)
	waitGone(t, pid)

	p2 := startPlane(t, dir)
	o := p2.wait(sid, turnID)
	if o.Status != "interrupted" || o.Error == nil || o.Error.Code != helmrtype.CodeExecutionLost {
		t.Fatalf("turn whose process died while down: %+v", o)
	}
	// A recovery_gap hold until someone resumes.
	p2.resumeHold(sid, helmrtype.HoldRecoveryGap)
	waitOutput(t, p2, sid, "listening")
	p2.must("POST", "/v1/sessions/"+sid+"/turns/"+queued.ID+"/messages", helmrtype.MessageRequest{Content: text("done")}, nil)
	if o := p2.wait(sid, queued.ID); o.Status != "completed" {
		t.Fatalf("queued turn: %+v", o)
	}
}

// A surviving process that does not reconnect within the reattach window
// is ended, and its Turn is lost, not left running.
func TestReattachWindowEndsSilentProcess(t *testing.T) {
	// SIGSTOP silences the process; the signal freezer (the fallback
	// where no cgroup freezer is usable, as for an ordinary user) thaws
	// an adopted process with SIGCONT, which would wake it.
	if probeHost(); hostFreezer == freezer.KindSignal {
		t.Skip("needs a cgroup freezer (none is usable here: the signal freezer's SIGCONT would undo the SIGSTOP that silences the process)")
	}
	dir := t.TempDir()
	p, sid, turnID := listening(t, dir)
	pid := sessionPID(t, p, sid)
	p.detach()
	// Stopped, it cannot reconnect.
	syscall.Kill(pid, syscall.SIGSTOP)

	p2 := startPlaneOpts(t, dir, 500*time.Millisecond)
	o := p2.wait(sid, turnID)
	if o.Status != "interrupted" || o.Error == nil || o.Error.Code != helmrtype.CodeExecutionLost {
		t.Fatalf("turn of a silent process: %+v", o)
	}
	waitGone(t, pid)
}

// waitOutput waits until session sid has output s.
func waitOutput(t *testing.T, p *plane, sid, s string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("output %q in session %s", s, sid), func() bool { return p.hasOutput(sid, s) })
}

// waitGone waits until pid has exited (a zombie counts as gone).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); err != nil || isZombie(pid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("process %d is still alive", pid)
}

func isZombie(pid int) bool {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// An interrupt of a Turn that was accepted but never reached its process
// (the control plane stopped right after committing it) reaches the
// process when it reattaches to the next control plane. The interrupt is
// accepted here by an engine on the same database with no supervisor,
// which is what a control plane that dies after its commit leaves.
func TestInterruptAcceptedBeforeRestart(t *testing.T) {
	dir := t.TempDir()
	p, sid, turnID := listening(t, dir)
	pid := sessionPID(t, p, sid)
	p.detach()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, "helmr.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := engine.New(st, engine.Options{}).InterruptTurn(ctx, sid, turnID, helmrtype.ControlRequest{})
	st.Close()
	if err != nil || rec.Status != "accepted" {
		t.Fatalf("interrupt: %+v, %v", rec, err)
	}
	p2 := startPlane(t, dir)
	o := p2.wait(sid, turnID)
	if o.Status != "interrupted" || o.Error == nil || o.Error.Code != helmrtype.CodeInterrupted {
		t.Fatalf("turn after the restart: %+v %+v", o, o.Error)
	}
	if now := sessionPID(t, p2, sid); now != pid {
		t.Fatalf("the process changed: %d then %d", pid, now)
	}
}

// An interrupt accepted while the Turn's process has not reattached yet
// reaches it when it does.
func TestInterruptWhileReattaching(t *testing.T) {
	dir := t.TempDir()
	p, sid, turnID := listening(t, dir)
	pid := sessionPID(t, p, sid)
	p.detach()
	syscall.Kill(pid, syscall.SIGSTOP) // it cannot reconnect yet
	p2 := startPlane(t, dir)
	p2.must("POST", "/v1/sessions/"+sid+"/turns/"+turnID+"/interrupt", map[string]any{}, nil)
	syscall.Kill(pid, syscall.SIGCONT)
	o := p2.wait(sid, turnID)
	if o.Status != "interrupted" || o.Error == nil || o.Error.Code != helmrtype.CodeInterrupted {
		t.Fatalf("turn interrupted during reattach: %+v %+v", o, o.Error)
	}
	if now := sessionPID(t, p2, sid); now != pid {
		t.Fatalf("the process changed: %d then %d", pid, now)
	}
}
