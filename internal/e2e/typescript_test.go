package e2e

// End-to-end tests of TypeScript Agents: real helmr dev on the packages in
// testdata/ts-agents and examples/ts-quickstart, bundled by the SDK's
// bundler, run by Node in the sandbox, driven over real HTTP (the helmr
// CLI, the REST API, curl and the SDK's own HelmrClient). They need node
// and npm and a built SDK in sdk/typescript (npm ci && npm run build there;
// `make setup` does it), and skip, saying so, without them.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/deploy"
)

// tsAgentsDir is the package of the TypeScript test Agents.
const tsAgentsDir = "testdata/ts-agents"

var (
	tsInstallOnce sync.Once
	tsInstallErr  error
)

// needTypeScriptSDK skips the test unless node, npm and a built SDK are
// there, and installs the test package's dependencies once (helmr dev
// would too, but tests share the package directory).
func needTypeScriptSDK(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs TypeScript agents under helmr dev")
	}
	needNode(t)
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not on PATH: the TypeScript agent tests need it")
	}
	sdk := "../../sdk/typescript"
	for _, need := range []string{"package.json", "node_modules", "dist/index.js", "bin/helmr-bundle.mjs"} {
		if _, err := os.Stat(filepath.Join(sdk, need)); err != nil {
			t.Skipf("the TypeScript SDK is not built (%s/%s is missing; run npm ci && npm run build in sdk/typescript, or make setup)", sdk, need)
		}
	}
	tsInstallOnce.Do(func() {
		tsInstallErr = deploy.InstallDeps(context.Background(), tsAgentsDir, os.Stderr)
	})
	if tsInstallErr != nil {
		t.Fatal(tsInstallErr)
	}
}

// startTSDev runs helmr dev on dir with a new data directory.
func startTSDev(t *testing.T, dataDir, dir string) *server {
	t.Helper()
	s := startServer(t, dataDir, "dev", dir)
	deadline := time.Now().Add(3 * time.Minute)
	for !strings.Contains(s.output(), "deployed ") {
		if time.Now().After(deadline) {
			t.Fatalf("helmr dev did not deploy %s: %s", dir, s.output())
		}
		select {
		case <-s.done:
			t.Fatalf("helmr dev exited: %s", s.output())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return s
}

// createJSON creates a Session of agent with JSON input, without waiting.
func createJSON(t *testing.T, s *server, agent, input string) helmrtype.SessionCreateReceipt {
	t.Helper()
	args := []string{"session", "create", "--agent", agent, "--json"}
	if strings.HasPrefix(input, "{") {
		args = append(args, "--input-json", input)
	} else {
		args = append(args, "--text", input)
	}
	out, errOut, code := s.cli(t, args...)
	if code != 0 {
		t.Fatalf("create %s: exit %d: %s %s", agent, code, out, errOut)
	}
	var rec helmrtype.SessionCreateReceipt
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec.Turn == nil {
		t.Fatalf("create --json: %v: %s", err, out)
	}
	return rec
}

// tsPatience is how long a TypeScript test waits for what a session
// process does: a Node process under the race-detected suite on 2 cores
// was once seen to stall about two minutes before its first Turn (cause not
// found: the test prints helmr dev's output when it fails).
const tsPatience = 3 * time.Minute

// waitTurn waits for a Turn to settle through the REST API.
func waitTurn(t *testing.T, s *server, sid, turnID string) helmrtype.TurnOutcome {
	t.Helper()
	return waitTurnWithin(t, s, sid, turnID, tsPatience)
}

// waitTurnWithin is waitTurn for up to d.
func waitTurnWithin(t *testing.T, s *server, sid, turnID string, d time.Duration) helmrtype.TurnOutcome {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		var r helmrtype.TimedTurnWaitResult
		if err := apiCall(s.url, s.key, "GET", "/v1/sessions/"+sid+"/turns/"+turnID+"/wait?timeout=20s", nil, &r); err != nil {
			t.Fatalf("wait %s: %v", turnID, err)
		}
		if r.Status == helmrtype.WaitSettled {
			return *r.Outcome
		}
	}
	t.Fatalf("turn %s did not settle", turnID)
	return helmrtype.TurnOutcome{}
}

// sessionEvents returns a Session's timeline through the REST API.
func sessionEvents(t *testing.T, s *server, sid string) []helmrtype.SessionEvent {
	t.Helper()
	var page helmrtype.SessionEventPage
	if err := apiCall(s.url, s.key, "GET", "/v1/sessions/"+sid+"/events?limit=1000", nil, &page); err != nil {
		t.Fatal(err)
	}
	return page.Records
}

// eventWith reports whether the Session has an event of kind whose data
// contains s.
func eventWith(t *testing.T, srv *server, sid, kind, s string) bool {
	for _, e := range sessionEvents(t, srv, sid) {
		if e.Kind == kind && strings.Contains(string(e.Data), s) {
			return true
		}
	}
	return false
}

// imageFrom matches the image references of Templates (`.from("REF")`).
var imageFrom = regexp.MustCompile(`\.from\("([^"]+)"\)`)

// TestTypeScriptQuickstart is the README's `helmr dev examples/ts-quickstart`:
// the specification's reviewer example, as written, but for its image
// reference: a copy of the package names the same image on a registry on
// loopback, made from the host's node (no registry on the internet is
// needed).
func TestTypeScriptQuickstart(t *testing.T) {
	needTypeScriptSDK(t)
	example := "../../examples/ts-quickstart"
	if _, err := os.Stat(filepath.Join(example, "package.json")); err != nil {
		t.Skip("examples/ts-quickstart does not exist yet")
	}
	sdk, err := filepath.Abs("../../sdk/typescript")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pkg, err := os.ReadFile(filepath.Join(example, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The copy depends on the same SDK, by its absolute path (the lockfile,
	// made for the relative one, is left behind: npm install runs).
	pkg = bytes.ReplaceAll(pkg, []byte(`"file:../../sdk/typescript"`), []byte(`"file:`+sdk+`"`))
	if err := os.WriteFile(filepath.Join(dir, "package.json"), pkg, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(example, "tsconfig.json")); err == nil {
		os.WriteFile(filepath.Join(dir, "tsconfig.json"), b, 0o644)
	}
	sources, _ := filepath.Glob(filepath.Join(example, "agents", "*.ts"))
	if len(sources) == 0 {
		t.Fatal("examples/ts-quickstart has no agents/*.ts")
	}
	os.MkdirAll(filepath.Join(dir, "agents"), 0o755)
	var refs []string
	var host string
	img := hostNodeImage(t)
	for _, f := range sources {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range imageFrom.FindAllSubmatch(b, -1) {
			refs = append(refs, string(m[1]))
		}
		if host == "" && len(refs) > 0 {
			host = serveImages(t, img, refs...)
		}
		b = imageFrom.ReplaceAllFunc(b, func(m []byte) []byte {
			return []byte(`.from("` + host + "/" + string(imageFrom.FindSubmatch(m)[1]) + `")`)
		})
		if err := os.WriteFile(filepath.Join(dir, "agents", filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := deploy.InstallDeps(context.Background(), dir, os.Stderr); err != nil {
		t.Fatal(err)
	}
	s := startTSDev(t, t.TempDir(), dir)
	rec := createJSON(t, s, "reviewer", "Review PR 42")
	sess := rec.Session
	// The first Turn pulls the Template's image.
	outcome := waitTurnWithin(t, s, sess.ID, rec.Turn.ID, 3*time.Minute)
	var result map[string]any
	json.Unmarshal(outcome.Result, &result)
	if outcome.Status != helmrtype.TurnCompleted || len(result) != 1 || result["reviewed"] != true {
		t.Fatalf("outcome %+v %+v (%s)", outcome, outcome.Error, s.output())
	}
	if got := outcome.Response.PlainText(); got != "Review complete" {
		t.Fatalf("response %q", got)
	}
	if !eventWith(t, s, sess.ID, "turn.output", "Review started") {
		t.Fatalf("no output: %+v", sessionEvents(t, s, sess.ID))
	}
	var a helmrtype.AgentInfo
	if err := apiCall(s.url, s.key, "GET", "/v1/agents/reviewer", nil, &a); err != nil || a.Template != "repo" || a.DeploymentID != sess.DeploymentID {
		t.Fatalf("agent: %v %+v", err, a)
	}
}

// TestTypeScriptAgents runs the test Agents of testdata/ts-agents on one
// helmr dev.
func TestTypeScriptAgents(t *testing.T) {
	needTypeScriptSDK(t)
	s := startTSDev(t, t.TempDir(), tsAgentsDir)
	t.Cleanup(func() {
		if t.Failed() {
			out := s.output()
			t.Logf("helmr dev's output (last 8 KiB):\n%s", out[max(0, len(out)-8192):])
		}
	})

	t.Run("deployment", func(t *testing.T) {
		var page helmrtype.DeploymentPage
		if err := apiCall(s.url, s.key, "GET", "/v1/deployments", nil, &page); err != nil || len(page.Deployments) != 1 {
			t.Fatalf("deployments: %v %+v", err, page)
		}
		m := page.Deployments[0].Manifest
		if m.Runtime != helmrtype.RuntimeNode || m.SDK != "typescript" || len(m.Agents) != 11 {
			t.Fatalf("manifest: runtime %q sdk %q, %d agents", m.Runtime, m.SDK, len(m.Agents))
		}
	})

	t.Run("typed invocation", func(t *testing.T) {
		// The client is compiled by tsc (strict): the types are checked. It
		// goes to .build, which helmr dev's fingerprint skips (no redeploy).
		cmd := exec.Command("npm", "run", "--silent", "build:client")
		cmd.Dir = tsAgentsDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("tsc: %v\n%s", err, out)
		}
		run := exec.Command("node", filepath.Join(tsAgentsDir, ".build", "client", "typed.js"))
		run.Env = append(os.Environ(), "HELMR_API_URL="+s.url, "HELMR_API_KEY="+s.key)
		out, err := run.Output()
		if err != nil {
			t.Fatalf("typed client: %v %s", err, out)
		}
		var got struct {
			Session, Status string
			Title           *string
		}
		if err := json.Unmarshal(out, &got); err != nil || got.Status != "completed" || got.Title == nil || *got.Title != "Issue #42" {
			t.Fatalf("typed client printed %s (%v)", out, err)
		}
		if !eventWith(t, s, got.Session, "turn.output", "working on issue 42") {
			t.Fatal("the worker's output is missing")
		}
		time.Sleep(1500 * time.Millisecond) // past helmr dev's poll
		if n := strings.Count(s.output(), "deployed "); n != 1 {
			t.Fatalf("helmr dev deployed %d times: %s", n, s.output())
		}
	})

	t.Run("zod with an async transform", func(t *testing.T) {
		rec := createJSON(t, s, "validated", `{"n": 21, "word": "hi"}`)
		o := waitTurn(t, s, rec.Session.ID, rec.Turn.ID)
		if o.Status != helmrtype.TurnCompleted || string(o.Result) != `{"doubled":42,"shout":"HI","transformed":true}` {
			t.Fatalf("outcome %+v %s %+v", o, o.Result, o.Error)
		}
		bad := createJSON(t, s, "validated", `{"n": "21", "word": ""}`)
		o = waitTurn(t, s, bad.Session.ID, bad.Turn.ID)
		if o.Status != helmrtype.TurnFailed || o.Error == nil || o.Error.Code != helmrtype.CodeInputInvalid {
			t.Fatalf("invalid input: %+v %+v", o, o.Error)
		}
	})

	t.Run("onMessage and MessageRejected", func(t *testing.T) {
		rec := createJSON(t, s, "chat", "hello")
		sid, tid := rec.Session.ID, rec.Turn.ID
		waitForWithin(t, "listening", tsPatience, func() bool { return eventWith(t, s, sid, "turn.output", "listening") })
		for _, m := range []string{"a", "bad", "stop"} {
			if err := apiCall(s.url, s.key, "POST", "/v1/sessions/"+sid+"/turns/"+tid+"/messages",
				helmrtype.MessageRequest{Content: text(m)}, nil); err != nil {
				t.Fatalf("send %s: %v", m, err)
			}
		}
		o := waitTurn(t, s, sid, tid)
		if o.Status != helmrtype.TurnCompleted || string(o.Result) != `{"got":["a","stop"]}` {
			t.Fatalf("outcome %+v %s %+v", o, o.Result, o.Error)
		}
		if !eventWith(t, s, sid, helmrtype.EventMessageRejected, "message_rejected") {
			t.Fatalf("no message.rejected with message_rejected: %+v", sessionEvents(t, s, sid))
		}
	})

	t.Run("ask answered through REST", func(t *testing.T) {
		rec := createJSON(t, s, "asker", "go")
		sid, tid := rec.Session.ID, rec.Turn.ID
		var ask helmrtype.AskState
		waitForWithin(t, "a question", tsPatience, func() bool {
			var page helmrtype.AskPage
			apiCall(s.url, s.key, "GET", "/v1/sessions/"+sid+"/turns/"+tid+"/asks", nil, &page)
			if len(page.Asks) > 0 {
				ask = page.Asks[0]
			}
			return len(page.Asks) > 0
		})
		if ask.Question.Prompt.PlainText() != "Ship it?" {
			t.Fatalf("question %+v", ask.Question)
		}
		if err := apiCall(s.url, s.key, "POST", "/v1/sessions/"+sid+"/turns/"+tid+"/asks/"+ask.ID+"/respond",
			map[string]any{"answer": map[string]any{"selected": []string{"yes"}}, "response_id": "r1"}, nil); err != nil {
			t.Fatal(err)
		}
		o := waitTurn(t, s, sid, tid)
		if o.Status != helmrtype.TurnCompleted || string(o.Result) != `{"selected":["yes"],"by":"api_key"}` {
			t.Fatalf("outcome %+v %s %+v", o, o.Result, o.Error)
		}
	})

	t.Run("a parked wait keeps its memory", func(t *testing.T) {
		rec := createJSON(t, s, "parker", "go")
		sid, tid := rec.Session.ID, rec.Turn.ID
		waitForWithin(t, "the parked residency", tsPatience, func() bool {
			return eventWith(t, s, sid, helmrtype.EventComputerResidency, `"residency":"parked"`) ||
				eventWith(t, s, sid, helmrtype.EventComputerResidency, `"residency":"running","error"`)
		})
		var c helmrtype.ComputerState
		var sess helmrtype.Session
		if err := apiCall(s.url, s.key, "GET", "/v1/sessions/"+sid, nil, &sess); err != nil || sess.ComputerID == nil {
			t.Fatalf("session: %v %+v", err, sess)
		}
		if err := apiCall(s.url, s.key, "GET", "/v1/computers/"+*sess.ComputerID, nil, &c); err != nil {
			t.Fatal(err)
		}
		if c.CheckpointOff != "" {
			t.Skipf("parking is off on this host: %s", c.CheckpointOff)
		}
		if c.Residency != helmrtype.ResidencyParked {
			t.Fatalf("computer residency %s, want parked; events %+v", c.Residency, sessionEvents(t, s, sid))
		}
		if pid := hostPIDOfComputer(*sess.ComputerID); pid != 0 {
			t.Fatalf("a parked session still has process %d", pid)
		}
		var stamp string
		for _, e := range sessionEvents(t, s, sid) {
			if m := regexp.MustCompile(`stamp ([0-9.e-]+)`).FindSubmatch(e.Data); e.Kind == "turn.output" && m != nil {
				stamp = string(m[1])
			}
		}
		var page helmrtype.AskPage
		if err := apiCall(s.url, s.key, "GET", "/v1/sessions/"+sid+"/turns/"+tid+"/asks", nil, &page); err != nil || len(page.Asks) != 1 {
			t.Fatalf("asks: %v %+v", err, page)
		}
		if err := apiCall(s.url, s.key, "POST", "/v1/sessions/"+sid+"/turns/"+tid+"/asks/"+page.Asks[0].ID+"/respond",
			map[string]any{"answer": "go on", "response_id": "p1"}, nil); err != nil {
			t.Fatal(err)
		}
		o := waitTurn(t, s, sid, tid)
		var res struct {
			Count  int             `json:"count"`
			Stamp  string          `json:"stamp"`
			File   string          `json:"file"`
			Answer json.RawMessage `json:"answer"`
		}
		json.Unmarshal(o.Result, &res)
		if o.Status != helmrtype.TurnCompleted || res.Count != 1 || res.Stamp == "" || res.Stamp != stamp || res.File != "1" ||
			!strings.Contains(string(res.Answer), "go on") {
			t.Fatalf("after the restore: %+v %s %+v (stamp was %q)", o, o.Result, o.Error, stamp)
		}
		if !eventWith(t, s, sid, helmrtype.EventComputerResidency, `"residency":"restoring"`) {
			t.Fatal("no restoring residency")
		}
	})

	t.Run("token completed by curl", func(t *testing.T) {
		if _, err := exec.LookPath("curl"); err != nil {
			t.Skip("curl is not on PATH")
		}
		rec := createJSON(t, s, "tokened", "go")
		sid, tid := rec.Session.ID, rec.Turn.ID
		var where struct{ CallbackURL, PublicAccessToken string }
		waitForWithin(t, "the token's callback", tsPatience, func() bool {
			for _, e := range sessionEvents(t, s, sid) {
				var d struct {
					Content helmrtype.Content `json:"content"`
				}
				if e.Kind != "turn.output" || json.Unmarshal(e.Data, &d) != nil {
					continue
				}
				for _, p := range d.Content {
					if p.Type == helmrtype.PartJSON && json.Unmarshal(p.Value, &where) == nil && where.CallbackURL != "" {
						return true
					}
				}
			}
			return false
		})
		if !strings.HasPrefix(where.PublicAccessToken, "hlmr_tok_") || !strings.HasPrefix(where.CallbackURL, s.url+"/v1/tokens/") {
			t.Fatalf("token %+v (server %s)", where, s.url)
		}
		out, err := exec.Command("curl", "-sS", "--fail-with-body", "-X", "POST", where.CallbackURL,
			"-H", "Authorization: Bearer "+where.PublicAccessToken, "-H", "Content-Type: application/json",
			"-d", `{"data": {"approved": true}}`).CombinedOutput()
		if err != nil || !strings.Contains(string(out), `"completed"`) {
			t.Fatalf("curl: %v %s", err, out)
		}
		o := waitTurn(t, s, sid, tid)
		var res struct {
			Approved bool   `json:"approved"`
			TokenID  string `json:"tokenId"`
		}
		if o.Status != helmrtype.TurnCompleted || json.Unmarshal(o.Result, &res) != nil || !res.Approved || !strings.Contains(where.CallbackURL, res.TokenID) {
			t.Fatalf("outcome %+v %s %+v", o, o.Result, o.Error)
		}
	})

	t.Run("actor receive", func(t *testing.T) {
		rec := createJSON(t, s, "counter", "one")
		o1 := waitTurn(t, s, rec.Session.ID, rec.Turn.ID)
		out, errOut, code := s.cli(t, "session", "enqueue", rec.Session.ID, "--text", "two", "--json")
		var ts helmrtype.TurnState
		if code != 0 || json.Unmarshal([]byte(out), &ts) != nil {
			t.Fatalf("enqueue: %d %s %s", code, out, errOut)
		}
		o2 := waitTurn(t, s, rec.Session.ID, ts.ID)
		var r1, r2 struct{ Count, PID int }
		json.Unmarshal(o1.Result, &r1)
		json.Unmarshal(o2.Result, &r2)
		if o1.Status != helmrtype.TurnCompleted || o2.Status != helmrtype.TurnCompleted || r1.Count != 1 || r2.Count != 2 || r1.PID != r2.PID || r1.PID == 0 {
			t.Fatalf("actor turns: %s %s", o1.Result, o2.Result)
		}
		// Closing drains: receive() returns null, run returns, the
		// process stops in order and the Session closes.
		if err := apiCall(s.url, s.key, "POST", "/v1/sessions/"+rec.Session.ID+"/close", map[string]any{}, nil); err != nil {
			t.Fatal(err)
		}
		waitForWithin(t, "the Session to close", tsPatience, func() bool {
			var sess helmrtype.Session
			apiCall(s.url, s.key, "GET", "/v1/sessions/"+rec.Session.ID, nil, &sess)
			return sess.Status == helmrtype.SessionClosed
		})
		for _, e := range sessionEvents(t, s, rec.Session.ID) {
			if e.Kind == "session.process_failed" {
				t.Fatalf("the Actor's process failed on close: %s", e.Data)
			}
		}
	})

	t.Run("timer", func(t *testing.T) {
		rec := createJSON(t, s, "sleeper", "1s")
		o := waitTurn(t, s, rec.Session.ID, rec.Turn.ID)
		var r struct {
			Waited    string
			ElapsedMs int
		}
		if o.Status != helmrtype.TurnCompleted || json.Unmarshal(o.Result, &r) != nil || r.Waited != "1s" || r.ElapsedMs < 900 {
			t.Fatalf("outcome %+v %s %+v", o, o.Result, o.Error)
		}
		if !eventWith(t, s, rec.Session.ID, helmrtype.EventWaitStarted, "timer") {
			t.Fatalf("no timer wait in the timeline: %+v", sessionEvents(t, s, rec.Session.ID))
		}
		// Past its 100ms hot wait the Node process was frozen, then thawed.
		for _, k := range []string{helmrtype.EventWaitSuspended, helmrtype.EventWaitResumed, helmrtype.EventWaitResolved} {
			if !eventWith(t, s, rec.Session.ID, k, "") {
				t.Errorf("no %s event", k)
			}
		}
	})

	t.Run("planner spawns workers through runtime MCP", func(t *testing.T) {
		rec := createJSON(t, s, "planner", "alpha beta")
		o := waitTurn(t, s, rec.Session.ID, rec.Turn.ID)
		want := `{"reports":[{"word":"alpha","upper":"ALPHA","letters":5},{"word":"beta","upper":"BETA","letters":4}]}`
		if o.Status != helmrtype.TurnCompleted || string(o.Result) != want || o.Response.PlainText() != "2 workers done" {
			t.Fatalf("planner: %+v %s %+v", o, o.Result, o.Error)
		}
		// The workers are the planner's children, spawned from its Turn.
		var page helmrtype.SessionPage
		if err := apiCall(s.url, s.key, "GET", "/v1/sessions?parent_session_id="+rec.Session.ID, nil, &page); err != nil || len(page.Sessions) != 2 {
			t.Fatalf("children: %v %+v", err, page)
		}
		for _, c := range page.Sessions {
			if c.Agent != "tsworker" {
				t.Fatalf("child %+v", c)
			}
		}
	})

	t.Run("interrupt with onCancel", func(t *testing.T) {
		rec := createJSON(t, s, "interruptible", "wait")
		sid, tid := rec.Session.ID, rec.Turn.ID
		waitForWithin(t, "the turn to wait", tsPatience, func() bool { return eventWith(t, s, sid, "turn.output", "waiting to be interrupted") })
		if err := apiCall(s.url, s.key, "POST", "/v1/sessions/"+sid+"/turns/"+tid+"/interrupt", map[string]any{}, nil); err != nil {
			t.Fatal(err)
		}
		o := waitTurn(t, s, sid, tid)
		if o.Status != helmrtype.TurnInterrupted || o.Error == nil || o.Error.Code != helmrtype.CodeInterrupted {
			t.Fatalf("interrupted turn: %+v %+v", o, o.Error)
		}
		// The callback ran, and the drained process serves the next Turn.
		out, _, code := s.cli(t, "session", "enqueue", sid, "--text", "check", "--json")
		var ts helmrtype.TurnState
		if code != 0 || json.Unmarshal([]byte(out), &ts) != nil {
			t.Fatalf("enqueue: %d %s", code, out)
		}
		o = waitTurn(t, s, sid, ts.ID)
		var r struct{ Cleaned string }
		if o.Status != helmrtype.TurnCompleted || json.Unmarshal(o.Result, &r) != nil || r.Cleaned == "" {
			t.Fatalf("after the interrupt: %+v %s %+v", o, o.Result, o.Error)
		}
	})
}

// TestTypeScriptTurnSurvivesKill9: the control plane is killed (SIGKILL)
// while a TypeScript Turn waits on a timer, its Node process frozen; after a
// restart on the same data the process reattaches and the Turn completes,
// as a Go Turn does.
func TestTypeScriptTurnSurvivesKill9(t *testing.T) {
	needTypeScriptSDK(t)
	data := t.TempDir()
	s := startTSDev(t, data, tsAgentsDir)
	rec := createJSON(t, s, "sleeper", "4s")
	sid, tid := rec.Session.ID, rec.Turn.ID
	waitForWithin(t, "the suspended timer wait", tsPatience, func() bool { return eventWith(t, s, sid, helmrtype.EventWaitSuspended, "") })
	s.kill()
	s2 := startTSDev(t, data, tsAgentsDir)
	o := waitTurn(t, s2, sid, tid)
	var r struct {
		Waited string
		PID    int
	}
	if o.Status != helmrtype.TurnCompleted || json.Unmarshal(o.Result, &r) != nil || r.Waited != "4s" {
		t.Fatalf("after the restart: %+v %s %+v\n%s", o, o.Result, o.Error, s2.output())
	}
	for _, e := range sessionEvents(t, s2, sid) {
		if e.Kind == "session.process_failed" {
			t.Fatalf("the process failed across the restart: %s", fmt.Sprint(string(e.Data)))
		}
	}
}

// Ctrl-C of helmr dev while one Session's wait is parked and another's is
// still hot parks both (and says so); after helmr dev starts again on the
// same data directory, the answers restore them with their memory.
func TestDevCtrlCParksWaitingSessions(t *testing.T) {
	needTypeScriptSDK(t)
	data := t.TempDir()
	s := startTSDev(t, data, tsAgentsDir)
	parked, hot := createJSON(t, s, "parker", "go"), createJSON(t, s, "parker", "hot")
	waitForWithin(t, "the first wait parked", tsPatience, func() bool {
		return eventWith(t, s, parked.Session.ID, helmrtype.EventComputerResidency, `"residency":"parked"`) ||
			eventWith(t, s, parked.Session.ID, helmrtype.EventWaitSuspended, "")
	})
	if !eventWith(t, s, parked.Session.ID, helmrtype.EventComputerResidency, `"residency":"parked"`) {
		t.Skip("parking is off on this host (the wait was frozen)")
	}
	stamp := func(sid string) string {
		var st string
		waitForWithin(t, "a stamp", tsPatience, func() bool {
			for _, e := range sessionEvents(t, s, sid) {
				if m := regexp.MustCompile(`stamp ([0-9.e-]+)`).FindSubmatch(e.Data); e.Kind == "turn.output" && m != nil {
					st = string(m[1])
				}
			}
			return st != ""
		})
		return st
	}
	stamps := map[string]string{parked.Session.ID: stamp(parked.Session.ID), hot.Session.ID: stamp(hot.Session.ID)}
	s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		t.Fatalf("helmr dev did not stop: %s", s.output())
	}
	if !strings.Contains(s.output(), "parked 2 waiting or idle sessions") {
		t.Fatalf("helmr dev did not say what it parked: %s", s.output())
	}
	s2 := startTSDev(t, data, tsAgentsDir)
	for _, r := range []helmrtype.SessionCreateReceipt{parked, hot} {
		sid, tid := r.Session.ID, r.Turn.ID
		var page helmrtype.AskPage
		if err := apiCall(s2.url, s2.key, "GET", "/v1/sessions/"+sid+"/turns/"+tid+"/asks", nil, &page); err != nil || len(page.Asks) != 1 {
			t.Fatalf("asks of %s: %v %+v", sid, err, page)
		}
		if err := apiCall(s2.url, s2.key, "POST", "/v1/sessions/"+sid+"/turns/"+tid+"/asks/"+page.Asks[0].ID+"/respond",
			map[string]any{"answer": "after the restart", "response_id": "r-" + sid}, nil); err != nil {
			t.Fatal(err)
		}
		o := waitTurn(t, s2, sid, tid)
		var res struct {
			Count int    `json:"count"`
			Stamp string `json:"stamp"`
		}
		json.Unmarshal(o.Result, &res)
		if o.Status != helmrtype.TurnCompleted || res.Count != 1 || res.Stamp != stamps[sid] {
			t.Fatalf("session %s after the restart: %+v %s %+v (stamp was %q)", sid, o, o.Result, o.Error, stamps[sid])
		}
	}
}
