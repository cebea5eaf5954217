package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/controlplane"
	"github.com/helmr-go/helmr/internal/store"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
)

// TestHelmrDevOnPostgres: helmr dev --database postgres://… runs the
// development loop on PostgreSQL: the quickstart deploys, a Session runs
// its Turn, and its records are in the PostgreSQL database, with no SQLite
// file in the data directory.
func TestHelmrDevOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the quickstart")
	}
	db := pgtest.URL(t)
	data := t.TempDir()
	s := startServer(t, data, "dev", "--database", db, "../../examples/quickstart")
	out, errOut, code := s.cli(t, "session", "create", "--agent", "reviewer", "--input-json", `{"issue": 7}`, "--wait", "--json")
	if code != 0 {
		t.Fatalf("create: exit %d: %s %s\n%s", code, out, errOut, s.output())
	}
	var rec struct {
		Session helmrtype.Session     `json:"session"`
		Outcome helmrtype.TurnOutcome `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec.Outcome.Status != helmrtype.TurnCompleted {
		t.Fatalf("create --json: %v: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(data, "helmr.db")); !os.IsNotExist(err) {
		t.Fatalf("helmr dev on PostgreSQL made a SQLite file: %v", err)
	}
	ctx := context.Background()
	st, err := controlplane.OpenStore(ctx, controlplane.Config{DataDir: t.TempDir(), Database: db})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	err = st.View(ctx, func(tx store.Tx) error {
		got, err := tx.GetSession(ctx, rec.Session.ID)
		if err == nil && got.Agent != "reviewer" {
			t.Errorf("the Session in PostgreSQL: %+v", got)
		}
		return err
	})
	if err != nil {
		t.Fatalf("the Session in PostgreSQL: %v", err)
	}
	if !strings.Contains(s.output(), "deployed ") {
		t.Fatalf("dev output: %s", s.output())
	}
}
