package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/controlplane"
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
