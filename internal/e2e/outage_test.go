package e2e

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
)

// Turns that finish while PostgreSQL is down (5 s), on two nodes, complete
// as if nothing happened: their output and settlements are tried again until the
// database is back; no Turn is lost (execution_lost) and no hold is
// placed. Meanwhile the API answers 503 unavailable with Retry-After.
func TestTurnsFinishDuringADatabaseOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("halts a PostgreSQL server of its own")
	}
	pg, err := pgtest.Start()
	if errors.Is(err, pgtest.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Stop() })
	ctx := context.Background()
	name, err := pg.CreateDurableDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Two nodes on the database, each running some of the Sessions.
	p := startPlaneWith(t, "", "127.0.0.1:0", pg.DatabaseURL(name))
	p2 := startPlaneWith(t, "", "127.0.0.1:0", pg.DatabaseURL(name))
	const n = 6
	var rs []helmrtype.SessionCreateReceipt
	for i := range n {
		rs = append(rs, []*plane{p, p2}[i%2].create("echo", text("sleep 1500ms")))
	}
	for _, r := range rs {
		p.waitEvent(r.Session.ID, helmrtype.EventTurnRunning)
	}
	if err := pg.Halt(); err != nil {
		t.Fatal(err)
	}
	// The Turns finish during the outage; the API says to come back.
	deadline := time.Now().Add(5 * time.Second)
	saw503 := false
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest("GET", p.url+"/v1/sessions/"+rs[0].Session.ID, nil)
		req.Header.Set("Authorization", "Bearer "+p.key)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "" {
				saw503 = true
			}
			resp.Body.Close()
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err := pg.Resume(); err != nil {
		t.Fatal(err)
	}
	if !saw503 {
		t.Error("no 503 with Retry-After while the database was down")
	}
	for _, r := range rs {
		o := p.wait(r.Session.ID, r.Turn.ID)
		if o.Status != helmrtype.TurnCompleted {
			t.Errorf("session %s: turn %s %+v, want completed", r.Session.ID, o.Status, o.Error)
		}
		if s := p.session(r.Session.ID); len(s.Holds) != 0 {
			t.Errorf("session %s has holds %+v", r.Session.ID, s.Holds)
		}
		if !p.hasOutput(r.Session.ID, "sleep 1500ms") {
			t.Errorf("session %s lost its output", r.Session.ID)
		}
	}
}
