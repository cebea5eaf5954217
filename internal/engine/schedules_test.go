package engine_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/store/sqlitestore"
)

// cronEngine returns an engine on clock with a Deployment whose Agent
// "echo" has an hourly and a daily trigger.
func cronEngine(t *testing.T, clock engine.Clock) *engine.Engine {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "helmr.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := engine.New(st, engine.Options{Clock: clock})
	t.Cleanup(e.Close)
	m := helmrtype.Manifest{Version: helmrtype.ManifestVersion, SDK: "go",
		Templates: []helmrtype.TemplateManifest{{ID: "box", Image: helmrtype.ImageManifest{Name: "box", Host: true}}},
		Agents: []helmrtype.AgentManifest{{ID: "echo", Template: "box", InputKind: "text", CloseAfterIdle: "7d", HibernateAfterIdle: "never",
			Triggers: []helmrtype.TriggerManifest{
				{Name: "hourly", Kind: "cron", Pattern: "0 * * * *", Timezone: "UTC", Input: text("tick"), Overlap: "skip"},
				{Name: "daily", Kind: "cron", Pattern: "0 0 * * *", Timezone: "UTC", Overlap: "allow"},
			}}}}
	if _, err := e.PublishDeployment(ctx, "sha256:cron", m, "", ""); err != nil {
		t.Fatal(err)
	}
	return e
}

// schedule returns the Schedule of trigger name.
func schedule(t *testing.T, e *engine.Engine, name string) helmrtype.Schedule {
	t.Helper()
	page, err := e.ListSchedules(context.Background(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range page.Schedules {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no schedule %q in %+v", name, page.Schedules)
	return helmrtype.Schedule{}
}

// settle moves the clock to at, arms the timers (due ones fire at once)
// and waits until trigger name's next fire is past at.
func settle(t *testing.T, e *engine.Engine, clock *testClock, at time.Time, name string) helmrtype.Schedule {
	t.Helper()
	clock.set(at)
	if err := e.ArmSchedules(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := schedule(t, e, name)
		if s.NextFireAt.After(at) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("the %s schedule did not fire: %+v", name, s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func sessionsOf(t *testing.T, e *engine.Engine) []helmrtype.Session {
	t.Helper()
	page, err := e.ListSessions(context.Background(), engine.SessionQuery{Agent: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	return page.Sessions
}

// TestScheduleMissedAndOverlap: after downtime across occurrences the
// latest within the catch-up window is admitted and the others counted as
// missed; one older than the window admits nothing; overlap skip admits
// nothing while the previous fire's Session has work.
func TestScheduleMissedAndOverlap(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 30, 0, 0, time.UTC)
	clock := &testClock{now: t0}
	e := cronEngine(t, clock)
	if s := schedule(t, e, "hourly"); !s.NextFireAt.Equal(time.Date(2026, 1, 1, 13, 0, 0, 0, time.UTC)) || s.MissedCount != 0 || s.LastFireAt != nil {
		t.Fatalf("a new hourly schedule: %+v", s)
	}

	// Down from 12:30 to 15:10: 13:00 and 14:00 missed, 15:00 admitted.
	s := settle(t, e, clock, time.Date(2026, 1, 1, 15, 10, 0, 0, time.UTC), "hourly")
	if s.LastFireAt == nil || !s.LastFireAt.Equal(time.Date(2026, 1, 1, 15, 0, 0, 0, time.UTC)) || s.MissedCount != 2 ||
		!s.NextFireAt.Equal(time.Date(2026, 1, 1, 16, 0, 0, 0, time.UTC)) {
		t.Fatalf("after downtime: %+v", s)
	}
	ss := sessionsOf(t, e)
	if len(ss) != 1 || ss[0].ID != s.LastSessionID {
		t.Fatalf("sessions after downtime: %+v", ss)
	}
	ts, err := e.GetTurn(context.Background(), ss[0].ID, ss[0].InitialTurn.ID)
	if err != nil || ts.Source.Kind != helmrtype.SourceSchedule || string(ts.Input) != string(text("tick")) {
		t.Fatalf("the fired turn: %+v %v", ts, err)
	}

	// 16:00: the 15:00 Session's Turn is still queued: skipped.
	s = settle(t, e, clock, time.Date(2026, 1, 1, 16, 0, 1, 0, time.UTC), "hourly")
	if s.MissedCount != 3 || !s.LastFireAt.Equal(time.Date(2026, 1, 1, 15, 0, 0, 0, time.UTC)) || len(sessionsOf(t, e)) != 1 {
		t.Fatalf("an overlapping fire: %+v", s)
	}

	// The daily trigger: its latest occurrence (Jan 4 00:00) is 12 h
	// old at 12:00, past the catch-up window: nothing is admitted and all
	// three count as missed.
	d := settle(t, e, clock, time.Date(2026, 1, 4, 12, 0, 0, 0, time.UTC), "daily")
	if d.LastFireAt != nil || d.MissedCount != 3 || !d.NextFireAt.Equal(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("a daily schedule after three days down: %+v", d)
	}
}

// TestScheduleReconcile: a later Deployment changes a trigger (same
// Schedule, next fire computed again), removes another, and refuses a bad
// one before anything changes.
func TestScheduleReconcile(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 30, 0, 0, time.UTC)
	clock := &testClock{now: t0}
	e := cronEngine(t, clock)
	ctx := context.Background()
	hourly := schedule(t, e, "hourly")
	manifest := func(trs ...helmrtype.TriggerManifest) helmrtype.Manifest {
		return helmrtype.Manifest{Version: helmrtype.ManifestVersion, SDK: "go",
			Templates: []helmrtype.TemplateManifest{{ID: "box", Image: helmrtype.ImageManifest{Name: "box", Host: true}}},
			Agents:    []helmrtype.AgentManifest{{ID: "echo", Template: "box", InputKind: "text", CloseAfterIdle: "7d", HibernateAfterIdle: "never", Triggers: trs}}}
	}
	for _, bad := range []helmrtype.TriggerManifest{
		{Name: "x", Kind: "cron", Pattern: "61 * * * *", Timezone: "UTC", Overlap: "skip"},
		{Name: "x", Kind: "cron", Pattern: "* * * * *", Timezone: "Mars/Base", Overlap: "skip"},
		{Name: "x", Kind: "cron", Pattern: "* * * * *", Timezone: "UTC", Overlap: "sometimes"},
		{Name: "x", Kind: "cron", Pattern: "* * * * *", Timezone: "UTC", Overlap: "skip", Input: json.RawMessage(`"not content"`)},
		{Name: "bad name", Kind: "cron", Pattern: "* * * * *", Timezone: "UTC", Overlap: "skip"},
	} {
		if _, err := e.PublishDeployment(ctx, "sha256:bad", manifest(bad), "", ""); helmrtype.CodeOf(err) != helmrtype.CodeInvalidRequest {
			t.Errorf("a trigger %+v: %v", bad, err)
		}
	}
	// A JSON Agent's trigger input is checked against its input schema.
	typed := manifest()
	typed.Agents = append(typed.Agents, helmrtype.AgentManifest{ID: "typed", Template: "box", InputKind: "json", CloseAfterIdle: "7d", HibernateAfterIdle: "never",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"topic":{"type":"string"}},"required":["topic"]}`),
		Triggers:    []helmrtype.TriggerManifest{{Name: "t", Kind: "cron", Pattern: "* * * * *", Timezone: "UTC", Overlap: "skip", Input: json.RawMessage(`{"topic":3}`)}}})
	if _, err := e.PublishDeployment(ctx, "sha256:typed", typed, "", ""); helmrtype.CodeOf(err) != helmrtype.CodeInvalidRequest || !strings.Contains(err.Error(), "input schema") {
		t.Errorf("a trigger input against the input schema: %v", err)
	}
	if len(mustList(t, e)) != 2 {
		t.Fatal("a refused Deployment changed the schedules")
	}
	if _, err := e.PublishDeployment(ctx, "sha256:v2", manifest(
		helmrtype.TriggerManifest{Name: "hourly", Kind: "cron", Pattern: "30 * * * *", Timezone: "Asia/Tokyo", Overlap: "allow"}), "", ""); err != nil {
		t.Fatal(err)
	}
	got := mustList(t, e)
	if len(got) != 1 || got[0].ID != hourly.ID || got[0].Pattern != "30 * * * *" || got[0].Overlap != "allow" ||
		!got[0].NextFireAt.Equal(time.Date(2026, 1, 1, 13, 30, 0, 0, time.UTC)) || got[0].DeploymentID == hourly.DeploymentID {
		t.Fatalf("after the redeploy: %+v", got)
	}
	if _, err := e.GetSchedule(ctx, schedule(t, e, "hourly").ID); err != nil {
		t.Fatal(err)
	}
}

func mustList(t *testing.T, e *engine.Engine) []helmrtype.Schedule {
	t.Helper()
	page, err := e.ListSchedules(context.Background(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return page.Schedules
}

// TestPromoteReconcilesSchedules: promoting the first Deployment after a
// second one removed a trigger brings the trigger back, pinned to the first
// Deployment, exactly as publishing the first again would; promoting the
// current one changes nothing, and an unknown ID is not_found.
func TestPromoteReconcilesSchedules(t *testing.T) {
	clock := &testClock{now: time.Date(2026, 1, 1, 12, 30, 0, 0, time.UTC)}
	e := cronEngine(t, clock)
	ctx := context.Background()
	first := schedule(t, e, "hourly").DeploymentID
	v2 := helmrtype.Manifest{Version: helmrtype.ManifestVersion, SDK: "go",
		Templates: []helmrtype.TemplateManifest{{ID: "box", Image: helmrtype.ImageManifest{Name: "box", Host: true}}},
		Agents:    []helmrtype.AgentManifest{{ID: "echo", Template: "box", InputKind: "text", CloseAfterIdle: "7d", HibernateAfterIdle: "never"}}}
	second, err := e.PublishDeployment(ctx, "sha256:v2", v2, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := mustList(t, e); len(got) != 0 {
		t.Fatalf("after a Deployment without triggers: %+v", got)
	}
	d, err := e.PromoteDeployment(ctx, first)
	if err != nil || d.ID != first || !d.Current {
		t.Fatalf("promote: %+v %v", d, err)
	}
	got := mustList(t, e)
	if len(got) != 2 || got[0].DeploymentID != first || got[1].DeploymentID != first {
		t.Fatalf("after promoting the first Deployment: %+v", got)
	}
	if cur, err := e.GetDeployment(ctx, "current"); err != nil || cur.ID != first {
		t.Fatalf("current: %+v %v", cur, err)
	}
	if old, err := e.GetDeployment(ctx, second.ID); err != nil || old.Current {
		t.Fatalf("the second Deployment: %+v %v", old, err)
	}
	hourly := schedule(t, e, "hourly")
	if _, err := e.PromoteDeployment(ctx, first); err != nil {
		t.Fatal(err)
	}
	if again := schedule(t, e, "hourly"); again.ID != hourly.ID || !again.NextFireAt.Equal(hourly.NextFireAt) {
		t.Fatalf("promoting the current Deployment changed its Schedule: %+v, was %+v", again, hourly)
	}
	if _, err := e.PromoteDeployment(ctx, "00000000-0000-7000-8000-000000000000"); helmrtype.CodeOf(err) != helmrtype.CodeNotFound {
		t.Fatalf("promote an unknown Deployment: %v", err)
	}
}
