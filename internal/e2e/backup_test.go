package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/controlplane"
	"github.com/helmr-go/helmr/internal/store"
)

// helmrRun runs the helmr binary with args and returns its combined
// output and exit code.
func helmrRun(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(helmrBinary(t), args...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// TestServerBackupWhileRunning: helmr server backup, a process of its own,
// copies the store of a running helmr server while Turns are admitted; the
// copy holds every Turn acknowledged before it began. helmr server restore
// refuses the running server's data directory and restores into a
// stopped one.
func TestServerBackupWhileRunning(t *testing.T) {
	data := t.TempDir()
	s := startServer(t, data, "server")
	b := agentBinary(t)
	f, err := os.Open(b.Binary)
	if err != nil {
		t.Fatal(err)
	}
	_, err = helmrclient.New(s.url, s.key).Deployments.Create(t.Context(), b.Manifest, f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var r helmrtype.SessionCreateReceipt
	if err := apiCall(s.url, s.key, "POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "echo", Input: text("first")}, &r); err != nil {
		t.Fatal(err)
	}
	sid := r.Session.ID
	var mu sync.Mutex
	acked := []string{r.Turn.ID}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			var ts helmrtype.TurnState
			if err := apiCall(s.url, s.key, "POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: text("more")}, &ts); err != nil {
				t.Errorf("enqueue: %v", err)
				return
			}
			mu.Lock()
			acked = append(acked, ts.ID)
			mu.Unlock()
		}
	}()
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 30 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	before := append([]string(nil), acked...)
	mu.Unlock()
	copyFile := filepath.Join(t.TempDir(), "backup.db")
	out, code := helmrRun(t, "server", "backup", "--data-dir", data, "--to", copyFile)
	close(stop)
	wg.Wait()
	if code != 0 || !strings.Contains(out, "integrity check ok") {
		t.Fatalf("backup: exit %d: %s", code, out)
	}
	if out, code := helmrRun(t, "server", "restore", "--data-dir", data, "--from", copyFile); code == 0 || !strings.Contains(out, "in use") {
		t.Fatalf("restore over a running server: exit %d: %s", code, out)
	}
	if out, code := helmrRun(t, "server", "backup", "--database", "postgres://127.0.0.1:1/helmr", "--to", copyFile+".pg"); code != 1 || !strings.Contains(out, "pg_dump") {
		t.Fatalf("backup of PostgreSQL: exit %d: %s", code, out)
	}

	restored := t.TempDir()
	if out, code := helmrRun(t, "server", "restore", "--data-dir", restored, "--from", copyFile); code != 0 {
		t.Fatalf("restore: exit %d: %s", code, out)
	}
	ctx := context.Background()
	st, err := controlplane.OpenStore(ctx, controlplane.Config{DataDir: restored})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.View(ctx, func(tx store.Tx) error {
		for _, id := range before {
			if _, err := tx.GetTurn(ctx, sid, id); err != nil {
				t.Errorf("turn %s, acknowledged before the backup, is not in it: %v", id, err)
			}
		}
		return nil
	})
	t.Logf("%d Turns acknowledged before the backup", len(before))
}
