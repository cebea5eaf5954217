package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
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
	needSandbox(t)
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

func TestComputersAPIAndCommands(t *testing.T) {
	p := startPlane(t, "")
	var c helmrtype.ComputerState
	p.must("POST", "/v1/computers", helmrtype.ComputerCreateRequest{Template: "box", Key: "dev-box", IdempotencyKey: "c1"}, &c)
	if c.Status != helmrtype.ComputerAvailable || c.Residency != helmrtype.ResidencyCold || c.Key != "dev-box" || c.Template != "box" {
		t.Fatalf("created: %+v", c)
	}
	var again helmrtype.ComputerState
	p.must("POST", "/v1/computers", helmrtype.ComputerCreateRequest{Template: "box", Key: "dev-box", IdempotencyKey: "c1"}, &again)
	if again.ID != c.ID {
		t.Fatalf("an idempotent retry made another Computer: %s vs %s", again.ID, c.ID)
	}
	if err := p.call("POST", "/v1/computers", helmrtype.ComputerCreateRequest{Template: "box", Key: "dev-box"}, nil); !isCode(err, helmrtype.CodeConflict) {
		t.Fatalf("a second Computer with the key: %v", err)
	}
	if err := p.call("POST", "/v1/computers", helmrtype.ComputerCreateRequest{Template: "nope"}, nil); !isCode(err, helmrtype.CodeNotFound) {
		t.Fatalf("an unknown template: %v", err)
	}
	var page helmrtype.ComputerPage
	p.must("GET", "/v1/computers?key=dev-box", nil, &page)
	if len(page.Computers) != 1 || page.Computers[0].ID != c.ID {
		t.Fatalf("by key: %+v", page)
	}

	// A Command: output in order per stream, stdin, env, exit code.
	var cmd helmrtype.CommandState
	p.must("POST", "/v1/computers/"+c.ID+"/commands", helmrtype.CommandRequest{
		Command: []string{"/bin/sh", "-c", "read x; echo out:$x:$GREET; echo err >&2; echo made > made.txt; exit 3"},
		Stdin:   "hi\n", Env: map[string]string{"GREET": "hello"}}, &cmd)
	if cmd.Status != helmrtype.CommandRunning || cmd.Cwd != "/workspace" {
		t.Fatalf("exec: %+v", cmd)
	}
	var w helmrtype.CommandWaitResult
	p.must("GET", "/v1/commands/"+cmd.ID+"/wait?timeout=30s", nil, &w)
	if w.Status != "settled" || w.Command.Status != helmrtype.CommandExited || w.Command.ExitCode == nil || *w.Command.ExitCode != 3 {
		t.Fatalf("wait: %+v %+v", w, w.Command)
	}
	var logs helmrtype.CommandLogPage
	p.must("GET", "/v1/commands/"+cmd.ID+"/logs", nil, &logs)
	streams := map[string]string{}
	for _, r := range logs.Records {
		streams[r.Stream] += string(r.Data)
	}
	if streams["stdout"] != "out:hi:hello\n" || streams["stderr"] != "err\n" || !logs.Done {
		t.Fatalf("logs: %+v", streams)
	}
	// A Session on the Computer sees the Command's file.
	var rec helmrtype.SessionCreateReceipt
	p.must("POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "files", Input: text("read made.txt"), ComputerID: c.ID}, &rec)
	if o := p.wait(rec.Session.ID, rec.Turn.ID); o.Status != helmrtype.TurnCompleted || string(o.Result) != `"made\n"` {
		t.Fatalf("a Session on the Computer: %+v %s", o, o.Result)
	}
	var members helmrtype.ComputerMemberPage
	p.must("GET", "/v1/computers/"+c.ID+"/members", nil, &members)
	if len(members.Members) != 2 || members.Members[0].Kind != "session" || members.Members[1].Kind != "command" {
		t.Fatalf("members: %+v", members)
	}
	// Timeout and cancel.
	p.must("POST", "/v1/computers/"+c.ID+"/commands", helmrtype.CommandRequest{Command: []string{"/bin/sleep", "30"}, Timeout: "300ms"}, &cmd)
	p.must("GET", "/v1/commands/"+cmd.ID+"/wait?timeout=30s", nil, &w)
	if w.Command == nil || w.Command.Status != helmrtype.CommandTimedOut {
		t.Fatalf("timeout: %+v", w)
	}
	p.must("POST", "/v1/computers/"+c.ID+"/commands", helmrtype.CommandRequest{Command: []string{"/bin/sleep", "30"}}, &cmd)
	p.must("POST", "/v1/commands/"+cmd.ID+"/cancel", nil, nil)
	p.must("GET", "/v1/commands/"+cmd.ID+"/wait?timeout=30s", nil, &w)
	if w.Command == nil || w.Command.Status != helmrtype.CommandCancelled {
		t.Fatalf("cancel: %+v", w)
	}
	if err := p.call("POST", "/v1/computers/"+c.ID+"/commands", helmrtype.CommandRequest{Command: []string{"ls"}, Cwd: "/etc"}, nil); !isCode(err, helmrtype.CodeInvalidRequest) {
		t.Fatalf("cwd outside /workspace: %v", err)
	}
	// Delete: refused while a Session is open; after it is closed, the
	// Computer and its files go.
	if err := p.call("DELETE", "/v1/computers/"+c.ID, nil, nil); !isCode(err, helmrtype.CodeConflict) {
		t.Fatalf("delete with an open Session: %v", err)
	}
	p.must("POST", "/v1/sessions/"+rec.Session.ID+"/cancel", nil, nil)
	var del helmrtype.ComputerState
	p.must("DELETE", "/v1/computers/"+c.ID, nil, &del)
	if del.Status != helmrtype.ComputerDeleted {
		t.Fatalf("deleted: %+v", del)
	}
	if _, err := os.Stat(filepath.Join(p.dataDir, "computers", c.ID, "workspace")); !os.IsNotExist(err) {
		t.Fatalf("the deleted Computer's files: %v", err)
	}
}

func isCode(err error, code helmrtype.Code) bool {
	return errors.Is(err, code)
}

func TestComputerCLI(t *testing.T) {
	p := startPlane(t, "")
	s := &server{url: p.url, key: p.key}
	out, errOut, code := s.cli(t, "computer", "create", "box", "--key", "cli-box", "--json")
	var c helmrtype.ComputerState
	if code != 0 || json.Unmarshal([]byte(out), &c) != nil || c.Key != "cli-box" {
		t.Fatalf("create: exit %d %s %s", code, out, errOut)
	}
	out, errOut, code = s.cli(t, "computer", "exec", "--key", "cli-box", "--set-env", "WHO=cli", "--",
		"/bin/sh", "-c", "echo hi $WHO; echo oops >&2; pwd; exit 7")
	// Unsandboxed, the Command's /workspace is its host directory.
	if pwd, ok := strings.CutPrefix(out, "hi cli\n"); code != 7 || !ok || !(pwd == "/workspace\n" || unsandboxed() && strings.HasSuffix(pwd, "/workspace\n")) || errOut != "oops\n" {
		t.Fatalf("exec: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = s.cli(t, "computer", "exec", c.ID, "--json", "--", "/bin/sh", "-c", "echo out; echo err >&2; exit 3")
	var ran struct {
		helmrtype.CommandState
		Stdout string `json:"stdout"`
		Stderr string `json:"stderr"`
	}
	if code != 3 || json.Unmarshal([]byte(out), &ran) != nil || ran.Stdout != "out\n" || ran.Stderr != "err\n" || ran.ExitCode == nil || *ran.ExitCode != 3 {
		t.Fatalf("exec --json: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out, errOut, code = s.cli(t, "computer", "exec", c.ID, "--", "/bin/sh", "-c", "cat > f; cat f"); code != 0 {
		t.Fatalf("exec by ID: exit %d %s %s", code, out, errOut)
	}
	if out, _, code = s.cli(t, "computer", "get", "--key", "cli-box"); code != 0 || !strings.Contains(out, c.ID) || !strings.Contains(out, "available") {
		t.Fatalf("get: exit %d %s", code, out)
	}
	if out, _, code = s.cli(t, "computer", "list"); code != 0 || !strings.Contains(out, c.ID) {
		t.Fatalf("list: exit %d %s", code, out)
	}
	if out, _, code = s.cli(t, "computer", "delete", "--key", "cli-box"); code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("delete: exit %d %s", code, out)
	}
	if _, _, code = s.cli(t, "computer", "get", "--key", "cli-box"); code != 3 {
		t.Fatalf("get after delete: exit %d, want 3 (not found)", code)
	}
}

// TestComputerUnavailable: a Computer whose image cannot be had (its
// Deployment published before the image went, as the engine takes it) is
// unavailable, with the reason; its Session gets a process_failed hold
// (its Turn stays queued) instead of a launch loop.
func TestComputerUnavailable(t *testing.T) {
	p := startPlane(t, "")
	// Through the engine alone: publishing through the control plane
	// pulls the image first, and refuses it (TestUnreachableImageIsRefused).
	b := programBinary(t, "unreachable")
	if _, err := p.cp.Engine.PublishDeployment(t.Context(), b.Digest, b.Manifest, b.Binary, ""); err != nil {
		t.Fatal(err)
	}
	r := p.create("unreachable", text("hi"))
	var s helmrtype.Session
	waitFor(t, "a process_failed hold", func() bool {
		s = p.session(r.Session.ID)
		return slices.ContainsFunc(s.Holds, func(h helmrtype.Hold) bool { return h.Kind == helmrtype.HoldProcessFailed })
	})
	var c helmrtype.ComputerState
	p.must("GET", "/v1/computers/"+*s.ComputerID, nil, &c)
	if c.Residency != helmrtype.ResidencyUnavailable || c.Error == nil || !strings.Contains(c.Error.Message, "127.0.0.1:9") {
		t.Fatalf("computer after a failed launch: %+v", c)
	}
	if st := p.turnStatus(r.Session.ID, r.Turn.ID); st != helmrtype.TurnQueued {
		t.Errorf("the turn is %s, want queued behind the hold", st)
	}
}

// TestUnreachableImageIsRefused: a Deployment whose image cannot be pulled
// is refused when it is published (image_build_failed, naming the
// Template and the image), and the current Deployment stays.
func TestUnreachableImageIsRefused(t *testing.T) {
	p := startPlane(t, "")
	var before helmrtype.Deployment
	p.must("GET", "/v1/deployments/current", nil, &before)
	b := programBinary(t, "unreachable")
	_, err := p.cp.PublishDeployment(t.Context(), b.Digest, b.Manifest, b.Binary, "", nil)
	if helmrtype.CodeOf(err) != helmrtype.CodeImageBuildFailed || !strings.Contains(err.Error(), "unreachable") || !strings.Contains(err.Error(), "127.0.0.1:9") {
		t.Fatalf("publishing an image nobody serves: %v", err)
	}
	var after helmrtype.Deployment
	p.must("GET", "/v1/deployments/current", nil, &after)
	if after.ID != before.ID {
		t.Fatalf("the current deployment changed from %s to %s", before.ID, after.ID)
	}
}
