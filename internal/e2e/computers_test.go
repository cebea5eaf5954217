package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/helmr-go/helmr/helmrtype"
)

// Computers end to end: session processes run sandboxed, their /workspace
// outlives the process, and Sessions on one Computer share it.

func filesTurn(t *testing.T, p *plane, sid, input string) (string, helmrtype.TurnOutcome) {
	t.Helper()
	var ts helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: text(input)}, &ts)
	o := p.wait(sid, ts.ID)
	var s string
	json.Unmarshal(o.Result, &s)
	return s, o
}

func TestWorkspaceOutlivesTheProcess(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("files", text("write note.txt written by the first process"))
	sid := r.Session.ID
	if o := p.wait(sid, r.Turn.ID); o.Status != helmrtype.TurnCompleted {
		t.Fatalf("write: %+v", o)
	}
	// The host sees the file in the Computer's directory, not elsewhere.
	s := p.session(sid)
	host := filepath.Join(p.dataDir, "computers", *s.ComputerID, "workspace", "note.txt")
	if b, err := os.ReadFile(host); err != nil || string(b) != "written by the first process" {
		t.Fatalf("the workspace on the host: %q %v", b, err)
	}
	// Kill the process: the Session is held; resuming starts a new one.
	pid := sessionPID(t, p, sid)
	pgid, _ := syscall.Getpgid(pid)
	syscall.Kill(-pgid, syscall.SIGKILL)
	p.waitEvent(sid, "session.process_failed")
	p.resumeHold(sid, helmrtype.HoldProcessFailed)
	got, o := filesTurn(t, p, sid, "read note.txt")
	if o.Status != helmrtype.TurnCompleted || got != "written by the first process" {
		t.Fatalf("read after a new process: %q %+v", got, o)
	}
	if now := sessionPID(t, p, sid); now == pid {
		t.Fatalf("the same process %d served the read", pid)
	}
	// The sandbox hides the host: a file outside the Computer, the data
	// directory and host secrets are out of reach.
	secret := filepath.Join(t.TempDir(), "host-secret")
	os.WriteFile(secret, []byte("host only"), 0o644)
	for _, path := range []string{secret, filepath.Join(p.dataDir, "helmr.db"), "/etc/shadow"} {
		if got, _ := filesTurn(t, p, sid, "probe "+path); !strings.HasPrefix(got, "error: ") {
			t.Errorf("a sandboxed process read %s: %.40q", path, got)
		}
	}
}

func TestSessionsShareAComputer(t *testing.T) {
	p := startPlane(t, "")
	// The root writes a file, then spawns a files Session on its own
	// Computer that reads it.
	sid, _, out := p.drive("colocated", "", driveIn{Write: map[string]string{"shared.txt": "from the root"}, Calls: []call{
		{Tool: "list_computers"},
		{Tool: "spawn", Args: map[string]any{"agent": "files", "input": helmrtype.Text("read shared.txt"), "idempotency_key": "reader",
			"computer_id": "$0.computers.0.id"}},
		{Tool: "wait_turn", Args: map[string]any{"session_id": "$1.session_id", "turn_id": "$1.turn_id", "timeout": "60s"}},
	}})
	for i, c := range out.Calls {
		if c.Error != "" {
			t.Fatalf("call %d: %s", i, c.Error)
		}
	}
	o := out.Calls[2].Result["outcome"].(map[string]any)
	if o["status"] != "completed" || o["result"] != "from the root" {
		t.Fatalf("the child's read: %v", o)
	}
	child := p.session(out.Calls[1].Result["session_id"].(string))
	if root := p.session(sid); *child.ComputerID != *root.ComputerID {
		t.Fatalf("child on computer %s, root on %s", *child.ComputerID, *root.ComputerID)
	}
	// A Session on another Computer does not see the file.
	r := p.create("files", text("read shared.txt"))
	if o := p.wait(r.Session.ID, r.Turn.ID); o.Status != helmrtype.TurnFailed {
		t.Fatalf("another Computer read the file: %+v", o)
	}
}
