package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
)

// Parking (decision 0024): a waiting Session's process is checkpointed to
// disk and ended, and restored with its memory when its wait ends. These
// tests need a CRIU that passes `criu check` (.ci/setup makes one
// available) and skip, saying why, on a host that cannot checkpoint.

// parkingOrSkip skips t where p cannot park processes.
func parkingOrSkip(t *testing.T, p *plane) {
	t.Helper()
	if !parking(p) {
		t.Skipf("parking is off on this host: %s", p.cp.Supervisor.CheckpointOff())
	}
}

// countResult is the result of the waiter's countask.
type countResult struct {
	Value json.RawMessage `json:"value"`
	Init  int             `json:"init"`
	Count int64           `json:"count"`
	Stamp int64           `json:"stamp"`
	File  string          `json:"file"`
	PID   int             `json:"pid"`
}

// residencies lists the residencies the Session's computer.residency
// events recorded, in order.
func residencies(p *plane, sid string) []string {
	var out []string
	for _, e := range p.events(sid) {
		if e.Kind != helmrtype.EventComputerResidency {
			continue
		}
		var d helmrtype.ComputerResidencyEvent
		json.Unmarshal(e.Data, &d)
		out = append(out, d.Residency)
	}
	return out
}

// waitResidency waits until the Session's timeline records residency res
// n times.
func waitResidency(t *testing.T, p *plane, sid, res string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		got := 0
		for _, r := range residencies(p, sid) {
			if r == res {
				got++
			}
		}
		if got >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %d× %s residency in session %s: %v", n, res, sid, residencies(p, sid))
}

var stampRe = regexp.MustCompile(`stamp (\d+)`)

// stampOf is the stamp the Turn wrote before its question.
func stampOf(t *testing.T, p *plane, sid string) int64 {
	t.Helper()
	for _, e := range p.events(sid) {
		if m := stampRe.FindSubmatch(e.Data); e.Kind == "turn.output" && m != nil {
			n, _ := strconv.ParseInt(string(m[1]), 10, 64)
			return n
		}
	}
	t.Fatal("no stamp in the output")
	return 0
}

// answer answers the Turn's question with text.
func answer(t *testing.T, p *plane, sid, turnID, text string) {
	t.Helper()
	a := askOf(t, p, sid, turnID)
	p.must("POST", "/v1/sessions/"+sid+"/turns/"+turnID+"/asks/"+a.ID+"/respond",
		map[string]any{"answer": text, "response_id": "r-" + turnID}, nil)
}

// computerOf returns the Session's Computer ID.
func computerOf(t *testing.T, p *plane, sid string) string {
	t.Helper()
	s := p.session(sid)
	if s.ComputerID == nil {
		t.Fatal("the session has no computer")
	}
	return *s.ComputerID
}

// assertParked checks that the Session's process is parked: no process on
// the host, the Computer parked, and its images on disk, readable by the
// control plane alone.
func assertParked(t *testing.T, p *plane, sid string) {
	t.Helper()
	cid := computerOf(t, p, sid)
	if pid := pidOfComputer(p, cid); pid != 0 {
		t.Fatalf("a parked session still has process %d", pid)
	}
	var c helmrtype.ComputerState
	p.must("GET", "/v1/computers/"+cid, nil, &c)
	if c.Residency != helmrtype.ResidencyParked || c.CheckpointOff != "" {
		t.Fatalf("computer: residency %s, checkpoint_off %q; want parked", c.Residency, c.CheckpointOff)
	}
	images := filepath.Join(p.dataDir, "computers", cid, "checkpoints", sid)
	fi, err := os.Stat(images)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("images %s: %v %v; want a directory of mode 0700", images, fi, err)
	}
}

// The handler counts in memory and asks; the wait parks (no process of
// the Session on the host); the answer restores it: the result holds the
// counter and the stamp it kept in memory, init did not run again, and the
// residency went running → parking → parked → restoring → running. A
// second Turn counts on in the same memory.
func TestParkedWaitKeepsItsMemory(t *testing.T) {
	p := startPlane(t, "")
	parkingOrSkip(t, p)
	r := p.create("waiter", text("countask"))
	sid := r.Session.ID
	waitResidency(t, p, sid, helmrtype.ResidencyParked, 1)
	assertParked(t, p, sid)
	if !p.cp.Supervisor.Suspended(sid) {
		t.Fatal("a parked session is not suspended")
	}
	stamp := stampOf(t, p, sid)
	answer(t, p, sid, r.Turn.ID, "go on")
	res := completedResult[countResult](t, p.wait(sid, r.Turn.ID))
	if res.Count != 1 || res.Stamp != stamp || res.Init != 1 || res.File != "1" || string(res.Value) != `"go on"` {
		t.Fatalf("after the restore: %+v, want count 1, stamp %d, one init, the file", res, stamp)
	}
	want := []string{"parking", "parked", "restoring", "running"}
	if got := residencies(p, sid); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("residencies %v, want %v", got, want)
	}
	for _, k := range []string{helmrtype.EventWaitSuspended, helmrtype.EventWaitResumed} {
		if !hasEvent(p, sid, k) {
			t.Errorf("no %s event", k)
		}
	}
	// Its images went once it was back.
	if _, err := os.Stat(filepath.Join(p.dataDir, "computers", computerOf(t, p, sid), "checkpoints", sid)); !os.IsNotExist(err) {
		t.Fatalf("the images of a restored process are still there: %v", err)
	}
	// The same memory counts on, through a second park.
	r2 := p.enqueue(sid, text("countask"))
	waitResidency(t, p, sid, helmrtype.ResidencyParked, 2)
	answer(t, p, sid, r2, "again")
	if res := completedResult[countResult](t, p.wait(sid, r2)); res.Count != 2 || res.Init != 1 {
		t.Fatalf("second turn: %+v, want count 2 and one init", res)
	}
}

// helmr dev's Ctrl-C (a stop that ends session processes) parks the
// Sessions that wait, whether their wait was already parked or still hot;
// after the next start their answers restore them with their memory.
func TestStopParksWaitingSessions(t *testing.T) {
	dir := t.TempDir()
	p := startPlane(t, dir)
	parkingOrSkip(t, p)
	parked := p.create("waiter", text("countask"))
	hot := p.create("waiter", text("countask hot"))
	waitResidency(t, p, parked.Session.ID, helmrtype.ResidencyParked, 1)
	askOf(t, p, hot.Session.ID, hot.Turn.ID)
	stampParked, stampHot := stampOf(t, p, parked.Session.ID), stampOf(t, p, hot.Session.ID)
	computers := []string{computerOf(t, p, parked.Session.ID), computerOf(t, p, hot.Session.ID)}
	p.stop()
	for _, cid := range computers {
		if pid := pidOfComputer(p, cid); pid != 0 {
			t.Fatalf("computer %s still has process %d after the stop", cid, pid)
		}
	}
	p2 := startPlane(t, dir)
	for _, c := range []struct {
		r     helmrtype.SessionCreateReceipt
		stamp int64
	}{{parked, stampParked}, {hot, stampHot}} {
		answer(t, p2, c.r.Session.ID, c.r.Turn.ID, "after the restart")
		res := completedResult[countResult](t, p2.wait(c.r.Session.ID, c.r.Turn.ID))
		if res.Stamp != c.stamp || res.Init != 1 || string(res.Value) != `"after the restart"` {
			t.Fatalf("session %s after the restart: %+v, want stamp %d and one init", c.r.Session.ID, res, c.stamp)
		}
	}
}

// A Token completed while its Turn is parked restores it.
func TestTokenCompletedWhileParked(t *testing.T) {
	p := startPlane(t, "")
	parkingOrSkip(t, p)
	r := p.create("waiter", text("token - -"))
	sid := r.Session.ID
	ti := tokenOf(t, p, sid)
	waitResidency(t, p, sid, helmrtype.ResidencyParked, 1)
	assertParked(t, p, sid)
	p.must("POST", "/v1/tokens/"+ti.Token+"/complete", map[string]any{"data": "while parked"}, nil)
	if res := result(t, p.wait(sid, r.Turn.ID)); string(res.Value) != `"while parked"` || res.Init != 1 {
		t.Fatalf("after the restore: %+v", res)
	}
}

// A Computer with network and one with a disk limit park and restore too
// (the provider stops and starts their network, mounts their disk again).
func TestNetworkAndDiskComputersPark(t *testing.T) {
	p := startPlane(t, "")
	parkingOrSkip(t, p)
	for _, agent := range []string{"netwaiter", "diskwaiter"} {
		t.Run(agent, func(t *testing.T) {
			r := p.create(agent, text("countask"))
			sid := r.Session.ID
			waitResidency(t, p, sid, helmrtype.ResidencyParked, 1)
			assertParked(t, p, sid)
			stamp := stampOf(t, p, sid)
			answer(t, p, sid, r.Turn.ID, "go on")
			res := completedResult[countResult](t, p.wait(sid, r.Turn.ID))
			if res.Stamp != stamp || res.Init != 1 || res.File != strconv.FormatInt(res.Count, 10) {
				t.Fatalf("after the restore: %+v, want stamp %d, one init, the file", res, stamp)
			}
		})
	}
}

// A checkpoint that cannot be restored (its images corrupt) gives the
// Session a process_failed hold that says why; a resume starts a
// reconstructed process, with fresh memory.
func TestCorruptCheckpointHoldsTheSession(t *testing.T) {
	p := startPlane(t, "")
	parkingOrSkip(t, p)
	r := p.create("waiter", text("countask"))
	sid := r.Session.ID
	waitResidency(t, p, sid, helmrtype.ResidencyParked, 1)
	images := filepath.Join(p.dataDir, "computers", computerOf(t, p, sid), "checkpoints", sid)
	corrupted := 0
	entries, _ := os.ReadDir(images)
	for _, e := range entries {
		if m, _ := filepath.Match("pages-*.img", e.Name()); m {
			if err := os.WriteFile(filepath.Join(images, e.Name()), []byte("not a page"), 0o600); err != nil {
				t.Fatal(err)
			}
			corrupted++
		}
		if m, _ := filepath.Match("core-*.img", e.Name()); m {
			os.WriteFile(filepath.Join(images, e.Name()), []byte("not a core"), 0o600)
			corrupted++
		}
	}
	if corrupted == 0 {
		t.Fatalf("no images to corrupt in %s: %v", images, entries)
	}
	answer(t, p, sid, r.Turn.ID, "go on")
	o := p.wait(sid, r.Turn.ID)
	if o.Status != helmrtype.TurnFailed || o.Error == nil || !regexp.MustCompile(`restored from its checkpoint`).MatchString(o.Error.Message) {
		t.Fatalf("turn after a failed restore: %+v %+v", o, o.Error)
	}
	if !hasEvent(p, sid, helmrtype.EventProcessFailed) {
		t.Fatal("no session.process_failed event")
	}
	if _, err := os.Stat(images); !os.IsNotExist(err) {
		t.Fatalf("the corrupt images are still there: %v", err)
	}
	p.resumeHold(sid, helmrtype.HoldProcessFailed)
	r2 := p.enqueue(sid, text("countask hot"))
	answer(t, p, sid, r2, "fresh")
	if res := completedResult[countResult](t, p.wait(sid, r2)); res.Count != 1 || res.File != "1" {
		t.Fatalf("after the resume: %+v, want a new process counting from 1", res)
	}
}

// enqueue adds a Turn with input to the Session and returns its ID.
func (p *plane) enqueue(sid string, input json.RawMessage) string {
	p.t.Helper()
	var ts helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+sid+"/turns", map[string]any{"input": input}, &ts)
	return ts.ID
}

// Two nodes on one PostgreSQL database sharing their Computers: a Session
// parked by one node is restored by the other once the first is killed
// (SIGKILL) and the question is answered there; the Turn completes with
// the memory it had.
func TestParkedSessionMovesToAnotherNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two control planes")
	}
	db := pgtest.URL(t)
	c := startNodes(t, db, 2)
	c.deploy(0)
	var r helmrtype.SessionCreateReceipt
	c.must(0, "POST", "/v1/sessions", map[string]any{"agent": "waiter", "input": text("countask")}, &r)
	sid := r.Session.ID
	var parked bool
	waitFor(t, "the session parked", func() bool {
		var page helmrtype.SessionEventPage
		c.must(0, "GET", "/v1/sessions/"+sid+"/events?limit=1000", nil, &page)
		for _, e := range page.Records {
			var d helmrtype.ComputerResidencyEvent
			if e.Kind == helmrtype.EventComputerResidency && json.Unmarshal(e.Data, &d) == nil && d.Residency == helmrtype.ResidencyParked {
				parked = true
			}
			if e.Kind == helmrtype.EventWaitSuspended && !parked {
				var comp helmrtype.ComputerState
				var s helmrtype.Session
				c.must(0, "GET", "/v1/sessions/"+sid, nil, &s)
				if s.ComputerID != nil && c.call(0, "GET", "/v1/computers/"+*s.ComputerID, nil, &comp) == nil && comp.CheckpointOff != "" {
					t.Skipf("parking is off on this host: %s", comp.CheckpointOff)
				}
			}
		}
		return parked
	})
	holder := -1
	for i, d := range c.dirs {
		if sessionsLeasedBy(t, db, d)[sid] {
			holder = i
		}
	}
	if holder < 0 {
		t.Fatal("no node holds the parked session's lease")
	}
	other := 1 - holder
	var page helmrtype.SessionEventPage
	c.must(other, "GET", "/v1/sessions/"+sid+"/events?limit=1000", nil, &page)
	var stamp int64
	for _, e := range page.Records {
		if m := stampRe.FindSubmatch(e.Data); e.Kind == "turn.output" && m != nil {
			stamp, _ = strconv.ParseInt(string(m[1]), 10, 64)
		}
	}
	c.srv[holder].kill()
	c.dead[holder].Store(true)
	var asks helmrtype.AskPage
	c.must(other, "GET", "/v1/sessions/"+sid+"/turns/"+r.Turn.ID+"/asks", nil, &asks)
	if len(asks.Asks) != 1 {
		t.Fatalf("asks: %+v", asks)
	}
	c.must(other, "POST", "/v1/sessions/"+sid+"/turns/"+r.Turn.ID+"/asks/"+asks.Asks[0].ID+"/respond",
		map[string]any{"answer": "on the other node", "response_id": "other-1"}, nil)
	res := completedResult[countResult](t, c.waitTurn(other, sid, r.Turn.ID))
	if res.Stamp != stamp || res.Init != 1 || res.Count != 1 || string(res.Value) != `"on the other node"` {
		t.Fatalf("restored on the other node: %+v, want stamp %d, count 1 and one init", res, stamp)
	}
	if !sessionsLeasedBy(t, db, c.dirs[other])[sid] {
		t.Fatal("the other node does not hold the session")
	}
}

// A Command on the Computer of a parked Session restores its process,
// which parks again once idle; the Turn's wait goes on.
func TestCommandRestoresParkedSession(t *testing.T) {
	p := startPlane(t, "")
	parkingOrSkip(t, p)
	r := p.create("waiter", text("countask"))
	sid := r.Session.ID
	waitResidency(t, p, sid, helmrtype.ResidencyParked, 1)
	var cmd helmrtype.CommandState
	p.must("POST", "/v1/computers/"+computerOf(t, p, sid)+"/commands", map[string]any{"command": []string{"cat", "/workspace/asked"}}, &cmd)
	waitResidency(t, p, sid, helmrtype.ResidencyRestoring, 1)
	waitResidency(t, p, sid, helmrtype.ResidencyParked, 2)
	answer(t, p, sid, r.Turn.ID, "after the command")
	if res := completedResult[countResult](t, p.wait(sid, r.Turn.ID)); res.Count != 1 || res.Init != 1 {
		t.Fatalf("after the command: %+v", res)
	}
}

// The runtime MCP endpoint keeps working across a park: agent code that
// connected to it before its process was parked makes its calls through
// the same client after the restore.
func TestRuntimeMCPAcrossAPark(t *testing.T) {
	p := startPlane(t, "")
	parkingOrSkip(t, p)
	sid, _, out := p.drive("driver", "", driveIn{Park: true, Calls: []call{
		{Tool: "spawn", Args: map[string]any{"agent": "worker", "input": map[string]any{}, "idempotency_key": "after-park"}},
	}})
	if got := residencies(p, sid); !slices.Contains(got, helmrtype.ResidencyParked) {
		t.Fatalf("the driver was not parked: %v", got)
	}
	if len(out.Calls) != 1 || out.Calls[0].Error != "" || out.Calls[0].Result["session_id"] == nil {
		t.Fatalf("the call after the restore: %+v", out.Calls)
	}
}
