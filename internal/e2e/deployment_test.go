package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/helmr-go/helmr/helmrtype"
)

// createTicker creates a Session of the cron test agent "ticker" with one
// Turn, waits for it and returns the receipt.
func createTicker(t *testing.T, s *server, text string) helmrtype.SessionCreateReceipt {
	t.Helper()
	out, errOut, code := s.cli(t, "session", "create", "--agent", "ticker", "--text", text, "--wait", "--json")
	if code != 0 {
		t.Fatalf("create: %d %s %s", code, out, errOut)
	}
	var rec helmrtype.SessionCreateReceipt
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestDeploymentPromote: helmr deployment promote makes an earlier
// Deployment current again. New Sessions pin it and the cron Schedules
// follow its triggers, as when it was published; a Session created on the
// later Deployment keeps it and runs its Turns there. helmr deployment
// list and get show which one is current; an unknown ID exits 3.
func TestDeploymentPromote(t *testing.T) {
	if testing.Short() {
		t.Skip("runs helmr server and builds two agents")
	}
	s := startServer(t, filepath.Join(t.TempDir(), "data"), "server")
	d1 := deployCLI(t, s, "testdata/cronagent/v1")
	d2 := deployCLI(t, s, "testdata/cronagent/v2")
	if d1.ID == d2.ID {
		t.Fatal("two versions made one Deployment")
	}
	onV2 := createTicker(t, s, "on v2")
	if onV2.Session.DeploymentID != d2.ID {
		t.Fatalf("a Session after the second deploy pinned %s, want %s", onV2.Session.DeploymentID, d2.ID)
	}
	if sc := schedulesByName(t, s); len(sc) != 1 || sc["often"].Pattern != "*/3 * * * * *" {
		t.Fatalf("the schedules of the second Deployment: %+v", sc)
	}

	out, errOut, code := s.cli(t, "deployment", "promote", d1.ID, "--json")
	var promoted helmrtype.Deployment
	if code != 0 || json.Unmarshal([]byte(out), &promoted) != nil || promoted.ID != d1.ID || !promoted.Current {
		t.Fatalf("promote: %d %s %s", code, out, errOut)
	}
	// New Sessions pin the promoted Deployment.
	onV1 := createTicker(t, s, "on v1 again")
	if onV1.Session.DeploymentID != d1.ID {
		t.Fatalf("a Session after the promotion pinned %s, want %s", onV1.Session.DeploymentID, d1.ID)
	}
	// The Schedules are those of the promoted Deployment's triggers.
	sc := schedulesByName(t, s)
	if len(sc) != 2 || sc["often"].Pattern != "*/2 * * * * *" || sc["often"].DeploymentID != d1.ID || sc["hourly"].DeploymentID != d1.ID {
		t.Fatalf("the schedules after the promotion: %+v", sc)
	}
	// The Session on the later Deployment keeps it, and its next Turn runs.
	var got helmrtype.Session
	if err := apiCall(s.url, s.key, "GET", "/v1/sessions/"+onV2.Session.ID, nil, &got); err != nil || got.DeploymentID != d2.ID {
		t.Fatalf("the earlier Session after the promotion: %+v %v", got, err)
	}
	out, errOut, code = s.cli(t, "session", "enqueue", onV2.Session.ID, "--text", "still v2", "--json")
	var ts helmrtype.TurnState
	if code != 0 || json.Unmarshal([]byte(out), &ts) != nil {
		t.Fatalf("enqueue: %d %s %s", code, out, errOut)
	}
	if out, errOut, code := s.cli(t, "session", "turn", "wait", onV2.Session.ID, ts.ID); code != 0 || !strings.Contains(out, "completed") {
		t.Fatalf("the earlier Session's next Turn: %d %s %s", code, out, errOut)
	}

	out, _, code = s.cli(t, "deployment", "list")
	if code != 0 || !strings.Contains(out, "CURRENT") {
		t.Fatalf("deployment list: %d %s", code, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, d1.ID) != strings.Contains(line, " * ") && strings.Contains(line, "ticker") {
			t.Fatalf("deployment list marks the wrong Deployment current:\n%s", out)
		}
	}
	if out, _, code := s.cli(t, "deployment", "get", "current"); code != 0 || !strings.Contains(out, d1.ID) || !strings.Contains(out, "Current:    yes") {
		t.Fatalf("deployment get current: %d %s", code, out)
	}
	if _, _, code := s.cli(t, "deployment", "promote", "00000000-0000-7000-8000-000000000000"); code != 3 {
		t.Fatalf("promote an unknown Deployment: exit %d, want 3", code)
	}
}
