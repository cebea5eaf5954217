package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/controlplane"
	"github.com/helmr-go/helmr/internal/deploy"
	"github.com/helmr-go/helmr/internal/store"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
)

var programs sync.Map // directory → *deploy.Built

// programBinary builds the test agent program in dir (under testdata) once
// per test binary.
func programBinary(t *testing.T, dir string) *deploy.Built {
	t.Helper()
	agentBinary(t) // makes binDir
	if b, ok := programs.Load(dir); ok {
		return b.(*deploy.Built)
	}
	out := filepath.Join(binDir, strings.ReplaceAll(dir, "/", "-"))
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := deploy.BuildDir(context.Background(), filepath.Join("testdata", dir), out)
	if err != nil {
		t.Fatalf("build the test agents in %s: %v", dir, err)
	}
	programs.Store(dir, b)
	return b
}

// cronBinary builds a version of the cron test agents (testdata/cronagent).
func cronBinary(t *testing.T, version string) *deploy.Built {
	t.Helper()
	return programBinary(t, "cronagent/"+version)
}

// tickerSessions lists the Sessions of the ticker Agent through url.
func tickerSessions(t *testing.T, url, key string) []helmrtype.Session {
	t.Helper()
	var page helmrtype.SessionPage
	if err := apiCall(url, key, "GET", "/v1/sessions?agent=ticker&limit=100", nil, &page); err != nil {
		t.Fatal(err)
	}
	return page.Sessions
}

// firstTurn returns a Session's first Turn.
func firstTurn(t *testing.T, url, key string, s helmrtype.Session) helmrtype.TurnState {
	t.Helper()
	if s.InitialTurn == nil {
		t.Fatalf("session %s has no initial turn", s.ID)
	}
	var ts helmrtype.TurnState
	if err := apiCall(url, key, "GET", "/v1/sessions/"+s.ID+"/turns/"+s.InitialTurn.ID, nil, &ts); err != nil {
		t.Fatal(err)
	}
	return ts
}

// schedulesByName lists the Schedules through the CLI, by trigger name.
func schedulesByName(t *testing.T, s *server) map[string]helmrtype.Schedule {
	t.Helper()
	out, errOut, code := s.cli(t, "schedule", "list", "--json")
	if code != 0 {
		t.Fatalf("schedule list: %d %s %s", code, out, errOut)
	}
	var page helmrtype.SchedulePage
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		t.Fatalf("schedule list output %q: %v", out, err)
	}
	m := map[string]helmrtype.Schedule{}
	for _, sc := range page.Schedules {
		m[sc.Name] = sc
	}
	return m
}

// TestCronTriggers: a Deployment's cron triggers become Schedules; a fire
// admits a fresh Session whose Turn has source schedule and the trigger's
// input; a redeploy changes one trigger and removes another; helmr
// schedule list and get show them.
func TestCronTriggers(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "data"), "server")
	dep := deployCLI(t, s, "testdata/cronagent/v1")
	scheds := schedulesByName(t, s)
	often, hourly := scheds["often"], scheds["hourly"]
	if len(scheds) != 2 || often.Agent != "ticker" || often.Pattern != "*/2 * * * * *" || often.Timezone != "UTC" ||
		often.Overlap != helmrtype.OverlapSkip || often.DeploymentID != dep.ID || hourly.Timezone != "Europe/Paris" || hourly.Overlap != helmrtype.OverlapAllow {
		t.Fatalf("the schedules of the first deployment: %+v", scheds)
	}
	if !hourly.NextFireAt.After(time.Now()) || hourly.NextFireAt.Minute() != 0 {
		t.Fatalf("the hourly schedule's next fire: %s", hourly.NextFireAt)
	}
	// A fire admits a Session of its own, with a Turn from the schedule.
	var fired helmrtype.Session
	waitFor(t, "a session admitted by the schedule", func() bool {
		for _, ss := range tickerSessions(t, s.url, s.key) {
			if ts := firstTurn(t, s.url, s.key, ss); ts.Status == helmrtype.TurnCompleted {
				fired = ss
				return true
			}
		}
		return false
	})
	ts := firstTurn(t, s.url, s.key, fired)
	if ts.Source.Kind != helmrtype.SourceSchedule || string(ts.Result) != `"schedule"` || fired.DeploymentID != dep.ID {
		t.Fatalf("the fired session %+v and its turn %+v", fired, ts)
	}
	var in helmrtype.Content
	if err := json.Unmarshal(ts.Input, &in); err != nil || in.PlainText() != "tick" {
		t.Fatalf("the fired turn's input: %s %v", ts.Input, err)
	}
	// Each fire has its own Session and Computer.
	waitFor(t, "a second fire", func() bool { return len(tickerSessions(t, s.url, s.key)) >= 2 })
	var ss []helmrtype.Session
	waitFor(t, "two fired sessions on their computers", func() bool {
		ss = tickerSessions(t, s.url, s.key)
		return len(ss) >= 2 && ss[0].ComputerID != nil && ss[1].ComputerID != nil
	})
	if ss[0].ID == ss[1].ID || *ss[0].ComputerID == *ss[1].ComputerID {
		t.Fatalf("two fires share a session or a computer: %+v", ss[:2])
	}
	out, errOut, code := s.cli(t, "schedule", "get", often.ID)
	if code != 0 || !strings.Contains(out, "*/2 * * * * *") || !strings.Contains(out, "ticker") {
		t.Fatalf("schedule get: %d %s %s", code, out, errOut)
	}
	got := schedulesByName(t, s)["often"]
	if got.LastFireAt == nil || got.LastSessionID == "" {
		t.Fatalf("the schedule after fires: %+v", got)
	}

	// A redeploy changes "often" (same Schedule) and removes "hourly".
	dep2 := deployCLI(t, s, "testdata/cronagent/v2")
	scheds = schedulesByName(t, s)
	changed := scheds["often"]
	if len(scheds) != 1 || changed.ID != often.ID || changed.Pattern != "*/3 * * * * *" || changed.DeploymentID != dep2.ID {
		t.Fatalf("the schedules after the redeploy: %+v", scheds)
	}
	if _, _, code := s.cli(t, "schedule", "get", hourly.ID); code == 0 {
		t.Fatal("a removed trigger's schedule is still there")
	}
	var gone helmrtype.Schedule
	if err := apiCall(s.url, s.key, "GET", "/v1/schedules/"+hourly.ID, nil, &gone); helmrtype.CodeOf(err) != helmrtype.CodeNotFound {
		t.Fatalf("GET a removed schedule: %v", err)
	}
	waitFor(t, "a fire of the changed trigger", func() bool {
		for _, ss := range tickerSessions(t, s.url, s.key) {
			ts := firstTurn(t, s.url, s.key, ss)
			var in helmrtype.Content
			json.Unmarshal(ts.Input, &in)
			if in.PlainText() == "tock" {
				return ss.DeploymentID == dep2.ID
			}
		}
		return false
	})
}

// TestCronMissedOccurrenceAdmittedOnce: a control plane that was down
// across occurrences admits the latest once and counts the others as
// missed; a fire retried after its record was lost (a crash between the
// admission and the Schedule's update) admits nothing more.
func TestCronMissedOccurrenceAdmittedOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := startServer(t, dir, "server")
	deployCLI(t, s, "testdata/cronagent/v1")
	hourly := schedulesByName(t, s)["hourly"]
	s.kill()

	// Down for three hours: the Schedule's next fire is three hours
	// back (on the hour, as its pattern is).
	top := time.Now().UTC().Truncate(time.Hour)
	setNextFire := func(at time.Time) {
		t.Helper()
		st, err := controlplane.OpenStore(context.Background(), controlplane.Config{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		err = st.Update(context.Background(), func(tx store.Tx) error {
			sc, err := tx.GetSchedule(context.Background(), hourly.ID)
			if err != nil {
				return err
			}
			sc.NextFireAt = at
			return tx.UpdateSchedule(context.Background(), sc)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setNextFire(top.Add(-3 * time.Hour))
	s = startServer(t, dir, "server")
	var sc helmrtype.Schedule
	waitFor(t, "the missed occurrence's fire", func() bool {
		sc = schedulesByName(t, s)["hourly"]
		return sc.LastFireAt != nil
	})
	if !sc.LastFireAt.Equal(top) || sc.MissedCount != 3 || !sc.NextFireAt.Equal(top.Add(time.Hour)) || sc.LastSessionID == "" {
		t.Fatalf("after downtime across four occurrences: last %v, missed %d, next %v, session %q", sc.LastFireAt, sc.MissedCount, sc.NextFireAt, sc.LastSessionID)
	}
	hourlySessions := func() int {
		n := 0
		for _, ss := range tickerSessions(t, s.url, s.key) {
			ts := firstTurn(t, s.url, s.key, ss)
			var in helmrtype.Content
			json.Unmarshal(ts.Input, &in)
			if len(in) == 0 {
				n++
			}
		}
		return n
	}
	if n := hourlySessions(); n != 1 {
		t.Fatalf("%d sessions for one missed occurrence", n)
	}

	// The record of the fire lost: the occurrence fires again and admits
	// nothing new.
	s.kill()
	setNextFire(top)
	s = startServer(t, dir, "server")
	waitFor(t, "the retried fire", func() bool { return schedulesByName(t, s)["hourly"].NextFireAt.After(top) })
	if n := hourlySessions(); n != 1 {
		t.Fatalf("%d sessions after the occurrence fired twice", n)
	}
}

// firedField and firedSession read a "a schedule fired" log line.
var (
	firedField   = regexp.MustCompile(`(?:^|\s)occurrence=(\S+)`)
	firedSession = regexp.MustCompile(`(?:^|\s)session=(\S+)`)
)

// TestCronTwoNodesAdmitEachFireOnce: two nodes on one PostgreSQL database
// both arm every Schedule; each occurrence admits one Session, whichever
// node fires it, and when the node that fired stops the other goes on.
func TestCronTwoNodesAdmitEachFireOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two control planes")
	}
	db := pgtest.URL(t)
	c := startNodes(t, db, 2)
	b := cronBinary(t, "v1")
	f, err := os.Open(b.Binary)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := helmrclient.New(c.srv[0].url, c.key).Deployments.Create(t.Context(), b.Manifest, f); err != nil {
		t.Fatal(err)
	}
	// Both nodes know the Schedule (the second from the first's notice).
	for i := range c.srv {
		waitFor(t, "the schedule on every node", func() bool {
			var page helmrtype.SchedulePage
			return c.callOn(i, "GET", "/v1/schedules", nil, &page) == nil && len(page.Schedules) == 2
		})
	}
	// Each node logs the fires it admitted (or replayed: both read an
	// occurrence as due at once and the second's admission is the first's
	// replay, so it names the same Session).
	fired := func(i int) map[string]string {
		m := map[string]string{}
		for _, line := range strings.Split(c.srv[i].output(), "\n") {
			if !strings.Contains(line, "a schedule fired") || !strings.Contains(line, "trigger=often") {
				continue
			}
			o, s := firedField.FindStringSubmatch(line), firedSession.FindStringSubmatch(line)
			if o != nil && s != nil {
				m[o[1]] = s[1]
			}
		}
		return m
	}
	unique := func() int {
		all := fired(0)
		for o, s := range fired(1) {
			all[o] = s
		}
		return len(all)
	}
	waitFor(t, "four occurrences fired", func() bool { return unique() >= 4 })
	// The node that fired stops; the other fires the next occurrences.
	firer := 0
	if len(fired(1)) > len(fired(0)) {
		firer = 1
	}
	other := 1 - firer
	c.srv[firer].kill()
	before := len(fired(other))
	waitFor(t, "the other node firing after the first stopped", func() bool { return len(fired(other)) > before })
	c.srv[other].kill()
	// Nothing runs now: the store and the logs are final.
	logged := map[string]string{}
	for i := range c.srv {
		for o, s := range fired(i) {
			if prev, ok := logged[o]; ok && prev != s {
				t.Fatalf("occurrence %s admitted Session %s on one node and %s on the other", o, prev, s)
			}
			logged[o] = s
		}
	}
	conn, err := pgx.Connect(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var occurrences, sessions int
	if err := conn.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM idempotency WHERE scope = 'schedules.fire'),
		(SELECT count(*) FROM sessions WHERE agent = 'ticker')`).Scan(&occurrences, &sessions); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d occurrences fired, %d sessions, %d logged", occurrences, sessions, len(logged))
	// (A node killed between a fire's commit and its log line logged one
	// less: the store's counts are the check.)
	if sessions != occurrences || sessions < len(logged) || sessions < 5 {
		t.Fatalf("%d sessions for %d occurrences (%d logged)", sessions, occurrences, len(logged))
	}
}
