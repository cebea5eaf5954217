package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/controlplane"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
)

// TestImplicitComputersAreDeletedAfterGrace: the Computer made for a
// Session at its first launch stays while the Session is open, and goes,
// directory and all, a grace after the Session closed; a Computer made
// through the API stays after its Session closed.
func TestImplicitComputersAreDeletedAfterGrace(t *testing.T) {
	const grace = 300 * time.Millisecond
	p := startPlaneConfig(t, "127.0.0.1:0", controlplane.Config{ImplicitComputerGrace: grace})
	r := p.create("files", text("write note.txt kept while open"))
	sid := r.Session.ID
	if o := p.wait(sid, r.Turn.ID); o.Status != helmrtype.TurnCompleted {
		t.Fatalf("write: %+v", o)
	}
	cid := *p.session(sid).ComputerID
	dir := filepath.Join(p.dataDir, "computers", cid)
	var c helmrtype.ComputerState
	p.must("GET", "/v1/computers/"+cid, nil, &c)
	if !c.Implicit || c.Status != helmrtype.ComputerAvailable {
		t.Fatalf("the Session's Computer: %+v", c)
	}

	var explicit helmrtype.ComputerState
	p.must("POST", "/v1/computers", helmrtype.ComputerCreateRequest{Template: "box"}, &explicit)
	if explicit.Implicit {
		t.Fatalf("a Computer made through the API is implicit: %+v", explicit)
	}
	var rec helmrtype.SessionCreateReceipt
	p.must("POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "files", Input: text("write kept.txt explicit"), ComputerID: explicit.ID}, &rec)
	if o := p.wait(rec.Session.ID, rec.Turn.ID); o.Status != helmrtype.TurnCompleted {
		t.Fatalf("write on the explicit Computer: %+v", o)
	}
	p.must("POST", "/v1/sessions/"+rec.Session.ID+"/close", map[string]any{}, nil)
	p.waitEvent(rec.Session.ID, helmrtype.EventSessionClosed)

	// Well past the grace, an open Session keeps its Computer.
	time.Sleep(4 * grace)
	p.must("GET", "/v1/computers/"+cid, nil, &c)
	if c.Status != helmrtype.ComputerAvailable {
		t.Fatalf("the Computer of an open Session: %+v", c)
	}
	if _, err := os.Stat(filepath.Join(dir, "workspace", "note.txt")); err != nil {
		t.Fatalf("the open Session's workspace: %v", err)
	}

	p.must("POST", "/v1/sessions/"+sid+"/close", map[string]any{}, nil)
	p.waitEvent(sid, helmrtype.EventSessionClosed)
	deadline := time.Now().Add(30 * time.Second)
	for c.Status != helmrtype.ComputerDeleted {
		if time.Now().After(deadline) {
			t.Fatalf("the implicit Computer after its Session closed: %+v", c)
		}
		time.Sleep(50 * time.Millisecond)
		p.must("GET", "/v1/computers/"+cid, nil, &c)
	}
	if c.DeletedAt == nil {
		t.Fatalf("deleted without a time: %+v", c)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the deleted Computer's directory: %v", err)
	}

	// The explicit Computer, closed before, is still there with its files.
	time.Sleep(4 * grace)
	p.must("GET", "/v1/computers/"+explicit.ID, nil, &explicit)
	if explicit.Status != helmrtype.ComputerAvailable {
		t.Fatalf("the explicit Computer: %+v", explicit)
	}
	if _, err := os.Stat(filepath.Join(p.dataDir, "computers", explicit.ID, "workspace", "kept.txt")); err != nil {
		t.Fatalf("the explicit Computer's files: %v", err)
	}
}

// TestImplicitComputersDeletedOnceAcrossNodes: two helmr server processes
// on one PostgreSQL database both delete idle implicit Computers; each
// Computer is deleted by exactly one of them, without errors.
func TestImplicitComputersDeletedOnceAcrossNodes(t *testing.T) {
	db := pgtest.URL(t)
	dir := t.TempDir()
	computers := filepath.Join(dir, "computers")
	c := &nodes{t: t, dead: make([]atomic.Bool, 2)}
	for i := range 2 {
		d := filepath.Join(dir, fmt.Sprintf("node%d", i))
		c.dirs = append(c.dirs, d)
		c.srv = append(c.srv, startServer(t, d, "server", "--database", db, "--computers-dir", computers,
			"--implicit-computer-grace", "200ms", "--stop-sessions"))
	}
	c.key = c.srv[0].key
	c.deploy(0)
	var ids []string
	for i := range 4 {
		var r helmrtype.SessionCreateReceipt
		c.must(i%2, "POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "files", Input: text("write note.txt x"),
			IdempotencyKey: fmt.Sprintf("s%d", i)}, &r)
		var w helmrtype.TimedTurnWaitResult
		c.must(i%2, "GET", "/v1/sessions/"+r.Session.ID+"/turns/"+r.Turn.ID+"/wait?timeout=60s", nil, &w)
		if w.Outcome == nil || w.Outcome.Status != helmrtype.TurnCompleted {
			t.Fatalf("turn %d: %+v", i, w)
		}
		var s helmrtype.Session
		c.must(0, "GET", "/v1/sessions/"+r.Session.ID, nil, &s)
		ids = append(ids, *s.ComputerID)
		c.must(i%2, "POST", "/v1/sessions/"+r.Session.ID+"/close", map[string]any{}, nil)
	}
	for _, id := range ids {
		deadline := time.Now().Add(30 * time.Second)
		for {
			var st helmrtype.ComputerState
			c.must(1, "GET", "/v1/computers/"+id, nil, &st)
			if st.Status == helmrtype.ComputerDeleted {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("computer %s: %+v", id, st)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if _, err := os.Stat(filepath.Join(computers, id)); !os.IsNotExist(err) {
			t.Errorf("computer %s's directory: %v", id, err)
		}
	}
	logs := c.srv[0].output() + c.srv[1].output()
	for _, id := range ids {
		if n := strings.Count(logs, `msg="deleted an implicit computer nothing used" computer_id=`+id); n != 1 {
			t.Errorf("computer %s deleted %d times:\n%s", id, n, logs)
		}
	}
	if strings.Contains(logs, "delete idle implicit computers") && strings.Contains(logs, "level=ERROR") {
		t.Errorf("errors in the logs:\n%s", logs)
	}
}
