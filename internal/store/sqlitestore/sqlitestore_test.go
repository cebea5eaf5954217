package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/helmr-go/helmr/internal/store"
	"github.com/helmr-go/helmr/internal/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func openAt(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openAt(t, filepath.Join(t.TempDir(), "helmr.db"))
	})
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "helmr.db")
	created := time.Date(2025, 1, 2, 3, 4, 5, 678901000, time.UTC)
	ses := &store.Session{ID: "ses-1", DeploymentID: "dep-1", RootSessionID: "ses-1", Agent: "a", Template: "t",
		Key: "k", Status: "open", CloseAfterIdle: "7d", HibernateAfterIdle: "30s", CreatedAt: created}

	s := openAt(t, path)
	err := s.Update(t.Context(), func(tx store.Tx) error {
		if err := tx.PutMeta(t.Context(), "instance", "one"); err != nil {
			return err
		}
		if err := tx.InsertSession(t.Context(), ses); err != nil {
			return err
		}
		return tx.AppendEvent(t.Context(), &store.Event{SessionID: "ses-1", Kind: "session.created", CreatedAt: created})
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := s.Update(t.Context(), func(tx store.Tx) error { return nil }); err == nil {
		t.Error("Update after Close succeeded")
	}

	s = openAt(t, path)
	defer s.Close()
	err = s.Update(t.Context(), func(tx store.Tx) error {
		if v, err := tx.GetMeta(t.Context(), "instance"); err != nil || v != "one" {
			t.Errorf("GetMeta after reopening = %q, %v", v, err)
		}
		got, err := tx.GetSessionByKey(t.Context(), "a", "k")
		if err != nil {
			t.Fatalf("GetSessionByKey after reopening: %v", err)
		}
		if *got != *ses {
			t.Errorf("Session after reopening = %+v, want %+v", *got, *ses)
		}
		e := &store.Event{SessionID: "ses-1", Kind: "turn.queued", CreatedAt: created}
		if err := tx.AppendEvent(t.Context(), e); err != nil {
			return err
		}
		if e.Sequence != 2 {
			t.Errorf("AppendEvent after reopening assigned %d, want 2", e.Sequence)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update after reopening: %v", err)
	}
}

func TestMigrationsListed(t *testing.T) {
	ms, err := Migrations()
	if err != nil {
		t.Fatalf("Migrations: %v", err)
	}
	if len(ms) == 0 || ms[0].Version != 1 || ms[0].Name != "init" {
		t.Fatalf("Migrations() = %+v, want 1_init first", ms)
	}
	for i, m := range ms {
		if m.SQL == "" {
			t.Errorf("migration %d_%s has no SQL", m.Version, m.Name)
		}
		if i > 0 && m.Version <= ms[i-1].Version {
			t.Errorf("migration %d_%s follows %d_%s", m.Version, m.Name, ms[i-1].Version, ms[i-1].Name)
		}
	}
}

type migrationRow struct {
	version int
	name    string
}

// readMigrations reads schema_migrations of a closed database file.
func readMigrations(t *testing.T, path string) []migrationRow {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(t.Context(), `SELECT version, name FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []migrationRow
	for rows.Next() {
		var r migrationRow
		if err := rows.Scan(&r.version, &r.name); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMigrationsRecorded(t *testing.T) {
	ms, err := Migrations()
	if err != nil {
		t.Fatalf("Migrations: %v", err)
	}
	var want []migrationRow
	for _, m := range ms {
		want = append(want, migrationRow{m.Version, m.Name})
	}
	path := filepath.Join(t.TempDir(), "helmr.db")
	// Opening twice applies each migration once.
	for range 2 {
		s := openAt(t, path)
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		got := readMigrations(t, path)
		if len(got) != len(want) {
			t.Fatalf("schema_migrations = %+v, want %+v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("schema_migrations[%d] = %+v, want %+v", i, got[i], want[i])
			}
		}
	}
}

func TestSchemaTooNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "helmr.db")
	s := openAt(t, path)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(t.Context(), `INSERT INTO schema_migrations(version, name) VALUES (?, 'from_the_future')`, ms[len(ms)-1].Version+1)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	s, err = Open(t.Context(), path, Options{})
	if !errors.Is(err, store.ErrSchemaTooNew) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open of a newer schema: got %v, want ErrSchemaTooNew", err)
	}
}

func TestSynchronousOption(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bogus.db")
	s, err := Open(t.Context(), path, Options{Synchronous: "bogus"})
	if err == nil {
		s.Close()
		t.Fatal(`Open with Synchronous "bogus" succeeded`)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused Open left a file behind: %v", err)
	}
	for _, mode := range []string{"FULL", "NORMAL", "normal"} {
		s, err := Open(t.Context(), filepath.Join(dir, mode+".db"), Options{Synchronous: mode})
		if err != nil {
			t.Errorf("Open with Synchronous %q: %v", mode, err)
			continue
		}
		err = s.Update(t.Context(), func(tx store.Tx) error { return tx.PutMeta(context.Background(), "k", mode) })
		if err != nil {
			t.Errorf("Update with Synchronous %q: %v", mode, err)
		}
		s.Close()
	}
}

// runBatch commits fns as one group, the way the writer does, and returns
// each fn's outcome. The store must be idle.
func runBatch(s *Store, ctxs []context.Context, fns ...func(store.Tx) error) []error {
	batch := make([]*updateReq, len(fns))
	for i, fn := range fns {
		batch[i] = &updateReq{ctx: ctxs[i], fn: fn, err: make(chan error, 1)}
	}
	s.commitBatch(batch)
	errs := make([]error, len(fns))
	for i, r := range batch {
		errs[i] = <-r.err
	}
	return errs
}

func putMeta(key string) func(store.Tx) error {
	return func(tx store.Tx) error { return tx.PutMeta(context.Background(), key, "done") }
}

// checkOutcomes checks that each key is stored exactly when its Update
// reported success.
func checkOutcomes(t *testing.T, s *Store, keys []string, errs []error) {
	t.Helper()
	err := s.View(t.Context(), func(tx store.Tx) error {
		for i, key := range keys {
			_, gerr := tx.GetMeta(t.Context(), key)
			switch {
			case errs[i] == nil && gerr != nil:
				t.Errorf("Update %s returned nil but its write is missing", key)
			case errs[i] != nil && gerr == nil:
				t.Errorf("Update %s returned %v but its write is stored", key, errs[i])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCanceledUpdateInBatch: canceling one Update's context while its
// statement runs must not affect the Updates committed with it. SQLite rolls
// back the whole transaction when a write statement is interrupted, and the
// driver interrupts on cancellation.
func TestCanceledUpdateInBatch(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "helmr.db"))
	defer s.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// A long write, as a pruning DELETE would be.
	long := func(t store.Tx) error {
		go cancel()
		_, err := t.(*tx).q.exec(ctx, `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000)
 INSERT INTO meta(key, value) SELECT 'row-' || x, '' FROM c`)
		if err != nil {
			return err
		}
		return t.PutMeta(context.Background(), "long", "done")
	}
	bg := t.Context()
	errs := runBatch(s, []context.Context{bg, ctx, bg}, putMeta("before"), long, putMeta("after"))
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("Updates next to a canceled one failed: %v, %v", errs[0], errs[2])
	}
	checkOutcomes(t, s, []string{"before", "long", "after"}, errs)
}

// TestLostTransactionInBatch: when the shared transaction ends under an
// Update (SQLite rolls it back on some errors: I/O, disk full, interrupt),
// no later Update of the batch may run outside it, and every Update reports
// what happened to its writes.
func TestLostTransactionInBatch(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "helmr.db"))
	defer s.Close()
	lose := func(t store.Tx) error {
		if err := t.PutMeta(context.Background(), "losing", "done"); err != nil {
			return err
		}
		// What SQLite does by itself after such an error.
		_, err := t.(*tx).q.exec(context.Background(), `ROLLBACK`)
		return err
	}
	bg := t.Context()
	keys := []string{"before", "losing", "after"}
	errs := runBatch(s, []context.Context{bg, bg, bg}, putMeta("before"), lose, putMeta("after"))
	checkOutcomes(t, s, keys, errs)
	// The store works afterwards.
	if err := s.Update(t.Context(), putMeta("later")); err != nil {
		t.Fatalf("Update after a lost transaction: %v", err)
	}
	checkOutcomes(t, s, []string{"later"}, []error{nil})
}

// More concurrent reads than pooled connections, each running a query that
// was never prepared, all finish: a reader never waits for a connection
// while it holds one (a cache miss runs on its own transaction).
func TestConcurrentReadsOfNewQueries(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "helmr.db"))
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]string, i%16+1) // 16 query texts, never prepared before
			for j := range ids {
				ids[j] = fmt.Sprintf("ses-%d", j)
			}
			errs <- s.View(ctx, func(tx store.Tx) error {
				_, err := tx.ActiveHolds(ctx, ids)
				time.Sleep(10 * time.Millisecond) // hold the connection a while
				return err
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A key made before migration 0014 becomes an admin key, not revoked,
// with no prefix.
func TestKeysBeforeRolesBecomeAdmin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version >= 14 {
			break
		}
		if _, err := db.ExecContext(ctx, m.SQL); err != nil {
			t.Fatalf("migration %d: %v", m.Version, err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO schema_migrations(version, name) VALUES (?, ?)`, m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO api_keys(id, name, hash, created_at) VALUES ('key-old', 'local', 'h-old', 1)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.View(ctx, func(tx store.Tx) error {
		k, err := tx.GetAPIKeyByHash(ctx, "h-old")
		if err != nil {
			return err
		}
		if k.Role != "admin" || k.Prefix != "" || k.RevokedAt != nil {
			t.Errorf("old key after the migration: %+v; want an admin key", k)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentUpdatesAndClose: Updates from many goroutines at once are
// led and committed in batches by their own callers; a Close in the middle
// waits for the queued ones, refuses the rest, and each Update's write is
// in the file exactly when it reported success.
func TestConcurrentUpdatesAndClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "helmr.db")
	s := openAt(t, path)
	const callers, each = 40, 25
	keys := make([]string, 0, callers*each)
	errs := make([]error, callers*each)
	for i := range callers * each {
		keys = append(keys, fmt.Sprintf("k%d", i))
	}
	var wg sync.WaitGroup
	var committed atomic.Int64
	started := make(chan struct{})
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-started
			for j := range each {
				i := c*each + j
				if errs[i] = s.Update(t.Context(), putMeta(keys[i])); errs[i] == nil {
					committed.Add(1)
				}
			}
		}()
	}
	close(started)
	// Close once some have committed.
	for committed.Load() < callers {
		time.Sleep(100 * time.Microsecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	ok, refused := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, errClosed):
			refused++
		default:
			t.Fatalf("Update %d: %v", i, err)
		}
	}
	if ok == 0 {
		t.Fatal("no Update committed")
	}
	if err := s.Update(t.Context(), putMeta("late")); !errors.Is(err, errClosed) {
		t.Fatalf("Update after Close: %v, want %v", err, errClosed)
	}
	s = openAt(t, path)
	defer s.Close()
	checkOutcomes(t, s, keys, errs)
	t.Logf("%d committed, %d refused by Close", ok, refused)
}

// leadState tells whether an Update leads and how many are queued.
func leadState(s *Store) (leading bool, queued int) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.leading, len(s.queue)
}

// blockedUpdate starts an Update whose function waits for release, and
// returns once it leads.
func blockedUpdate(t *testing.T, s *Store, key string, release chan struct{}) chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		done <- s.Update(t.Context(), func(tx store.Tx) error {
			<-release
			return tx.PutMeta(t.Context(), key, "done")
		})
	}()
	for leading, _ := leadState(s); !leading; leading, _ = leadState(s) {
		time.Sleep(time.Millisecond)
	}
	return done
}

// within fails t unless an Update's outcome comes from done within 10 s
// and is nil; late says what did not happen.
func within(t *testing.T, done chan error, late string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal(late)
	}
}

// TestLeadPassesOn: Updates queued while a leader commits are committed
// after it by their own callers: the leader returns after its own batch
// while the next one is still running, and more than one batch queued
// behind it all commit with no further Update to carry them.
func TestLeadPassesOn(t *testing.T) {
	s := openAt(t, filepath.Join(t.TempDir(), "helmr.db"))
	defer s.Close()
	release, releaseNext := make(chan struct{}), make(chan struct{})
	first := blockedUpdate(t, s, "first", release)
	// Behind it: one Update that blocks too (it heads the next batch),
	// then more than a batch.
	next := make(chan error, 1)
	go func() {
		next <- s.Update(t.Context(), func(tx store.Tx) error {
			<-releaseNext
			return tx.PutMeta(t.Context(), "next", "done")
		})
	}()
	for _, queued := leadState(s); queued < 1; _, queued = leadState(s) {
		time.Sleep(time.Millisecond)
	}
	n := maxBatch + 3
	keys := make([]string, n)
	done := make(chan error, n)
	for i := range n {
		keys[i] = fmt.Sprintf("q%d", i)
		go func() { done <- s.Update(t.Context(), putMeta(keys[i])) }()
	}
	for _, queued := leadState(s); queued < n+1; _, queued = leadState(s) {
		time.Sleep(time.Millisecond)
	}
	close(release)
	// The first leader returns while the batch after it still runs: it
	// passed the lead on instead of committing that batch itself.
	within(t, first, "the first leader did not return after its own batch")
	close(releaseNext)
	if err := <-next; err != nil {
		t.Fatal(err)
	}
	for range n {
		within(t, done, "queued Updates were not committed after their leader's batch")
	}
	checkOutcomes(t, s, append([]string{"first", "next"}, keys...), make([]error, n+2))
}

// TestCloseWaitsForQueued: Close waits for the Updates already queued
// (they commit), and refuses those that come after it began.
func TestCloseWaitsForQueued(t *testing.T) {
	path := filepath.Join(t.TempDir(), "helmr.db")
	s := openAt(t, path)
	release := make(chan struct{})
	first := blockedUpdate(t, s, "first", release)
	keys := []string{"a", "b", "c"}
	done := make(chan error, len(keys))
	for _, k := range keys {
		go func() { done <- s.Update(t.Context(), putMeta(k)) }()
	}
	for _, queued := leadState(s); queued < len(keys); _, queued = leadState(s) {
		time.Sleep(time.Millisecond)
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	for !func() bool { s.wmu.Lock(); defer s.wmu.Unlock(); return s.closed }() {
		time.Sleep(time.Millisecond)
	}
	if err := s.Update(t.Context(), putMeta("late")); !errors.Is(err, errClosed) {
		t.Fatalf("Update after Close began: %v, want %v", err, errClosed)
	}
	select {
	case <-closed:
		t.Fatal("Close returned while Updates were queued")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range keys {
		if err := <-done; err != nil {
			t.Fatalf("an Update queued before Close: %v", err)
		}
	}
	<-closed
	s = openAt(t, path)
	defer s.Close()
	checkOutcomes(t, s, append([]string{"first", "late"}, keys...), []error{nil, errClosed, nil, nil, nil})
}
