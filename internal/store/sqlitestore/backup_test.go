package sqlitestore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/helmr-go/helmr/internal/store"
	"github.com/helmr-go/helmr/internal/store/sqlitestore"
)

// TestBackupAndIntegrity: a backup of an open store holds its rows and is
// owner-only; CheckIntegrity refuses a file that is not a database, and a
// database that is not helmr's; Backup refuses an existing target.
func TestBackupAndIntegrity(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "helmr.db")
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutMeta(ctx, "greeting", "hello") }); err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(dir, "copy.db")
	if err := sqlitestore.Backup(ctx, path, to); err != nil {
		t.Fatalf("backup: %v", err)
	}
	if st, err := os.Stat(to); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the copy's mode: %v %v", st.Mode(), err)
	}
	if err := sqlitestore.Backup(ctx, path, to); err == nil {
		t.Fatal("a backup over an existing file was accepted")
	}
	c, err := sqlitestore.Open(ctx, to, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got string
	c.View(ctx, func(tx store.Tx) error { got, err = tx.GetMeta(ctx, "greeting"); return err })
	if got != "hello" {
		t.Fatalf("the copy's meta: %q %v", got, err)
	}
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, []byte("this is not a database, not at all, not even close; more bytes to pass a header"), 0o600)
	if err := sqlitestore.CheckIntegrity(ctx, garbage); err == nil {
		t.Fatal("a file that is not a database passed the check")
	}
	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o600)
	if err := sqlitestore.CheckIntegrity(ctx, empty); err == nil {
		t.Fatal("an empty database passed the check")
	}
}
