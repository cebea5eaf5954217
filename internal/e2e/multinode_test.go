package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/controlplane"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/store/pgstore"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
	"github.com/jackc/pgx/v5"
)

// nodes is several helmr server processes on one PostgreSQL database, and
// a client that spreads calls over them and fails over from dead ones.
type nodes struct {
	t    *testing.T
	srv  []*server
	dirs []string // data directories
	key  string
	dead []atomic.Bool
}

// startNodes starts n helmr server processes on db with a short lease TTL.
func startNodes(t *testing.T, db string, n int) *nodes {
	t.Helper()
	dir := t.TempDir()
	c := &nodes{t: t, dead: make([]atomic.Bool, n)}
	// One machine: the nodes share the Computers' files.
	computers := filepath.Join(dir, "computers")
	for i := range n {
		d := filepath.Join(dir, fmt.Sprintf("node%d", i))
		c.dirs = append(c.dirs, d)
		s := startServer(t, d, "server", "--database", db,
			"--lease-ttl", "2s", "--reconnect-window", "2s", "--computers-dir", computers)
		c.srv = append(c.srv, s)
	}
	c.key = c.srv[0].key
	return c
}

// deploy uploads the test agents through node i, as helmr deploy does.
func (c *nodes) deploy(i int) {
	c.t.Helper()
	b := agentBinary(c.t)
	f, err := os.Open(b.Binary)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	if _, err := helmrclient.New(c.srv[i].url, c.key).Deployments.Create(c.t.Context(), b.Manifest, f); err != nil {
		c.t.Fatal(err)
	}
}

// errNodeDown is a call that could not reach its node.
var errNodeDown = errors.New("node down")

// callOn makes one call to node i; a transport error is errNodeDown.
func (c *nodes) callOn(i int, method, path string, body, out any) error {
	err := apiCall(c.srv[i].url, c.key, method, path, body, out)
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return fmt.Errorf("%w: %v", errNodeDown, err)
	}
	if err != nil {
		return fmt.Errorf("node %d: %w", i, err)
	}
	return nil
}

// call makes a call on node prefer, or the next live one when it is down;
// bodies carry idempotency keys, so a retry elsewhere is safe.
func (c *nodes) call(prefer int, method, path string, body, out any) error {
	var err error
	for k := range len(c.srv) {
		i := (prefer + k) % len(c.srv)
		if c.dead[i].Load() {
			continue
		}
		if err = c.callOn(i, method, path, body, out); !errors.Is(err, errNodeDown) {
			return err
		}
	}
	return err
}

func (c *nodes) must(prefer int, method, path string, body, out any) {
	c.t.Helper()
	if err := c.call(prefer, method, path, body, out); err != nil {
		c.t.Fatal(err)
	}
}

// follow reads the Session's timeline over SSE from node prefer, moving to
// another live node with Last-Event-ID when its node dies, until ctx ends.
// It records every event it got, in the order it got them.
func (c *nodes) follow(ctx context.Context, prefer int, sessionID string, got *[]helmrtype.SessionEvent, mu *sync.Mutex, nodesUsed map[int]bool) {
	var last int64
	for k := 0; ctx.Err() == nil; k++ {
		i := (prefer + k) % len(c.srv)
		if c.dead[i].Load() {
			continue
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", c.srv[i].url+"/v1/sessions/"+sessionID+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+c.key)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		mu.Lock()
		nodesUsed[i] = true
		mu.Unlock()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev helmrtype.SessionEvent
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				c.t.Errorf("stream of %s: %v", sessionID, err)
				continue
			}
			mu.Lock()
			*got = append(*got, ev)
			mu.Unlock()
			last = ev.Sequence
		}
		resp.Body.Close()
		k-- // stay on a node that ended the stream cleanly (it is alive)
		if c.dead[i].Load() {
			k++
		}
	}
}

// TestMultiNode runs three helmr server processes on one PostgreSQL
// database under a load spread over all three, kills one with SIGKILL in
// the middle, and checks that every admitted Turn reaches a terminal state
// (after resuming Sessions the takeover held), that none ran twice, and
// that event streams read from the surviving nodes are complete and in
// order.
func TestMultiNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three control planes")
	}
	db := pgtest.URL(t)
	c := startNodes(t, db, 3)
	c.deploy(1) // through node 1 only: the others launch it from the database

	const echoSessions, chatSessions, enqueues = 24, 6, 4
	type sess struct {
		id    string
		agent string
		turns []string // admitted Turn IDs, in order
		node  int      // where it was created
	}
	var all []*sess
	var mu sync.Mutex
	streams := map[string]*[]helmrtype.SessionEvent{}
	streamNodes := map[int]bool{}
	sctx, stopStreams := context.WithCancel(context.Background())
	var swg sync.WaitGroup
	defer func() { stopStreams(); swg.Wait() }()
	create := func(i int, agent string, input string) *sess {
		var rec helmrtype.SessionCreateReceipt
		if err := c.call(i%3, "POST", "/v1/sessions", map[string]any{"agent": agent, "input": text(input),
			"idempotency_key": fmt.Sprintf("create-%s-%d", agent, i)}, &rec); err != nil {
			t.Error(err)
			return nil
		}
		s := &sess{id: rec.Session.ID, agent: agent, node: i % 3, turns: []string{rec.Turn.ID}}
		got := &[]helmrtype.SessionEvent{}
		mu.Lock()
		all = append(all, s)
		streams[s.id] = got
		mu.Unlock()
		swg.Add(1)
		go func() {
			defer swg.Done()
			c.follow(sctx, (i+1)%3, s.id, got, &mu, streamNodes)
		}()
		return s
	}

	// The load: Sessions created on every node, Turns enqueued through
	// the others, chat Turns given messages through all three; node 0 is
	// killed in the middle of it.
	var killed atomic.Bool
	var admitted atomic.Int64
	var chatDone int
	refused := map[string]bool{} // chat Sessions whose Turn refused a message
	var leasesAtKill map[string]int
	kill := func() {
		if killed.CompareAndSwap(false, true) {
			leasesAtKill = leasesByNode(t, db)
			c.dead[0].Store(true)
			c.srv[0].kill()
			t.Logf("killed node 0 (SIGKILL) after %d admitted turns", admitted.Load())
		}
	}
	// Phase 1: Sessions created through every node; their first Turns
	// run long enough to be running when node 0 dies.
	var lwg sync.WaitGroup
	echo := make([]*sess, echoSessions)
	chat := make([]*sess, chatSessions)
	for i := range echoSessions {
		lwg.Add(1)
		go func() {
			defer lwg.Done()
			echo[i] = create(i, "echo", "sleep 3s")
		}()
	}
	for i := range chatSessions {
		lwg.Add(1)
		go func() {
			defer lwg.Done()
			chat[i] = create(i, "chat", "hi")
		}()
	}
	lwg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	admitted.Add(echoSessions + chatSessions)
	// A Command runs on node 0 until it dies; a survivor then marks it
	// failed.
	var cm helmrtype.ComputerState
	c.must(0, "POST", "/v1/computers", helmrtype.ComputerCreateRequest{Template: "box"}, &cm)
	var longCmd helmrtype.CommandState
	c.must(0, "POST", "/v1/computers/"+cm.ID+"/commands", helmrtype.CommandRequest{Command: []string{"/bin/sleep", "120"}}, &longCmd)
	// A Session on node 0 writes a file in its /workspace; its process
	// stays there, idle, until node 0 dies.
	var fr helmrtype.SessionCreateReceipt
	c.must(0, "POST", "/v1/sessions", map[string]any{"agent": "files", "input": text("write note kept")}, &fr)
	if got := c.waitTurn(0, fr.Session.ID, fr.Turn.ID); got.Status != helmrtype.TurnCompleted {
		t.Fatalf("files write: %+v", got)
	}
	// Wait until the first Turns run (their streams show turn.running).
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		n := 0
		mu.Lock()
		for _, got := range streams {
			for _, ev := range *got {
				if ev.Kind == helmrtype.EventTurnRunning {
					n++
					break
				}
			}
		}
		mu.Unlock()
		if n == len(all) {
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("only %d of %d first turns run after a minute", n, len(all))
		}
	}
	// Phase 2: Turns enqueued and messages sent through the other nodes;
	// node 0 is killed a third of the way through.
	for i, s := range echo {
		lwg.Add(1)
		go func() {
			defer lwg.Done()
			for k := range enqueues {
				var ts helmrtype.TurnState
				if err := c.call((i+k+1)%3, "POST", "/v1/sessions/"+s.id+"/turns", map[string]any{
					"input": text(fmt.Sprintf("sleep %dms", 50+50*k)), "idempotency_key": fmt.Sprintf("enq-%d-%d", i, k)}, &ts); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				s.turns = append(s.turns, ts.ID)
				mu.Unlock()
				if admitted.Add(1) == echoSessions+chatSessions+echoSessions*enqueues/3 {
					kill()
				}
				time.Sleep(time.Duration(30*(i%5)) * time.Millisecond)
			}
		}()
	}
	for i, s := range chat {
		lwg.Add(1)
		go func() {
			defer lwg.Done()
			for k, m := range []string{"m1", "m2", "done"} {
				var rec helmrtype.MessageReceipt
				err := c.call((i+k+1)%3, "POST", "/v1/sessions/"+s.id+"/turns/"+s.turns[0]+"/messages",
					map[string]any{"content": text(m), "idempotency_key": fmt.Sprintf("msg-%d-%d", i, k)}, &rec)
				switch {
				case isCode(err, helmrtype.CodeTurnSettled):
					// Its Turn was lost with node 0 (checked below).
					mu.Lock()
					refused[s.id] = true
					mu.Unlock()
				case err != nil:
					t.Errorf("message %s to chat %d: %v", m, i, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	lwg.Wait()
	kill()

	// Every admitted Turn settles; Sessions the takeover held (their
	// running Turn was lost with node 0) are resumed through a survivor.
	deadline := time.Now().Add(2 * time.Minute)
	resumed := map[string]bool{}
	var lost, completed, failedTurns int
	for _, s := range all {
		for {
			var page helmrtype.TurnPage
			c.must(1, "GET", "/v1/sessions/"+s.id+"/turns?limit=100", nil, &page)
			var sv helmrtype.Session
			c.must(2, "GET", "/v1/sessions/"+s.id, nil, &sv)
			open := 0
			for _, tr := range page.Turns {
				if !helmrtype.TurnTerminal(tr.Status) {
					open++
				}
			}
			if open == 0 && len(page.Turns) == len(s.turns) {
				for _, tr := range page.Turns {
					switch {
					case tr.Status == helmrtype.TurnCompleted:
						completed++
						if s.agent == "chat" {
							// Messages sent through the three nodes reached it.
							var got []string
							json.Unmarshal(tr.Result, &got)
							if fmt.Sprint(got) != "[m1 m2]" {
								t.Errorf("chat session %s got messages %v, want [m1 m2]", s.id, got)
							}
							chatDone++
						}
					case tr.Error != nil && tr.Error.Code == helmrtype.CodeExecutionLost:
						lost++
						refused[s.id] = false
					default:
						failedTurns++
						t.Errorf("%s session %s turn %d: %s %+v", s.agent, s.id, tr.Sequence, tr.Status, tr.Error)
					}
				}
				break
			}
			for _, h := range sv.Holds {
				if h.Kind == helmrtype.HoldRecoveryGap && !resumed[s.id] {
					resumed[s.id] = true
					c.must(2, "POST", "/v1/sessions/"+s.id+"/resume", map[string]any{"hold_id": h.ID, "idempotency_key": "resume-" + s.id}, nil)
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("session %s (%s) did not settle: %d open turns, holds %+v", s.id, s.agent, open, sv.Holds)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// The files Session had no work when node 0 died: a Turn enqueued
	// through another node starts once node 0's lease expires, on a
	// survivor, on the same Computer.
	var rd helmrtype.TurnState
	c.must(1, "POST", "/v1/sessions/"+fr.Session.ID+"/turns", map[string]any{"input": text("read note")}, &rd)
	if got := c.waitTurn(1, fr.Session.ID, rd.ID); got.Status != helmrtype.TurnCompleted || string(got.Result) != `"kept"` {
		t.Errorf("the file written on node 0, read after the takeover: %+v", got)
	}

	// node 0's Command: failed once its heartbeat expired.
	var cw helmrtype.CommandWaitResult
	c.must(2, "GET", "/v1/commands/"+longCmd.ID+"/wait?timeout=30s", nil, &cw)
	if cw.Command == nil || cw.Command.Status != helmrtype.CommandFailed || cw.Command.Error == nil || cw.Command.Error.Code != helmrtype.CodeExecutionLost {
		t.Errorf("the Command of the killed node: %+v", cw)
	}

	for id, still := range refused {
		if still {
			t.Errorf("chat session %s refused a message as settled, but its Turn was not lost with node 0", id)
		}
	}

	// The timelines: from a survivor, complete; no Turn ran twice; the
	// streams read the same records in the same order.
	ranTwice := 0
	streamed := 0
	for _, s := range all {
		var page helmrtype.SessionEventPage
		c.must(1, "GET", "/v1/sessions/"+s.id+"/events?limit=1000", nil, &page)
		running := map[string]int{}
		echoes := map[string]int{}
		for i, ev := range page.Records {
			if ev.Sequence != int64(i+1) {
				t.Fatalf("session %s: record %d has sequence %d", s.id, i, ev.Sequence)
			}
			if ev.TurnID == nil {
				continue
			}
			switch ev.Kind {
			case helmrtype.EventTurnRunning:
				running[*ev.TurnID]++
			case helmrtype.EventTurnOutput:
				if bytes.Contains(ev.Data, []byte("echo: ")) {
					echoes[*ev.TurnID]++
				}
			}
		}
		for id, n := range running {
			if n > 1 || echoes[id] > 1 {
				ranTwice++
				t.Errorf("session %s: turn %s started %d times and echoed %d times", s.id, id, n, echoes[id])
			}
		}
		want := page.Records
		got := streams[s.id]
		waitUntil := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			n := len(*got)
			mu.Unlock()
			if n >= len(want) || time.Now().After(waitUntil) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		mu.Lock()
		g := append([]helmrtype.SessionEvent(nil), (*got)...)
		mu.Unlock()
		if len(g) != len(want) {
			t.Errorf("session %s: the stream read %d records, the timeline has %d", s.id, len(g), len(want))
			continue
		}
		for i := range want {
			if g[i].Sequence != want[i].Sequence || g[i].Kind != want[i].Kind {
				t.Errorf("session %s: streamed record %d is %d %s, want %d %s", s.id, i, g[i].Sequence, g[i].Kind, want[i].Sequence, want[i].Kind)
				break
			}
		}
		streamed += len(g)
	}
	turns := 0
	for _, s := range all {
		turns += len(s.turns)
	}
	node0, _ := os.ReadFile(filepath.Join(c.dirs[0], "node-id"))
	if n := leasesAtKill[strings.TrimSpace(string(node0))]; n == 0 || lost == 0 || lost > n {
		t.Errorf("node 0 supervised %d sessions when it was killed, and %d turns were lost with it; want some of both, at most one per session", n, lost)
	}
	if t.Failed() {
		for i, sv := range c.srv {
			t.Logf("node %d:\n%s", i, sv.output())
		}
	}
	t.Logf("sessions supervised per node when node 0 was killed: %v", leasesAtKill)
	t.Logf("checked %d sessions on 3 nodes (node 0 killed mid-load): %d admitted turns all terminal "+
		"(%d completed, %d lost with node 0 as execution_lost, %d other), %d chat turns got their messages through all nodes, %d sessions resumed after takeover, "+
		"%d turns ran twice, %d streamed records complete and in order (streams read from nodes %v)",
		len(all), turns, completed, lost, failedTurns, chatDone, len(resumed), ranTwice, streamed, streamNodes)
}

// leasesByNode counts the unexpired Session leases of each node.
func leasesByNode(t *testing.T, db string) map[string]int {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT node_id, count(*) FROM session_leases WHERE expires_at > now() GROUP BY node_id")
	if err != nil {
		t.Error(err)
		return nil
	}
	out := map[string]int{}
	for rows.Next() {
		var n string
		var k int
		rows.Scan(&n, &k)
		out[n] = k
	}
	rows.Close()
	return out
}

// sessionsLeasedBy returns the Sessions whose lease the node whose data
// directory is dir holds.
func sessionsLeasedBy(t *testing.T, db, dir string) map[string]bool {
	t.Helper()
	node, err := os.ReadFile(filepath.Join(dir, "node-id"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT session_id FROM session_leases WHERE node_id = $1 AND expires_at > now()", strings.TrimSpace(string(node)))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out[id] = true
	}
	return out
}

// TestRequestsThroughAnotherNode: two nodes on one database; every kind of
// request sent to the node that does not run the Session's process takes
// effect there at once: a Turn enqueued, a message, an interrupt without a
// hold, a Token completed, a question answered, a Turn waited for.
func TestRequestsThroughAnotherNode(t *testing.T) {
	var mu sync.Mutex
	db := pgtest.URL(t)
	a := startPlaneWith(t, "", "127.0.0.1:0", db)
	b := startPlaneWith(t, "", "127.0.0.1:0", db)
	if a.cp.NodeID() == "" || a.cp.NodeID() == b.cp.NodeID() {
		t.Fatalf("node IDs %q and %q", a.cp.NodeID(), b.cp.NodeID())
	}

	// A Turn enqueued through b runs on a's process, waited for on b.
	r := a.create("slow", text("quick"))
	first := completedResult[map[string]int](t, a.wait(r.Session.ID, r.Turn.ID))
	var ts helmrtype.TurnState
	b.must("POST", "/v1/sessions/"+r.Session.ID+"/turns", map[string]any{"input": text("quick")}, &ts)
	if got := completedResult[map[string]int](t, b.wait(r.Session.ID, ts.ID)); got["pid"] != first["pid"] {
		t.Errorf("the Turn enqueued through the other node ran in process %d, not the session's %d", got["pid"], first["pid"])
	}

	// Concurrent admissions to one Session through both nodes, each sent
	// twice (once to each node) with one idempotency key: each is admitted
	// once, sequences are gapless, and every Turn runs.
	const n = 20
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		for _, p := range []*plane{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var ts helmrtype.TurnState
				if err := p.call("POST", "/v1/sessions/"+r.Session.ID+"/turns", map[string]any{"input": text("quick"),
					"idempotency_key": fmt.Sprintf("concurrent-%d", i)}, &ts); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if ids[i] != "" && ids[i] != ts.ID {
					t.Errorf("idempotency key %d admitted two Turns: %s and %s", i, ids[i], ts.ID)
				}
				ids[i] = ts.ID
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	for _, id := range ids {
		if id != "" {
			if o := b.wait(r.Session.ID, id); o.Status != helmrtype.TurnCompleted {
				t.Errorf("turn %s: %+v", id, o)
			}
		}
	}
	var page helmrtype.TurnPage
	a.must("GET", "/v1/sessions/"+r.Session.ID+"/turns?limit=100", nil, &page)
	if len(page.Turns) != n+2 {
		t.Errorf("%d turns in the session, want %d", len(page.Turns), n+2)
	}
	for i, tr := range page.Turns {
		if tr.Sequence != int64(i+1) {
			t.Errorf("turn %d has sequence %d", i, tr.Sequence)
		}
	}

	// An interrupt (no hold) through b cancels the Turn running on a.
	s := a.create("slow", text("wait"))
	waitOutput(t, a, s.Session.ID, "waiting")
	b.must("POST", "/v1/sessions/"+s.Session.ID+"/turns/"+s.Turn.ID+"/interrupt", map[string]any{}, nil)
	if o := b.wait(s.Session.ID, s.Turn.ID); o.Status != helmrtype.TurnInterrupted || !a.hasOutput(s.Session.ID, "cleanup ran") {
		t.Errorf("interrupt through the other node: %+v", o)
	}

	// Messages through b reach the Turn running on a.
	c := a.create("chat", text("hi"))
	waitOutput(t, a, c.Session.ID, "listening")
	b.send(c.Session.ID, c.Turn.ID, "m1")
	b.send(c.Session.ID, c.Turn.ID, "done")
	if got := completedResult[[]string](t, b.wait(c.Session.ID, c.Turn.ID)); fmt.Sprint(got) != "[m1]" {
		t.Errorf("messages through the other node: %v", got)
	}

	// A Token completed and a question answered through b resolve the
	// waits of processes on a.
	tr := a.create("waiter", text("token - -"))
	ti := tokenOf(t, a, tr.Session.ID)
	ar := a.create("waiter", text("asktext"))
	q := askOf(t, a, ar.Session.ID, ar.Turn.ID)
	pid := sessionPID(t, a, tr.Session.ID)
	b.must("POST", "/v1/tokens/"+ti.Token+"/complete", map[string]any{"data": 7}, nil)
	b.must("POST", "/v1/sessions/"+ar.Session.ID+"/turns/"+ar.Turn.ID+"/asks/"+q.ID+"/respond",
		map[string]any{"answer": "through b", "response_id": "b-1"}, nil)
	if res := result(t, b.wait(tr.Session.ID, tr.Turn.ID)); string(res.Value) != "7" || !sameProcess(t, a, tr.Session.ID, pid, res.PID) {
		t.Errorf("token through the other node: %+v (the process was %d)", res, pid)
	}
	if res := result(t, b.wait(ar.Session.ID, ar.Turn.ID)); string(res.Value) != `"through b"` {
		t.Errorf("question through the other node: %+v", res)
	}

	// A Command runs on a; a third node starting leaves it running (it
	// fails only its own unfinished Commands), and a cancel through b
	// reaches it.
	var cm helmrtype.ComputerState
	a.must("POST", "/v1/computers", helmrtype.ComputerCreateRequest{Template: "box"}, &cm)
	var cmd helmrtype.CommandState
	a.must("POST", "/v1/computers/"+cm.ID+"/commands", helmrtype.CommandRequest{Command: []string{"/bin/sleep", "30"}}, &cmd)
	third := startPlaneWith(t, "", "127.0.0.1:0", db)
	var got helmrtype.CommandState
	third.must("GET", "/v1/commands/"+cmd.ID, nil, &got)
	if got.Status != helmrtype.CommandRunning {
		t.Fatalf("a Command of another node after a node started: %+v", got)
	}
	b.must("POST", "/v1/commands/"+cmd.ID+"/cancel", nil, nil)
	var w helmrtype.CommandWaitResult
	third.must("GET", "/v1/commands/"+cmd.ID+"/wait?timeout=30s", nil, &w)
	if w.Command == nil || w.Command.Status != helmrtype.CommandCancelled {
		t.Errorf("a cancel through the other node: %+v", w)
	}
}

// waitTurn waits for a Turn through node prefer (or a live one).
func (c *nodes) waitTurn(prefer int, sessionID, turnID string) helmrtype.TurnOutcome {
	c.t.Helper()
	for range 10 {
		var r helmrtype.TimedTurnWaitResult
		c.must(prefer, "GET", "/v1/sessions/"+sessionID+"/turns/"+turnID+"/wait?timeout=30s", nil, &r)
		if r.Status == helmrtype.WaitSettled && r.Outcome != nil {
			return *r.Outcome
		}
	}
	c.t.Fatalf("turn %s did not settle", turnID)
	return helmrtype.TurnOutcome{}
}

// TestNodeCutOffPastItsLease: a node that stops answering (SIGSTOP) for
// longer than its lease TTL loses its Sessions to another node, which
// settles their running Turns as lost and holds them; when the node comes
// back it ends its processes there without touching the Sessions, and
// starts nothing more for them. After a resume every Turn runs once.
func TestNodeCutOffPastItsLease(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two control planes")
	}
	db := pgtest.URL(t)
	c := startNodes(t, db, 2)
	c.deploy(0)
	const sessions = 6
	ids := make([]string, sessions)
	turns := map[string][]string{}
	for i := range sessions {
		var rec helmrtype.SessionCreateReceipt
		c.must(0, "POST", "/v1/sessions", map[string]any{"agent": "echo", "input": text("sleep 30s")}, &rec)
		ids[i] = rec.Session.ID
		turns[rec.Session.ID] = []string{rec.Turn.ID}
		for k := range 2 {
			var ts helmrtype.TurnState
			c.must(0, "POST", "/v1/sessions/"+rec.Session.ID+"/turns", map[string]any{"input": text(fmt.Sprintf("after %d", k))}, &ts)
			turns[rec.Session.ID] = append(turns[rec.Session.ID], ts.ID)
		}
	}
	for _, id := range ids {
		waitFor(t, "the first Turn of "+id+" running", func() bool { return hasKind(c, 1, id, helmrtype.EventTurnRunning) })
	}
	// The Sessions are created through node 0, but under load node 1 may
	// have taken the lease of one first: that Session's process runs on
	// node 1, which is not stopped, and its first Turn completes.
	onNode0 := sessionsLeasedBy(t, db, c.dirs[0])
	if len(onNode0) == 0 {
		t.Fatal("node 0 supervises none of the Sessions it created")
	}
	// Node 0 stops until node 1 has taken its Sessions over (past its lease).
	c.srv[0].cmd.Process.Signal(syscall.SIGSTOP)
	c.dead[0].Store(true)
	waitFor(t, "node 1 taking over every Session while node 0 is stopped", func() bool {
		for _, id := range ids {
			var ts helmrtype.TurnState
			c.must(1, "GET", "/v1/sessions/"+id+"/turns/"+turns[id][0], nil, &ts)
			if !helmrtype.TurnTerminal(ts.Status) {
				return false
			}
		}
		return true
	})
	c.srv[0].cmd.Process.Signal(syscall.SIGCONT)
	c.dead[0].Store(false)
	waitFor(t, "node 0 noticing it lost its sessions", func() bool {
		return strings.Contains(c.srv[0].output(), "another node took the session over")
	})
	deadline := time.Now().Add(30 * time.Second)
	lost, completed := 0, 0
	for _, id := range ids {
		resumed := false
		for {
			var page helmrtype.TurnPage
			c.must(1, "GET", "/v1/sessions/"+id+"/turns", nil, &page)
			open := 0
			for _, tr := range page.Turns {
				if !helmrtype.TurnTerminal(tr.Status) {
					open++
				}
			}
			if open == 0 {
				for _, tr := range page.Turns {
					switch {
					case tr.Status == helmrtype.TurnCompleted:
						completed++
					case tr.Error != nil && tr.Error.Code == helmrtype.CodeExecutionLost && tr.Sequence == 1 && onNode0[id]:
						lost++
					default:
						t.Errorf("session %s turn %d: %s %+v", id, tr.Sequence, tr.Status, tr.Error)
					}
				}
				break
			}
			var sv helmrtype.Session
			c.must(1, "GET", "/v1/sessions/"+id, nil, &sv)
			for _, h := range sv.Holds {
				if h.Kind == helmrtype.HoldRecoveryGap && !resumed {
					resumed = true
					c.must(1, "POST", "/v1/sessions/"+id+"/resume", map[string]any{"hold_id": h.ID}, nil)
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("session %s did not settle: holds %+v\nnode 0:\n%s\nnode 1:\n%s", id, sv.Holds, c.srv[0].output(), c.srv[1].output())
			}
			time.Sleep(50 * time.Millisecond)
		}
		var page helmrtype.SessionEventPage
		c.must(0, "GET", "/v1/sessions/"+id+"/events?limit=1000", nil, &page)
		running := map[string]int{}
		for _, ev := range page.Records {
			if ev.Kind == helmrtype.EventTurnRunning && ev.TurnID != nil {
				running[*ev.TurnID]++
			}
		}
		for tid, n := range running {
			if n > 1 {
				t.Errorf("session %s: turn %s started %d times", id, tid, n)
			}
		}
	}
	// Node 0's running Turns are lost; every other Turn completes once,
	// on node 1's Sessions their first Turn too.
	if want := len(onNode0); lost != want || completed != 3*sessions-want {
		t.Errorf("%d turns lost and %d completed; want %d and %d", lost, completed, want, 3*sessions-want)
	}
	t.Logf("node 0 stopped past its lease: %d running turns lost to the takeover, %d later turns completed once each after resume", lost, completed)
}

// hasKind reports whether the Session's timeline (read through node i)
// has an event of kind.
func hasKind(c *nodes, i int, sessionID, kind string) bool {
	var page helmrtype.SessionEventPage
	c.must(i, "GET", "/v1/sessions/"+sessionID+"/events?limit=1000", nil, &page)
	for _, ev := range page.Records {
		if ev.Kind == kind {
			return true
		}
	}
	return false
}

// TestTwinNodeIDIsReported: two control planes started with one node ID
// (a copied data directory) are told loudly.
func TestTwinNodeIDIsReported(t *testing.T) {
	db := pgtest.URL(t)
	var mu sync.Mutex
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(b)
	}), nil))
	for range 2 {
		cp, err := controlplane.Open(t.Context(), controlplane.Config{DataDir: t.TempDir(), Database: db, NodeID: "twin",
			LeaseTTL: 300 * time.Millisecond, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cp.Close(context.Background()) })
	}
	waitFor(t, "two control planes with one node ID reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(logs.String(), "another running control plane uses this node's ID")
	})
}

// writerFunc is an io.Writer made of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// waitFor waits up to a minute for cond, polling.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitForWithin(t, what, time.Minute, cond)
}

// waitForWithin waits up to d for cond, polling.
func waitForWithin(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
	}
}

// TestMissedNoticesAreMadeUp: an interrupt of a Turn and a Command's cancel
// that the supervising node never heard of (recorded by another writer
// whose notice it missed) take effect when its listening connection comes
// back and it catches up.
func TestMissedNoticesAreMadeUp(t *testing.T) {
	db := pgtest.URL(t)
	p := startPlaneWith(t, "", "127.0.0.1:0", db)
	r := p.create("chat", text("hi"))
	waitOutput(t, p, r.Session.ID, "listening")
	var c helmrtype.ComputerState
	p.must("POST", "/v1/computers", helmrtype.ComputerCreateRequest{Template: "box"}, &c)
	var cmd helmrtype.CommandState
	p.must("POST", "/v1/computers/"+c.ID+"/commands", helmrtype.CommandRequest{Command: []string{"/bin/sleep", "30"}}, &cmd)

	// Another writer records both and sends no notice: an engine that is
	// no node, on the same database.
	ctx := context.Background()
	st, err := pgstore.Open(ctx, db, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(st, engine.Options{})
	if _, err := e.InterruptTurn(ctx, r.Session.ID, r.Turn.ID, helmrtype.ControlRequest{}); err != nil {
		t.Fatalf("interrupt: %v", err)
	}
	if _, err := e.CancelCommand(ctx, cmd.ID); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	st.Close()
	time.Sleep(300 * time.Millisecond)
	var ts helmrtype.TurnState
	p.must("GET", "/v1/sessions/"+r.Session.ID+"/turns/"+r.Turn.ID, nil, &ts)
	var cs helmrtype.CommandState
	p.must("GET", "/v1/commands/"+cmd.ID, nil, &cs)
	if ts.Status != helmrtype.TurnRunning || cs.Status != helmrtype.CommandRunning {
		t.Fatalf("before the node catches up: turn %s, command %s; want both running", ts.Status, cs.Status)
	}

	// The node's listening connection drops; it reconnects and catches up.
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
 WHERE datname = current_database() AND query LIKE 'LISTEN%'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("end the listening connection: %d, %v", n, err)
	}
	if o := p.wait(r.Session.ID, r.Turn.ID); o.Status != helmrtype.TurnInterrupted || o.Error == nil || o.Error.Code != helmrtype.CodeInterrupted {
		t.Errorf("turn after the node caught up: %+v %+v", o, o.Error)
	}
	var w helmrtype.CommandWaitResult
	p.must("GET", "/v1/commands/"+cmd.ID+"/wait?timeout=30s", nil, &w)
	if w.Command == nil || w.Command.Status != helmrtype.CommandCancelled {
		t.Errorf("command after the node caught up: %+v", w.Command)
	}
}
