package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/helmr-go/helmr/internal/store"
	"github.com/helmr-go/helmr/internal/store/sqlitestore"
)

// seedLargeStore fills the SQLite store of dataDir with idle Sessions
// and Sessions whose Turn was running when an earlier control plane
// stopped (recovery settles each of those), written straight through the
// store in one transaction.
func seedLargeStore(t *testing.T, dataDir string, idle, running int) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(dataDir, "helmr.db"), sqlitestore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UTC()
	later := now.Add(7 * 24 * time.Hour)
	err = st.Update(ctx, func(tx store.Tx) error {
		for i := range idle + running {
			id := fmt.Sprintf("0190a000-0000-7000-8000-%012d", i)
			s := &store.Session{ID: id, DeploymentID: "dep-seed", RootSessionID: id, Agent: "chat", Template: "box",
				Status: "open", CloseAfterIdle: "7d", HibernateAfterIdle: "30s", MaxTurnDuration: "1h", CreatedAt: now}
			if i < idle {
				s.IdleSince, s.IdleCloseAt = &now, &later
			}
			if err := tx.InsertSession(ctx, s); err != nil {
				return err
			}
			if i >= idle {
				tid := fmt.Sprintf("0190a000-0000-7000-9000-%012d", i)
				if err := tx.InsertTurn(ctx, &store.Turn{ID: tid, SessionID: id, Sequence: 1, Status: "running",
					Input: []byte(`[{"type":"text","text":"hi"}]`), Source: []byte(`{"kind":"api"}`), CreatedAt: now, StartedAt: &now}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSignalDuringRecovery: a helmr server started on a large store
// (many idle Sessions, many Turns left running by an earlier run) and
// sent SIGINT while it recovers exits, instead of finishing the start-up
// first; a second start on the same store then recovers and serves.
func TestSignalDuringRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("runs helmr server on a large store")
	}
	data := t.TempDir()
	t0 := time.Now()
	seedLargeStore(t, data, 20000, 2000)
	t.Logf("seeded in %v", time.Since(t0).Round(time.Millisecond))
	args := serverFlags([]string{"server", "--log-level", "info", "--api-key-file", data + ".key", "--addr", freeAddr(t), "--data-dir", data})
	cmd := exec.Command(helmrBinary(t), args...)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	recovering, listening := make(chan struct{}), false
	var log strings.Builder
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "recovering the work of the previous run") {
				close(recovering)
			}
			if strings.Contains(sc.Text(), "listening on") {
				listening = true
			}
		}
		done <- cmd.Wait()
	}()
	select {
	case <-recovering:
	case err := <-done:
		t.Fatalf("helmr server exited before recovering: %v\n%s", err, log.String())
	case <-time.After(2 * time.Minute):
		t.Fatal("helmr server did not reach recovery in 2 minutes")
	}
	sent := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
		t.Logf("exited %v after SIGINT (it had started listening: %v)", time.Since(sent).Round(time.Millisecond), listening)
	case <-time.After(30 * time.Second):
		cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, for the log
		<-done
		t.Fatalf("helmr server ignored SIGINT during recovery for 30 s:\n%s", log.String())
	}
	// Nothing was lost: the next start recovers the work and serves.
	t0 = time.Now()
	s := startServerWith(t, data, nil, nil, "server")
	t.Logf("started again and recovered in %v", time.Since(t0).Round(time.Millisecond))
	if err := apiCall(s.url, s.key, "GET", "/v1/sessions?limit=1", nil, nil); err != nil {
		t.Fatalf("list sessions after a restart: %v", err)
	}
}
