package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
)

type waitResult struct {
	Value json.RawMessage `json:"value"`
	Error string          `json:"error"`
	PID   int             `json:"pid"`
	Init  int             `json:"init"`
	By    string          `json:"responded_by"`
	ByID  string          `json:"responded_by_id"`
}

func result(t *testing.T, o helmrtype.TurnOutcome) waitResult {
	t.Helper()
	return completedResult[waitResult](t, o)
}

// completedResult checks that a Turn completed and decodes its result.
func completedResult[T any](t *testing.T, o helmrtype.TurnOutcome) T {
	t.Helper()
	var r T
	if o.Status != "completed" {
		t.Fatalf("turn: %+v %+v", o, o.Error)
	}
	if err := json.Unmarshal(o.Result, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func hasEvent(p *plane, sid, kind string) bool {
	for _, e := range p.events(sid) {
		if e.Kind == kind {
			return true
		}
	}
	return false
}

// A timer is durable: the control plane restarts while the Turn waits, and
// the timer still fires, in the same process, which was suspended (frozen)
// while it waited.
func TestTimerSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	p := startPlane(t, dir)
	r := p.create("waiter", text("timer 2s"))
	sid := r.Session.ID
	p.waitEvent(sid, helmrtype.EventWaitStarted)
	pid := sessionPID(t, p, sid)
	p.detach()
	p2 := startPlane(t, dir)
	res := result(t, p2.wait(sid, r.Turn.ID))
	if !sameProcess(t, p2, sid, pid, res.PID) || res.Init != 1 {
		t.Fatalf("timer turn: %+v, want process %d and one init", res, pid)
	}
	var ms int64
	json.Unmarshal(res.Value, &ms)
	if ms < 1900 {
		t.Fatalf("the timer fired after %d ms, want about 2000", ms)
	}
	for _, k := range []string{helmrtype.EventWaitResolved, helmrtype.EventWaitSuspended, helmrtype.EventWaitResumed} {
		if !hasEvent(p2, sid, k) {
			t.Errorf("no %s event", k)
		}
	}
}

// cpuTicks is the CPU time (user+system, clock ticks) pid used so far.
func cpuTicks(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// A suspended process uses no CPU, even with a goroutine spinning, and
// goes on when its wait resolves.
func TestSuspendedProcessUsesNoCPU(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("waiter", text("timer 3s busy"))
	sid := r.Session.ID
	if parking(p) {
		// Parked: no process at all, then restored by the timer.
		p.waitEvent(sid, helmrtype.EventWaitStarted)
		pid := sessionPID(t, p, sid)
		p.waitEvent(sid, helmrtype.EventWaitSuspended)
		if !p.cp.Supervisor.Suspended(sid) {
			t.Fatal("the process is not suspended after wait.suspended")
		}
		var s helmrtype.Session
		p.must("GET", "/v1/sessions/"+sid, nil, &s)
		if live := pidOfComputer(p, *s.ComputerID); live != 0 {
			t.Fatalf("a parked session still has process %d", live)
		}
		if res := result(t, p.wait(sid, r.Turn.ID)); !sameProcess(t, p, sid, pid, res.PID) || res.Init != 1 {
			t.Fatalf("timer turn: %+v", res)
		}
		return
	}
	p.waitEvent(sid, helmrtype.EventWaitSuspended)
	pid := sessionPID(t, p, sid)
	if !p.cp.Supervisor.Suspended(sid) {
		t.Fatal("the process is not suspended after wait.suspended")
	}
	before := cpuTicks(t, pid)
	time.Sleep(time.Second) // the measurement window
	used := cpuTicks(t, pid) - before
	if !p.cp.Supervisor.Suspended(sid) {
		t.Fatal("the process was thawed while its timer waited")
	}
	if used > 1 {
		t.Fatalf("a suspended process used %d CPU ticks in a second", used)
	}
	res := result(t, p.wait(sid, r.Turn.ID))
	if !sameProcess(t, p, sid, pid, res.PID) {
		t.Fatalf("timer turn: %+v", res)
	}
	t.Logf("measured: %d CPU ticks in 1 s while suspended (a spinning goroutine otherwise uses ~100)", used)
}

type tokenInfo struct {
	Token, Secret, URL string
}

func tokenOf(t *testing.T, p *plane, sid string) tokenInfo {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, e := range p.events(sid) {
			if e.Kind != "turn.output" {
				continue
			}
			var d struct{ Content helmrtype.Content }
			json.Unmarshal(e.Data, &d)
			for _, part := range d.Content {
				var ti tokenInfo
				if part.Type == "json" && json.Unmarshal(part.Value, &ti) == nil && ti.Token != "" {
					return ti
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no token in the output")
	return tokenInfo{}
}

// callAs is call with another bearer credential.
func (p *plane) callAs(cred, method, path string, body, out any) error {
	saved := p.key
	p.key = cred
	defer func() { p.key = saved }()
	return p.call(method, path, body, out)
}

func TestTokenCompletedWithPublicCredential(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("waiter", text("token - -"))
	sid := r.Session.ID
	ti := tokenOf(t, p, sid)
	if !strings.HasSuffix(ti.URL, "/v1/tokens/"+ti.Token+"/complete") || !strings.HasPrefix(ti.Secret, "hlmr_tok_") {
		t.Fatalf("token: %+v", ti)
	}
	// A second Token, to check the credential is narrow.
	r2 := p.create("waiter", text("token - -"))
	other := tokenOf(t, p, r2.Session.ID)

	// The credential opens no other route and no other Token.
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/sessions"}, {"GET", "/v1/tokens/" + ti.Token}, {"POST", "/v1/tokens/" + ti.Token + "/cancel"},
		{"POST", "/v1/tokens/" + other.Token + "/complete"},
	} {
		err := p.callAs(ti.Secret, c.method, c.path, map[string]any{"data": 1}, nil)
		if !errors.Is(err, helmrtype.CodeUnauthorized) {
			t.Errorf("%s %s with the public credential: %v, want unauthorized", c.method, c.path, err)
		}
	}
	var c helmrtype.TokenCompletion
	if err := p.callAs(ti.Secret, "POST", "/v1/tokens/"+ti.Token+"/complete", map[string]any{"data": map[string]any{"approved": true, "n": 1}}, &c); err != nil {
		t.Fatal(err)
	}
	if c.Status != "completed" || c.Token.Status != helmrtype.TokenCompleted {
		t.Fatalf("completion: %+v", c)
	}
	// The same data again (keys in another order): already_completed.
	if err := p.callAs(ti.Secret, "POST", "/v1/tokens/"+ti.Token+"/complete", map[string]any{"data": map[string]any{"n": 1, "approved": true}}, &c); err != nil || c.Status != "already_completed" {
		t.Fatalf("repeat: %+v %v", c, err)
	}
	// Other data: a conflict, never overwritten.
	err := p.call("POST", "/v1/tokens/"+ti.Token+"/complete", map[string]any{"data": "other"}, nil)
	var he *helmrtype.Error
	if !errors.As(err, &he) || he.Code != helmrtype.CodeTokenCompletionConflict || he.Status != 409 {
		t.Fatalf("conflicting completion: %v", err)
	}
	res := result(t, p.wait(sid, r.Turn.ID))
	if string(res.Value) != `{"approved":true,"n":1}` {
		t.Fatalf("waiter got %s", res.Value)
	}
	var st helmrtype.TokenState
	p.must("GET", "/v1/tokens/"+ti.Token, nil, &st)
	if st.Status != helmrtype.TokenCompleted || st.PublicAccessToken != "" || st.CompletedAt == nil {
		t.Fatalf("token after completion: %+v", st)
	}
	// Cancel the other Token: its waiter sees token_cancelled.
	p.must("POST", "/v1/tokens/"+other.Token+"/cancel", nil, &st)
	if res := result(t, p.wait(r2.Session.ID, r2.Turn.ID)); res.Error != string(helmrtype.CodeTokenCancelled) {
		t.Fatalf("waiter of a cancelled token: %+v", res)
	}
}

// A Token whose wait has a JSON Schema refuses a completion that does not
// satisfy it (400 input_invalid) and stays pending; the correct completion
// then completes it and the Turn.
func TestTokenRefusesDataAgainstItsWaitsSchema(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("waiter", text("tokenschema"))
	sid := r.Session.ID
	ti := tokenOf(t, p, sid)
	p.waitEvent(sid, helmrtype.EventWaitStarted)
	for _, bad := range []any{"yes", map[string]any{"approved": "yes", "by": "u-1"}, map[string]any{"approved": true}} {
		err := p.callAs(ti.Secret, "POST", "/v1/tokens/"+ti.Token+"/complete", map[string]any{"data": bad}, nil)
		var he *helmrtype.Error
		if !errors.As(err, &he) || he.Code != helmrtype.CodeInputInvalid || he.Status != 400 {
			t.Fatalf("completion with %v: %v, want 400 input_invalid", bad, err)
		}
	}
	var st helmrtype.TokenState
	p.must("GET", "/v1/tokens/"+ti.Token, nil, &st)
	if st.Status != helmrtype.TokenPending || st.Data != nil {
		t.Fatalf("token after refused completions: %+v", st)
	}
	var c helmrtype.TokenCompletion
	if err := p.callAs(ti.Secret, "POST", "/v1/tokens/"+ti.Token+"/complete", map[string]any{"data": map[string]any{"approved": true, "by": "u-1"}}, &c); err != nil || c.Status != "completed" {
		t.Fatalf("correct completion: %+v %v", c, err)
	}
	o := p.wait(sid, r.Turn.ID)
	res := result(t, o)
	if o.Status != helmrtype.TurnCompleted || res.Error != "" || string(res.Value) != `{"approved":true,"by":"u-1"}` {
		t.Fatalf("waiter: %+v %+v", o, res)
	}
}

func TestTokenExpiryAndWaiterTimeout(t *testing.T) {
	p := startPlane(t, "")
	expiring := p.create("waiter", text("token 300ms 1h"))
	impatient := p.create("waiter", text("token 1h 300ms"))
	if res := result(t, p.wait(expiring.Session.ID, expiring.Turn.ID)); res.Error != string(helmrtype.CodeTokenExpired) {
		t.Fatalf("expired token: %+v", res)
	}
	if res := result(t, p.wait(impatient.Session.ID, impatient.Turn.ID)); res.Error != string(helmrtype.CodeWaitTimeout) {
		t.Fatalf("waiter timeout: %+v", res)
	}
	// The waiter's timeout leaves the Token pending.
	ti := tokenOf(t, p, impatient.Session.ID)
	var st helmrtype.TokenState
	p.must("GET", "/v1/tokens/"+ti.Token, nil, &st)
	if st.Status != helmrtype.TokenPending {
		t.Fatalf("token after its waiter timed out: %+v", st)
	}
	ex := tokenOf(t, p, expiring.Session.ID)
	err := p.call("POST", "/v1/tokens/"+ex.Token+"/complete", map[string]any{"data": 1}, nil)
	if !errors.Is(err, helmrtype.CodeTokenExpired) {
		t.Fatalf("completing an expired token: %v", err)
	}
}

// A Token completed right after a restart reaches the waiting Turn in its
// process, which survived the restart.
func TestTokenWaitSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	p := startPlane(t, dir)
	r := p.create("waiter", text("token - -"))
	sid := r.Session.ID
	ti := tokenOf(t, p, sid)
	p.waitEvent(sid, helmrtype.EventWaitStarted)
	pid := sessionPID(t, p, sid)
	p.detach()
	p2 := startPlane(t, dir)
	p2.must("POST", "/v1/tokens/"+ti.Token+"/complete", map[string]any{"data": "after restart"}, nil)
	res := result(t, p2.wait(sid, r.Turn.ID))
	if string(res.Value) != `"after restart"` || !sameProcess(t, p2, sid, pid, res.PID) || res.Init != 1 {
		t.Fatalf("after restart: %+v (pid was %d)", res, pid)
	}
}

func askOf(t *testing.T, p *plane, sid, turnID string) helmrtype.AskState {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var page helmrtype.AskPage
		p.must("GET", "/v1/sessions/"+sid+"/turns/"+turnID+"/asks", nil, &page)
		if len(page.Asks) > 0 {
			return page.Asks[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no question")
	return helmrtype.AskState{}
}

func TestAskChoiceAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	p := startPlane(t, dir)
	r := p.create("waiter", text("ask"))
	sid := r.Session.ID
	a := askOf(t, p, sid, r.Turn.ID)
	if a.Status != helmrtype.AskPending || a.Question.Answer.Type != "choice" || len(a.Question.Answer.Options) != 2 {
		t.Fatalf("question: %+v", a)
	}
	p.detach()
	p2 := startPlane(t, dir)
	path := "/v1/sessions/" + sid + "/turns/" + r.Turn.ID + "/asks/" + a.ID
	// Bad answers are refused and change nothing.
	for _, bad := range []any{"yes", map[string]any{"selected": []string{"maybe"}}, map[string]any{"selected": []string{"yes", "no"}}} {
		err := p2.call("POST", path+"/respond", map[string]any{"answer": bad, "response_id": "r1"}, nil)
		if !errors.Is(err, helmrtype.CodeAnswerInvalid) {
			t.Errorf("answer %v: %v", bad, err)
		}
	}
	var got helmrtype.AskState
	p2.must("POST", path+"/respond", map[string]any{"answer": map[string]any{"selected": []string{"yes"}}, "response_id": "r1"}, &got)
	if got.Status != helmrtype.AskResponded || got.RespondedBy == nil || got.RespondedBy.Kind != "api_key" {
		t.Fatalf("responded: %+v", got)
	}
	// A retry is safe; another answer is a conflict.
	p2.must("POST", path+"/respond", map[string]any{"answer": map[string]any{"selected": []string{"yes"}}, "response_id": "r1"}, &got)
	err := p2.call("POST", path+"/respond", map[string]any{"answer": map[string]any{"selected": []string{"no"}}, "response_id": "r2"}, nil)
	if !errors.Is(err, helmrtype.CodeConflict) {
		t.Fatalf("second answer: %v", err)
	}
	res := result(t, p2.wait(sid, r.Turn.ID))
	if string(res.Value) != `{"selected":[{"id":"yes","value":true}]}` || res.By != "api_key" || res.Init != 1 {
		t.Fatalf("answer in the turn: %+v", res)
	}
	for _, k := range []string{helmrtype.EventAskCreated, helmrtype.EventAskResponded} {
		if !hasEvent(p2, sid, k) {
			t.Errorf("no %s event", k)
		}
	}
}

// Interrupting a Turn that waits for an answer ends it cleanly and
// withdraws the question.
func TestAskInterrupted(t *testing.T) {
	p := startPlane(t, "")
	r := p.create("waiter", text("asktext"))
	sid := r.Session.ID
	a := askOf(t, p, sid, r.Turn.ID)
	p.waitEvent(sid, helmrtype.EventWaitSuspended)
	p.must("POST", "/v1/sessions/"+sid+"/turns/"+r.Turn.ID+"/interrupt", map[string]any{}, nil)
	if o := p.wait(sid, r.Turn.ID); o.Status != "interrupted" || o.Error.Code != helmrtype.CodeInterrupted {
		t.Fatalf("interrupted ask: %+v", o)
	}
	var got helmrtype.AskState
	p.must("GET", "/v1/sessions/"+sid+"/turns/"+r.Turn.ID+"/asks/"+a.ID, nil, &got)
	if got.Status != helmrtype.AskCancelled || got.CancelledAt == nil {
		t.Fatalf("question after interrupt: %+v", got)
	}
	err := p.call("POST", "/v1/sessions/"+sid+"/turns/"+r.Turn.ID+"/asks/"+a.ID+"/respond", map[string]any{"answer": "late", "response_id": "x"}, nil)
	if !errors.Is(err, helmrtype.CodeAskNotPending) {
		t.Fatalf("answer to a withdrawn question: %v", err)
	}
	if !hasEvent(p, sid, helmrtype.EventAskCancelled) {
		t.Error("no ask.cancelled event")
	}
}

// Waits work the same on PostgreSQL: a Token wait and a question survive a
// restart and resolve in the same process.
func TestWaitsOnPostgreSQL(t *testing.T) {
	db := pgtest.URL(t)
	dir := t.TempDir()
	p := startPlaneWith(t, dir, "127.0.0.1:0", db)
	tr := p.create("waiter", text("token - -"))
	ti := tokenOf(t, p, tr.Session.ID)
	ar := p.create("waiter", text("asktext"))
	a := askOf(t, p, ar.Session.ID, ar.Turn.ID)
	p.waitEvent(tr.Session.ID, helmrtype.EventWaitStarted)
	pid := sessionPID(t, p, tr.Session.ID)
	p.detach()

	p2 := startPlaneWith(t, dir, "127.0.0.1:0", db)
	p2.must("POST", "/v1/tokens/"+ti.Token+"/complete", map[string]any{"data": 7}, nil)
	p2.must("POST", "/v1/sessions/"+ar.Session.ID+"/turns/"+ar.Turn.ID+"/asks/"+a.ID+"/respond",
		map[string]any{"answer": "on postgres", "response_id": "pg-1"}, nil)
	if res := result(t, p2.wait(tr.Session.ID, tr.Turn.ID)); string(res.Value) != "7" || !sameProcess(t, p2, tr.Session.ID, pid, res.PID) {
		t.Fatalf("token on PostgreSQL: %+v (pid was %d)", res, pid)
	}
	if res := result(t, p2.wait(ar.Session.ID, ar.Turn.ID)); string(res.Value) != `"on postgres"` {
		t.Fatalf("question on PostgreSQL: %+v", res)
	}
}
