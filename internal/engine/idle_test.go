package engine_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/store/sqlitestore"
)

// openBrief opens an engine over the SQLite file at path with an Agent
// "brief" that closes after 300 ms idle (published when publish is set).
func openBrief(t *testing.T, path string, publish bool) *engine.Engine {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(st, engine.Options{})
	t.Cleanup(func() { e.Close(); st.Close() })
	if publish {
		m := helmrtype.Manifest{Version: helmrtype.ManifestVersion, SDK: "go",
			Templates: []helmrtype.TemplateManifest{{ID: "box", Image: helmrtype.ImageManifest{Name: "box", Host: true}}},
			Agents:    []helmrtype.AgentManifest{{ID: "brief", Template: "box", InputKind: "text", CloseAfterIdle: "300ms", HibernateAfterIdle: "never"}}}
		if _, err := e.PublishDeployment(ctx, "sha256:brief", m, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// closedOnTime waits until the Session is closed and checks, by the
// store's timestamps, that the close came within a second of the end of
// its idle period (not at the next 30 s sweep).
func closedOnTime(t *testing.T, e *engine.Engine, sid string) {
	t.Helper()
	ctx := context.Background()
	var s *helmrtype.Session
	for i := 0; ; i++ {
		var err error
		if s, err = e.GetSession(ctx, sid); err != nil {
			t.Fatal(err)
		}
		if s.Status == helmrtype.SessionClosed {
			break
		}
		if i == 400 {
			t.Fatalf("session still %s 20 s after it went idle for a 300ms closeAfterIdle", s.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	page, err := e.ListEvents(ctx, sid, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range page.Records {
		if ev.Kind != helmrtype.EventSessionClose {
			continue
		}
		var data struct{ Reason string }
		json.Unmarshal(ev.Data, &data)
		if data.Reason != "close_after_idle" || s.IdleSince == nil {
			t.Fatalf("session.close %s, idle_since %v", ev.Data, s.IdleSince)
		}
		if late := ev.CreatedAt.Sub(s.IdleSince.Add(300 * time.Millisecond)); late < 0 || late > time.Second {
			t.Fatalf("closed %v after its idle period ended", late)
		}
		return
	}
	t.Fatal("no session.close event")
}

// A Session closes when its closeAfterIdle runs out: idle from creation,
// and idle from its last Turn's settlement (a Turn in between puts the
// close off).
func TestCloseAfterIdleIsOnTime(t *testing.T) {
	e := openBrief(t, filepath.Join(t.TempDir(), "helmr.db"), true)
	ctx := context.Background()
	idle, _, err := e.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "brief"}, engine.APICaller)
	if err != nil {
		t.Fatal(err)
	}
	busy, _, err := e.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "brief", Input: text("hi")}, engine.APICaller)
	if err != nil {
		t.Fatal(err)
	}
	sid := busy.Session.ID
	turn, _, err := e.StartNextTurn(ctx, sid)
	if err != nil || turn == nil {
		t.Fatalf("start: %v %v", turn, err)
	}
	closedOnTime(t, e, idle.Session.ID)
	if s, _ := e.GetSession(ctx, sid); s.Status != helmrtype.SessionOpen {
		t.Fatalf("a session with a running turn is %s", s.Status)
	}
	if _, _, err := e.SettleTurn(ctx, sid, turn.ID, 1, engine.Settlement{Status: "completed"}, true); err != nil {
		t.Fatal(err)
	}
	closedOnTime(t, e, sid)
}

// An idle Session's close is armed again when the control plane starts on
// the same store.
func TestCloseAfterIdleAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "helmr.db")
	first := openBrief(t, path, true)
	r, _, err := first.CreateSession(context.Background(), helmrtype.SessionCreateRequest{Agent: "brief"}, engine.APICaller)
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	e := openBrief(t, path, false)
	if _, err := e.Recover(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	closedOnTime(t, e, r.Session.ID)
}

// openLong opens an engine on clock c with an Agent "long" that closes
// after an hour idle (beyond the engine's IdleHorizon).
func openLong(t *testing.T, c *testClock) *engine.Engine {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "helmr.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(st, engine.Options{Clock: c})
	t.Cleanup(func() { e.Close(); st.Close() })
	m := helmrtype.Manifest{Version: helmrtype.ManifestVersion, SDK: "go",
		Templates: []helmrtype.TemplateManifest{{ID: "box", Image: helmrtype.ImageManifest{Name: "box", Host: true}}},
		Agents:    []helmrtype.AgentManifest{{ID: "long", Template: "box", InputKind: "text", CloseAfterIdle: "1h", HibernateAfterIdle: "never"}}}
	if _, err := e.PublishDeployment(ctx, "sha256:long", m, "", ""); err != nil {
		t.Fatal(err)
	}
	return e
}

// An idle close further off than IdleHorizon is kept in the store alone
// and found by the sweep once due; Recover and the sweep read deadlines,
// not Sessions, so a Session that got work is never closed by an old one.
func TestIdleCloseBeyondTheHorizon(t *testing.T) {
	c := &testClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	e := openLong(t, c)
	ctx := context.Background()
	idle, _, err := e.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "long"}, engine.APICaller)
	if err != nil {
		t.Fatal(err)
	}
	worked, _, err := e.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "long"}, engine.APICaller)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Recover(ctx, nil); err != nil {
		t.Fatal(err)
	}
	c.advance(59 * time.Minute)
	if n, err := e.SweepIdle(ctx); err != nil || n != 0 {
		t.Fatalf("sweep before the deadline: %d %v", n, err)
	}
	if _, _, err := e.Enqueue(ctx, worked.Session.ID, helmrtype.EnqueueRequest{Input: text("work")}, engine.APICaller); err != nil {
		t.Fatal(err)
	}
	c.advance(time.Minute)
	if n, err := e.SweepIdle(ctx); err != nil || n != 1 {
		t.Fatalf("sweep at the deadline closed %d (want 1): %v", n, err)
	}
	for id, want := range map[string]string{idle.Session.ID: helmrtype.SessionClosed, worked.Session.ID: helmrtype.SessionOpen} {
		if s, err := e.GetSession(ctx, id); err != nil || s.Status != want {
			t.Fatalf("session %s: %v %v, want %s", id, s, err, want)
		}
	}
	if n, err := e.SweepIdle(ctx); err != nil || n != 0 {
		t.Fatalf("a second sweep: %d %v", n, err)
	}
}

// Storage pressure holds the Sessions with work alone and releases what
// it held; an idle Session gets no hold.
func TestStoragePressureHoldsOnlySessionsWithWork(t *testing.T) {
	c := &testClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	e := openLong(t, c)
	ctx := context.Background()
	idle, _, err := e.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "long"}, engine.APICaller)
	if err != nil {
		t.Fatal(err)
	}
	busy, _, err := e.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "long", Input: text("hi")}, engine.APICaller)
	if err != nil {
		t.Fatal(err)
	}
	holds := func(id string) []helmrtype.Hold {
		s, err := e.GetSession(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return s.Holds
	}
	if err := e.SetStoragePressure(ctx, true, "disk low"); err != nil {
		t.Fatal(err)
	}
	if err := e.SetStoragePressure(ctx, true, "disk still low"); err != nil {
		t.Fatal(err)
	}
	if hs := holds(busy.Session.ID); len(hs) != 1 || hs[0].Kind != helmrtype.HoldStoragePressure {
		t.Fatalf("holds of the busy session under pressure: %+v", hs)
	}
	if hs := holds(idle.Session.ID); len(hs) != 0 {
		t.Fatalf("holds of the idle session under pressure: %+v", hs)
	}
	if err := e.SetStoragePressure(ctx, false, ""); err != nil {
		t.Fatal(err)
	}
	if hs := holds(busy.Session.ID); len(hs) != 0 {
		t.Fatalf("holds after pressure: %+v", hs)
	}
}
