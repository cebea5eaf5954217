package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/store/sqlitestore"
)

// newEngine returns an engine over a real SQLite file with one Deployment
// of a text Agent "echo" and a JSON Agent "typed".
func newEngine(t *testing.T) *engine.Engine {
	t.Helper()
	return newEngineWith(t, engine.Options{})
}

// newEngineWith is newEngine with opts (a clock, say).
func newEngineWith(t *testing.T, opts engine.Options) *engine.Engine {
	t.Helper()
	return newEngineOn(t, "", opts)
}

// newEngineOn is newEngineWith on a store of the given synchronous mode
// ("" is the store's default, FULL).
func newEngineOn(t testing.TB, synchronous string, opts engine.Options) *engine.Engine {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "helmr.db"), sqlitestore.Options{Synchronous: synchronous})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := engine.New(st, opts)
	m := helmrtype.Manifest{Version: helmrtype.ManifestVersion, SDK: "go",
		Templates: []helmrtype.TemplateManifest{{ID: "box", Image: helmrtype.ImageManifest{Name: "box", Host: true}}},
		Agents: []helmrtype.AgentManifest{
			{ID: "echo", Template: "box", InputKind: "text", CloseAfterIdle: "7d", HibernateAfterIdle: "never"},
			{ID: "typed", Template: "box", InputKind: "json", CloseAfterIdle: "never", HibernateAfterIdle: "never"},
			{ID: "timed", Template: "box", InputKind: "text", CloseAfterIdle: "7d", HibernateAfterIdle: "never", MaxTurnDuration: "1m"},
		}}
	if _, err := e.PublishDeployment(ctx, "sha256:test", m, "", ""); err != nil {
		t.Fatal(err)
	}
	return e
}

func text(s string) json.RawMessage {
	b, _ := json.Marshal(helmrtype.Text(s))
	return b
}

// running creates a Session with one Turn and starts it.
func running(t *testing.T, e *engine.Engine) (string, string) {
	t.Helper()
	ctx := context.Background()
	rec, _, err := e.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "echo", Input: text("hi")}, engine.APICaller)
	if err != nil {
		t.Fatal(err)
	}
	turn, _, err := e.StartNextTurn(ctx, rec.Session.ID)
	if err != nil || turn == nil || turn.ID != rec.Turn.ID {
		t.Fatalf("start: %v %v", turn, err)
	}
	return rec.Session.ID, turn.ID
}

func TestServerEnforcesOutputLimits(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	sid, tid := running(t, e)
	parts := make(helmrtype.Content, 65)
	for i := range parts {
		parts[i] = helmrtype.ContentPart{Type: "text", Text: "p"}
	}
	if _, _, err := e.AppendOutput(ctx, sid, tid, 1, parts); !errors.Is(err, helmrtype.CodeLimitExceeded) {
		t.Fatalf("65 parts: %v", err)
	}
	if _, _, err := e.AppendOutput(ctx, sid, tid, 1, helmrtype.Text(strings.Repeat("x", 257<<10))); !errors.Is(err, helmrtype.CodeLimitExceeded) {
		t.Fatalf("257 KiB: %v", err)
	}
	chunk := helmrtype.Text(strings.Repeat("y", 250<<10))
	var op int64
	var err error
	for op = 1; op < 40 && err == nil; op++ {
		_, _, err = e.AppendOutput(ctx, sid, tid, op, chunk)
	}
	if !errors.Is(err, helmrtype.CodeLimitExceeded) || op < 30 {
		t.Fatalf("budget: op %d: %v", op, err)
	}
	// The accepted prefix stays; the Turn goes on.
	if _, _, err := e.AppendOutput(ctx, sid, tid, op+1, helmrtype.Text("small")); err != nil {
		t.Fatalf("small output after the budget refusal: %v", err)
	}
}

func TestOutputOpsAreIdempotent(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	sid, tid := running(t, e)
	seq1, dup1, err1 := e.AppendOutput(ctx, sid, tid, 1, helmrtype.Text("a"))
	_, dup2, err2 := e.AppendOutput(ctx, sid, tid, 1, helmrtype.Text("a"))
	if err1 != nil || err2 != nil || dup1 || !dup2 || seq1 == 0 {
		t.Fatalf("%d %v %v %v %v", seq1, dup1, dup2, err1, err2)
	}
	page, _ := e.ListEvents(ctx, sid, 0, 100)
	n := 0
	for _, ev := range page.Records {
		if ev.Kind == "turn.output" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d output records, want 1", n)
	}
}

func TestSettlementChecksResultAndResponse(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	sid, tid := running(t, e)
	big, _ := json.Marshal(helmrtype.Text(strings.Repeat("r", 257<<10)))
	if _, _, err := e.SettleTurn(ctx, sid, tid, 1, engine.Settlement{Status: "completed", Result: json.RawMessage(`{}`), Response: big}, false); err != nil {
		t.Fatal(err)
	}
	ts, _ := e.GetTurn(ctx, sid, tid)
	if ts.Status != "failed" || ts.Error.Code != helmrtype.CodeLimitExceeded || ts.Response != nil {
		t.Fatalf("big response: %+v", ts)
	}
	_, tid2, _ := func() (string, string, error) {
		tr, _, err := e.Enqueue(ctx, sid, helmrtype.EnqueueRequest{Input: text("2")}, engine.APICaller)
		return sid, tr.ID, err
	}()
	if t2, _, _ := e.StartNextTurn(ctx, sid); t2 == nil || t2.ID != tid2 {
		t.Fatal("second turn did not start")
	}
	if _, _, err := e.SettleTurn(ctx, sid, tid2, 1, engine.Settlement{Status: "completed", Result: json.RawMessage(`{not json`)}, false); err != nil {
		t.Fatal(err)
	}
	if ts, _ := e.GetTurn(ctx, sid, tid2); ts.Status != "failed" || ts.Error.Code != helmrtype.CodeResultInvalid {
		t.Fatalf("bad result: %+v", ts)
	}
	// A settled Turn takes no more output.
	if _, _, err := e.AppendOutput(ctx, sid, tid2, 2, helmrtype.Text("late")); !errors.Is(err, helmrtype.CodeTurnSettled) {
		t.Fatalf("late output: %v", err)
	}
}

func TestSettleStartsNextInOneTransaction(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	sid, tid := running(t, e)
	next, _, err := e.Enqueue(ctx, sid, helmrtype.EnqueueRequest{Input: text("next")}, engine.APICaller)
	if err != nil {
		t.Fatal(err)
	}
	started, _, err := e.SettleTurn(ctx, sid, tid, 1, engine.Settlement{Status: "completed", Response: json.RawMessage(`[]`)}, true)
	if err != nil || started == nil || started.ID != next.ID || started.Status != "running" {
		t.Fatalf("settle+start: %+v %v", started, err)
	}
	first, _ := e.GetTurn(ctx, sid, tid)
	if first.Status != "completed" || first.Response == nil || len(first.Response) != 0 || string(first.Result) != "null" {
		t.Fatalf("explicit empty response: %+v", first)
	}
	s, _ := e.GetSession(ctx, sid)
	if s.IdleSince != nil {
		t.Fatal("a session with a running turn is not idle")
	}
}

func TestIdempotencyDigestIsCanonical(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	a, _, err := e.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "typed", Input: json.RawMessage(`{"a":1,"b":2}`), IdempotencyKey: "k"}, engine.APICaller)
	if err != nil {
		t.Fatal(err)
	}
	b, replayed, err := e.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "typed", Input: json.RawMessage(`{ "b": 2, "a": 1 }`), IdempotencyKey: "k"}, engine.APICaller)
	if err != nil || !replayed || b.Session.ID != a.Session.ID {
		t.Fatalf("reordered keys: %v %v", err, replayed)
	}
	_, _, err = e.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "typed", Input: json.RawMessage(`{"a":1,"b":3}`), IdempotencyKey: "k"}, engine.APICaller)
	if !errors.Is(err, helmrtype.CodeIdempotencyConflict) {
		t.Fatalf("changed body: %v", err)
	}
	// A failed request stores nothing: the key stays free.
	if _, _, err := e.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "nope", IdempotencyKey: "k2"}, engine.APICaller); !errors.Is(err, helmrtype.CodeNotFound) {
		t.Fatalf("unknown agent: %v", err)
	}
	if _, _, err := e.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "echo", IdempotencyKey: "k2"}, engine.APICaller); err != nil {
		t.Fatalf("key after a failed request: %v", err)
	}
}

func TestListSessionsFilters(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		if _, _, err := e.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "echo"}, engine.APICaller); err != nil {
			t.Fatal(err)
		}
	}
	e.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "typed", Key: "k1"}, engine.APICaller)
	page, err := e.ListSessions(ctx, engine.SessionQuery{Agent: "echo", Limit: 3})
	if err != nil || len(page.Sessions) != 3 || page.NextCursor == "" {
		t.Fatalf("page 1: %v %+v", err, page)
	}
	page2, _ := e.ListSessions(ctx, engine.SessionQuery{Agent: "echo", Limit: 3, Cursor: page.NextCursor})
	if len(page2.Sessions) != 2 || page2.NextCursor != "" || page2.Sessions[0].ID <= page.Sessions[2].ID {
		t.Fatalf("page 2: %+v", page2)
	}
	byKey, _ := e.ListSessions(ctx, engine.SessionQuery{Agent: "typed", Key: "k1"})
	if len(byKey.Sessions) != 1 || byKey.Sessions[0].Key != "k1" {
		t.Fatalf("by key: %+v", byKey)
	}
	for _, q := range []engine.SessionQuery{{Key: "k1"}, {Agent: "typed", Key: "k1", Cursor: "x"}, {Statuses: []string{"asleep"}}, {Limit: 101}} {
		if _, err := e.ListSessions(ctx, q); !errors.Is(err, helmrtype.CodeInvalidRequest) {
			t.Errorf("%+v: %v", q, err)
		}
	}
	open, _ := e.ListSessions(ctx, engine.SessionQuery{Statuses: []string{"open"}})
	if len(open.Sessions) != 6 {
		t.Fatalf("open: %d", len(open.Sessions))
	}
}

func TestWaitsLeaveNoWatchers(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	sid, tid := running(t, e)
	base := e.Watchers()
	for i := 0; i < 100; i++ {
		if _, err := e.WaitTurn(ctx, sid, "00000000-0000-7000-8000-000000000000", time.Second); !errors.Is(err, helmrtype.CodeNotFound) {
			t.Fatalf("wait on unknown turn: %v", err)
		}
		if r, err := e.WaitTurn(ctx, sid, tid, time.Millisecond); err != nil || r.Status != "timeout" {
			t.Fatalf("timed wait: %+v %v", r, err)
		}
		_, stop := e.Watch(sid)
		stop()
	}
	if n := e.Watchers(); n != base {
		t.Fatalf("%d watchers after the waits, want %d", n, base)
	}
	// A waiter gets the settled state without reading.
	done := make(chan *helmrtype.TimedTurnWaitResult)
	go func() {
		r, _ := e.WaitTurn(ctx, sid, tid, time.Minute)
		done <- r
	}()
	for e.Watchers() == base {
		time.Sleep(time.Millisecond)
	}
	if _, _, err := e.SettleTurn(ctx, sid, tid, 1, engine.Settlement{Status: "completed", Result: json.RawMessage(`7`)}, false); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.Status != "settled" || string(r.Outcome.Result) != "7" {
		t.Fatalf("wait: %+v", r)
	}
}

func TestSettleOpBelowLastIsRefused(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	sid, tid := running(t, e)
	if _, _, err := e.AppendOutput(ctx, sid, tid, 2, helmrtype.Text("x")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.SettleTurn(ctx, sid, tid, 2, engine.Settlement{Status: "completed"}, false); !errors.Is(err, helmrtype.CodeInvalidRequest) {
		t.Fatalf("settle with a stale op: %v", err)
	}
	if _, _, err := e.AppendOutput(ctx, sid, tid, 0, helmrtype.Text("x")); !errors.Is(err, helmrtype.CodeInvalidRequest) {
		t.Fatalf("output op 0: %v", err)
	}
}

func TestNonFiniteJSONIsRefused(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	_, _, err := e.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "typed", Input: json.RawMessage(`{"x": 1e999}`)}, engine.APICaller)
	if !errors.Is(err, helmrtype.CodeInputInvalid) {
		t.Fatalf("1e999 input: %v", err)
	}
	sid, tid := running(t, e)
	if _, _, err := e.SettleTurn(ctx, sid, tid, 1, engine.Settlement{Status: "completed", Result: json.RawMessage(`[1e400]`)}, false); err != nil {
		t.Fatal(err)
	}
	if ts, _ := e.GetTurn(ctx, sid, tid); ts.Status != "failed" || ts.Error.Code != helmrtype.CodeResultInvalid {
		t.Fatalf("non-finite result: %+v", ts)
	}
}

func TestLimitsCountPlainJSON(t *testing.T) {
	// 80 KiB of <a>& is about 82 KB of plain JSON, well inside 256 KiB;
	// Go's HTML escaping would count it as over 380 KB.
	c := helmrtype.Text(strings.Repeat("<a>&", 20<<10))
	if err := c.Check(); err != nil {
		t.Fatalf("check: %v (size %d)", err, c.EncodedSize())
	}
	if n := c.EncodedSize(); n > 90_000 {
		t.Fatalf("encoded size %d", n)
	}
}

// TestInterruptDue: a node that missed a notice asks whether the Turn it
// runs should stop: yes after an interrupt (of the Turn, the Session or an
// ancestor) or a cancel, not for a plain running Turn.
func TestInterruptDue(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	turns := map[string]string{}
	due := func(sid string) bool {
		t.Helper()
		d, err := e.InterruptDue(ctx, sid, turns[sid])
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a, ta := running(t, e)
	turns[a] = ta
	if due(a) {
		t.Error("due for a plain running Turn")
	}
	if _, err := e.InterruptSession(ctx, a, helmrtype.ControlRequest{}); err != nil {
		t.Fatal(err)
	}
	if !due(a) {
		t.Error("not due after an interrupt")
	}
	b, tb := running(t, e)
	turns[b] = tb
	if _, err := e.CancelSession(ctx, b, helmrtype.ControlRequest{}); err != nil {
		t.Fatal(err)
	}
	if !due(b) {
		t.Error("not due after a cancel")
	}
	// An interrupt of the Turn alone places no hold; it is recorded.
	d, td := running(t, e)
	turns[d] = td
	if _, err := e.InterruptTurn(ctx, d, td, helmrtype.ControlRequest{}); err != nil {
		t.Fatal(err)
	}
	if !due(d) {
		t.Error("not due after an interrupt of the Turn")
	}
	// A Turn that is not the running one (settled meanwhile) is due.
	c, _ := running(t, e)
	turns[c] = "00000000-0000-7000-8000-000000000001"
	if !due(c) {
		t.Error("not due for a Turn that does not run")
	}
}
