package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
)

func TestRestartWithQueuedTurns(t *testing.T) {
	dir := t.TempDir()
	p := startPlane(t, dir)
	r := p.create("echo", text("sleep 1h"))
	sid := r.Session.ID
	var queued []helmrtype.TurnState
	for _, in := range []string{"one", "two", "three"} {
		var ts helmrtype.TurnState
		p.must("POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: text(in)}, &ts)
		queued = append(queued, ts)
	}
	p.waitEvent(sid, "turn.running")
	p.stop()

	p2 := startPlane(t, dir)
	// The Turn that ran when the control plane stopped is not replayed.
	o := p2.wait(sid, r.Turn.ID)
	if o.Status != "interrupted" {
		t.Fatalf("running turn after restart: %+v", o)
	}
	for i, ts := range queued {
		o := p2.wait(sid, ts.ID)
		if o.Status != "completed" || o.Response.PlainText() != []string{"one", "two", "three"}[i] {
			t.Fatalf("queued turn %d after restart: %+v", i, o)
		}
	}
	// Nothing was lost or doubled: every Turn ran at most once.
	runs := map[string]int{}
	for _, e := range p2.events(sid) {
		if e.Kind == "turn.running" {
			runs[*e.TurnID]++
		}
	}
	for id, n := range runs {
		if n != 1 {
			t.Fatalf("turn %s ran %d times", id, n)
		}
	}
	if len(runs) != 4 {
		t.Fatalf("%d turns ran, want 4", len(runs))
	}
}

func TestCrashingProcessFailsTurn(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("echo", text("crash"))
	var next helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+r.Session.ID+"/turns", helmrtype.EnqueueRequest{Input: text("after the crash")}, &next)
	o := p.wait(r.Session.ID, r.Turn.ID)
	if o.Status != "failed" || o.Error == nil || o.Error.Code != helmrtype.CodeProcessExited || !strings.Contains(o.Error.Message, "status 7") {
		t.Fatalf("crash outcome: %+v", o.Error)
	}
	p.waitEvent(r.Session.ID, "session.process_failed")
	// A process_failed hold keeps the next Turn queued until a resume,
	// which starts a reconstructed process.
	if st := p.turnStatus(r.Session.ID, next.ID); st != "queued" {
		t.Fatalf("turn after the crash is %s before resume", st)
	}
	var rec helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+r.Session.ID+"/turns", helmrtype.EnqueueRequest{Input: text("recovery")}, &rec)
	p.resumeHold(r.Session.ID, helmrtype.HoldProcessFailed)
	o = p.wait(r.Session.ID, next.ID)
	if o.Status != "completed" || o.Response.PlainText() != "after the crash" {
		t.Fatalf("turn after crash: %+v", o)
	}
	var rv struct{ Kind, Reason string }
	json.Unmarshal(p.wait(r.Session.ID, rec.ID).Result, &rv)
	if rv.Kind != "reconstructed" || !strings.Contains(rv.Reason, "process_failed") || !strings.Contains(rv.Reason, "status 7") {
		t.Fatalf("recovery after resume: %+v", rv)
	}
}

// sessionPID finds the session process of the Session's Computer by the
// HELMR_COMPUTER_ID its launcher sets.
func sessionPID(t *testing.T, p *plane, sessionID string) int {
	t.Helper()
	var s helmrtype.Session
	p.must("GET", "/v1/sessions/"+sessionID, nil, &s)
	if s.ComputerID == nil {
		t.Fatal("session has no computer")
	}
	if pid := pidOfComputer(p, *s.ComputerID); pid != 0 {
		return pid
	}
	t.Fatalf("no process of computer %s", *s.ComputerID)
	return 0
}

// innerPID is the PID a process sees for itself (os.Getpid inside its
// sandbox's PID namespace): the last field of NSpid in its status.
func innerPID(hostPID int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(hostPID), "status"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			n, _ := strconv.Atoi(f[len(f)-1])
			return n
		}
	}
	return hostPID
}

// sameProcess reports whether the Session's process is still the host
// process hostPID and reported is what that process calls its PID.
func sameProcess(t *testing.T, p *plane, sessionID string, hostPID, reported int) bool {
	t.Helper()
	now := sessionPID(t, p, sessionID)
	if parking(p) {
		// Parked while it waited and restored: the same process (its
		// memory and its place in the handler; the caller checks that
		// init ran once), under a new host PID.
		return innerPID(now) == reported
	}
	return now == hostPID && innerPID(hostPID) == reported
}

// parking reports whether p parks waiting processes (checkpoints to disk)
// rather than freezing them.
func parking(p *plane) bool { return p.cp.Supervisor.CheckpointOff() == "" }

// hostPIDOfComputer finds a live process of a Computer on this host by
// the HELMR_COMPUTER_ID its launcher sets (readable by root), 0 when there
// is none.
func hostPIDOfComputer(computerID string) int {
	want := "HELMR_COMPUTER_ID=" + computerID
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || isZombie(pid) {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && slices.Contains(strings.Split(string(env), "\x00"), want) {
			return pid
		}
	}
	return 0
}

// pidOfComputer finds the live session process of a Computer (inside its
// sandbox) by the HELMR_COMPUTER_ID its launcher sets, 0 when there is none.
// A session process makes itself non-dumpable (sessionproc hides its
// memory), so only root can read its environment: as another user the
// process is the one p's store records for the Computer, when it is alive
// (unsandboxed, that is the session process itself).
func pidOfComputer(p *plane, computerID string) int {
	if pid := hostPIDOfComputer(computerID); pid != 0 {
		return pid
	}
	if os.Geteuid() == 0 {
		return 0
	}
	procs, err := p.cp.Engine.Processes(context.Background())
	if err != nil {
		p.t.Fatal(err)
	}
	for _, pr := range procs {
		if pr.ComputerID == computerID && pr.PID > 0 && !isZombie(pr.PID) && syscall.Kill(pr.PID, 0) == nil {
			return pr.PID
		}
	}
	return 0
}

func TestSIGTERMDrainsTheRunningTurn(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("slow", text("x"))
	p.waitEvent(r.Session.ID, "turn.output")
	if err := syscall.Kill(sessionPID(t, p, r.Session.ID), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	o := p.wait(r.Session.ID, r.Turn.ID)
	if o.Status != "interrupted" || o.Error == nil || o.Error.Code != helmrtype.CodeInterrupted {
		t.Fatalf("turn after SIGTERM: %+v", o)
	}
	if !p.hasOutput(r.Session.ID, "cleanup ran") {
		t.Fatal("OnCancel did not run on SIGTERM")
	}
	// The process stopped by itself, in order; the Session goes on with a
	// new process.
	p.waitEvent(r.Session.ID, "session.process_stopped")
	var ts helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+r.Session.ID+"/turns", helmrtype.EnqueueRequest{Input: text("y")}, &ts)
	for {
		ch, stop := p.cp.Engine.Watch(r.Session.ID)
		got, err := p.cp.Engine.GetTurn(context.Background(), r.Session.ID, ts.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == "running" {
			stop()
			break
		}
		<-ch
		stop()
	}
}

func TestSIGTERMWithQueuedTurnsLosesNone(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("echo", text("sleep 1h"))
	var next helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+r.Session.ID+"/turns", helmrtype.EnqueueRequest{Input: text("after")}, &next)
	p.waitEvent(r.Session.ID, "turn.running")
	if err := syscall.Kill(sessionPID(t, p, r.Session.ID), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if o := p.wait(r.Session.ID, r.Turn.ID); o.Status != "interrupted" {
		t.Fatalf("drained turn: %+v", o)
	}
	if o := p.wait(r.Session.ID, next.ID); o.Status != "completed" || o.Response.PlainText() != "after" {
		t.Fatalf("queued turn after SIGTERM: %+v", o.Error)
	}
}

func TestCoreOnPostgreSQL(t *testing.T) {
	db := pgtest.URL(t)
	dir := t.TempDir()
	p := startPlaneWith(t, dir, "127.0.0.1:0", db)
	r := p.create("echo", text("sleep 1h"))
	var queued []helmrtype.TurnState
	for _, in := range []string{"one", "two", "three"} {
		var ts helmrtype.TurnState
		p.must("POST", "/v1/sessions/"+r.Session.ID+"/turns", helmrtype.EnqueueRequest{Input: text(in)}, &ts)
		queued = append(queued, ts)
	}
	p.waitEvent(r.Session.ID, "turn.running")
	p.stop()
	// The same database, a new control plane: queued Turns run in order.
	p2 := startPlaneWith(t, dir, "127.0.0.1:0", db)
	if o := p2.wait(r.Session.ID, r.Turn.ID); o.Status != "interrupted" {
		t.Fatalf("running turn after restart: %+v", o)
	}
	for i, ts := range queued {
		if o := p2.wait(r.Session.ID, ts.ID); o.Status != "completed" || o.Response.PlainText() != []string{"one", "two", "three"}[i] {
			t.Fatalf("turn %d: %+v", i, o)
		}
	}
	c := p2.create("chat", text("start"))
	p2.waitEvent(c.Session.ID, "turn.running")
	p2.send(c.Session.ID, c.Turn.ID, "ok one")
	p2.send(c.Session.ID, c.Turn.ID, "no")
	p2.send(c.Session.ID, c.Turn.ID, "done")
	if o := p2.wait(c.Session.ID, c.Turn.ID); o.Status != "completed" || string(o.Result) != `["ok one"]` {
		t.Fatalf("messages on PostgreSQL: %+v %s", o, o.Result)
	}
	seq := int64(0)
	for _, e := range p2.events(r.Session.ID) {
		if e.Sequence != seq+1 {
			t.Fatalf("timeline sequence %d after %d", e.Sequence, seq)
		}
		seq = e.Sequence
	}
}

// killAll ends the control plane s with SIGKILL, then every session
// process under data (each sandbox's whole tree), and waits until they are
// gone.
func killAll(t *testing.T, s *server, data string) {
	t.Helper()
	s.kill()
	for _, p := range agentPIDs(filepath.Join(data, "deployments")) {
		if n, err := strconv.Atoi(p); err == nil {
			syscall.Kill(-n, syscall.SIGKILL)
			syscall.Kill(n, syscall.SIGKILL)
			waitGone(t, n)
		}
	}
}

// resumeHoldOf resumes the Session's one hold of kind on the server s.
func resumeHoldOf(t *testing.T, s *server, sid, kind string) {
	t.Helper()
	var sess helmrtype.Session
	if err := apiCall(s.url, s.key, "GET", "/v1/sessions/"+sid, nil, &sess); err != nil {
		t.Fatal(err)
	}
	for _, h := range sess.Holds {
		if h.Kind == kind && h.ID != nil {
			if err := apiCall(s.url, s.key, "POST", "/v1/sessions/"+sid+"/resume", map[string]any{"hold_id": *h.ID}, nil); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no %s hold on session %s: %+v", kind, sid, sess.Holds)
}

// kill -9 of helmr server and its session process while a Turn runs, a
// restart on the same data: the Turn is lost (recovery_gap), and the
// process that the resume starts is reconstructed, every time — as after a
// plain process crash.
func TestControlPlaneCrashReconstructs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs helmr server")
	}
	data := t.TempDir()
	s := startServer(t, data, "server", "--log-level", "warn")
	if out, errOut, code := s.cli(t, "deploy", "testdata/agents"); code != 0 {
		t.Fatalf("deploy: %d %s %s", code, out, errOut)
	}
	for round := range 4 {
		var r helmrtype.SessionCreateReceipt
		if err := apiCall(s.url, s.key, "POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "echo", Input: text("sleep 1h")}, &r); err != nil {
			t.Fatal(err)
		}
		sid := r.Session.ID
		var rec helmrtype.TurnState
		if err := apiCall(s.url, s.key, "POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: text("recovery")}, &rec); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the first turn runs", func() bool { return eventWith(t, s, sid, "turn.running", "") })
		killAll(t, s, data)
		s = startServer(t, data, "server", "--log-level", "warn")
		if o := waitTurn(t, s, sid, r.Turn.ID); o.Status != "interrupted" || o.Error == nil || o.Error.Code != helmrtype.CodeExecutionLost {
			t.Fatalf("round %d: the running turn after the crash: %+v", round, o)
		}
		resumeHoldOf(t, s, sid, helmrtype.HoldRecoveryGap)
		o := waitTurn(t, s, sid, rec.ID)
		var rv struct{ Kind, Reason string }
		json.Unmarshal(o.Result, &rv)
		if o.Status != "completed" || rv.Kind != "reconstructed" || !strings.Contains(rv.Reason, "recovery_gap") {
			t.Fatalf("round %d: recovery after the resume: %+v %s\n%s", round, o, o.Result, s.output())
		}
	}
}

// kill -9 of helmr server while a new Session's process is still starting:
// its first Turn never ran, so nothing is held and it runs after the
// restart without a resume.
func TestControlPlaneCrashWhileProcessStarts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs helmr server")
	}
	data := t.TempDir()
	s := startServer(t, data, "server", "--log-level", "warn")
	if out, errOut, code := s.cli(t, "deploy", "testdata/agents"); code != 0 {
		t.Fatalf("deploy: %d %s %s", code, out, errOut)
	}
	deployments := filepath.Join(data, "deployments")
	for round, delay := range []time.Duration{0, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond} {
		before := agentPIDs(deployments)
		var r helmrtype.SessionCreateReceipt
		if err := apiCall(s.url, s.key, "POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "echo", Input: text("first")}, &r); err != nil {
			t.Fatal(err)
		}
		sid := r.Session.ID
		var next helmrtype.TurnState
		if err := apiCall(s.url, s.key, "POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: text("second")}, &next); err != nil {
			t.Fatal(err)
		}
		// Its process is launched and starting: the control plane dies
		// before (or soon after) it connects.
		waitFor(t, "the new session process", func() bool { return len(agentPIDs(deployments)) > len(before) })
		time.Sleep(delay)
		s.kill()
		s = startServer(t, data, "server", "--log-level", "warn")
		for _, id := range []string{r.Turn.ID, next.ID} {
			o := waitTurnWithin(t, s, sid, id, 60*time.Second)
			if o.Status != "completed" {
				t.Fatalf("round %d: turn %s after the crash: %+v %+v\n%s", round, id, o, o.Error, s.output())
			}
		}
		var sess helmrtype.Session
		if err := apiCall(s.url, s.key, "GET", "/v1/sessions/"+sid, nil, &sess); err != nil || len(sess.Holds) != 0 {
			t.Fatalf("round %d: holds after the crash: %+v %v", round, sess.Holds, err)
		}
	}
}
