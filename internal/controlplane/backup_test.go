package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/store"
	"github.com/helmr-go/helmr/internal/store/sqlitestore"
)

// TestBackupUnderLoad: a backup taken while a goroutine admits Turns opens,
// passes the integrity check and holds every Turn acknowledged before it
// began; Restore brings it into another data directory, and refuses one a
// control plane runs on.
func TestBackupUnderLoad(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := OpenStore(ctx, Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(st, engine.Options{})
	m := helmrtype.Manifest{Version: helmrtype.ManifestVersion, SDK: "go",
		Templates: []helmrtype.TemplateManifest{{ID: "box", Image: helmrtype.ImageManifest{Name: "box", Host: true}}},
		Agents:    []helmrtype.AgentManifest{{ID: "echo", Template: "box", InputKind: "text", CloseAfterIdle: "7d", HibernateAfterIdle: "never"}}}
	if _, err := e.PublishDeployment(ctx, "sha256:test", m, "", ""); err != nil {
		t.Fatal(err)
	}
	input, _ := json.Marshal(helmrtype.Text("hello"))
	var mu sync.Mutex
	var acked [][2]string // Session and Turn IDs
	stop := make(chan struct{})
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			rec, _, err := e.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "echo", Input: input}, engine.APICaller)
			if err != nil {
				t.Errorf("admit: %v", err)
				return
			}
			mu.Lock()
			acked = append(acked, [2]string{rec.Session.ID, rec.Turn.ID})
			mu.Unlock()
			if i == 50 {
				close(started)
			}
		}
	}()
	<-started
	mu.Lock()
	before := append([][2]string(nil), acked...)
	mu.Unlock()
	backup := filepath.Join(t.TempDir(), "copy.db")
	if err := Backup(ctx, Config{DataDir: dir}, backup); err != nil {
		t.Fatalf("backup: %v", err)
	}
	close(stop)
	wg.Wait()
	e.Close()
	st.Close()
	if err := Backup(ctx, Config{DataDir: dir}, backup); err == nil {
		t.Fatal("a backup over an existing file was accepted")
	}
	if err := sqlitestore.CheckIntegrity(ctx, backup); err != nil {
		t.Fatalf("the copy: %v", err)
	}
	mu.Lock()
	t.Logf("%d Turns acknowledged before the backup, %d in all", len(before), len(acked))
	mu.Unlock()

	// Restore into another data directory and find every Turn.
	restored := t.TempDir()
	if err := Restore(ctx, Config{DataDir: restored}, backup); err != nil {
		t.Fatalf("restore: %v", err)
	}
	st2, err := OpenStore(ctx, Config{DataDir: restored})
	if err != nil {
		t.Fatalf("open the restored store: %v", err)
	}
	defer st2.Close()
	err = st2.View(ctx, func(tx store.Tx) error {
		for _, id := range before {
			sid, tid := id[0], id[1]
			if _, err := tx.GetTurn(ctx, sid, tid); err != nil {
				t.Errorf("turn %s of session %s acknowledged before the backup: %v", tid, sid, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// A running control plane's data directory is not restored over.
	busy := t.TempDir()
	cp, err := Open(ctx, Config{DataDir: busy, UnsafeNoSandbox: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := Restore(ctx, Config{DataDir: busy}, backup); err == nil {
		t.Fatal("restore under a running control plane was accepted")
	}
	cp.Close(ctx)

	// PostgreSQL is refused, pointing to its own tools.
	pg := Config{DataDir: dir, Database: "postgres://localhost/helmr"}
	var he *helmrtype.Error
	if err := Backup(ctx, pg, filepath.Join(t.TempDir(), "x")); !errors.As(err, &he) || he.Code != helmrtype.CodeInvalidRequest {
		t.Fatalf("backup of PostgreSQL: %v", err)
	}
	if err := Restore(ctx, pg, backup); !errors.As(err, &he) || he.Code != helmrtype.CodeInvalidRequest {
		t.Fatalf("restore of PostgreSQL: %v", err)
	}
}
