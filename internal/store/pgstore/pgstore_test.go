package pgstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/helmr-go/helmr/internal/store"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
	"github.com/helmr-go/helmr/internal/store/sqlitestore"
	"github.com/helmr-go/helmr/internal/store/storetest"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func openAt(t *testing.T, url string) *Store {
	t.Helper()
	s, err := Open(t.Context(), url, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openAt(t, pgtest.URL(t))
	})
}

// TestMigrationsMatchSQLite: both stores have the same migrations, by
// version and name, so that a schema version means the same on both.
func TestMigrationsMatchSQLite(t *testing.T) {
	pg, err := Migrations()
	if err != nil {
		t.Fatalf("Migrations: %v", err)
	}
	lite, err := sqlitestore.Migrations()
	if err != nil {
		t.Fatalf("sqlitestore.Migrations: %v", err)
	}
	if len(pg) == 0 || pg[0].Version != 1 || pg[0].Name != "init" {
		t.Errorf("Migrations() starts with %+v, want 1_init", pg)
	}
	if len(pg) != len(lite) {
		t.Fatalf("pgstore has %d migrations, sqlitestore %d", len(pg), len(lite))
	}
	for i := range pg {
		if pg[i].Version != lite[i].Version || pg[i].Name != lite[i].Name {
			t.Errorf("migration %d: pgstore %04d_%s, sqlitestore %04d_%s", i, pg[i].Version, pg[i].Name, lite[i].Version, lite[i].Name)
		}
		if pg[i].SQL == "" {
			t.Errorf("migration %04d_%s has no SQL", pg[i].Version, pg[i].Name)
		}
	}
}

type migrationRow struct {
	version int
	name    string
}

func readMigrations(t *testing.T, url string) []migrationRow {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), `SELECT version, name FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
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

// TestMigrationsRecorded: opening applies each migration once, and several
// stores opening one database at once do not collide.
func TestMigrationsRecorded(t *testing.T) {
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var want []migrationRow
	for _, m := range ms {
		want = append(want, migrationRow{m.Version, m.Name})
	}
	url := pgtest.URL(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := Open(t.Context(), url, Options{})
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent Open #%d: %v", i, err)
		}
	}
	s := openAt(t, url)
	s.Close()
	got := readMigrations(t, url)
	if len(got) != len(want) {
		t.Fatalf("schema_migrations = %+v, want %+v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("schema_migrations[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestSchemaTooNew(t *testing.T) {
	url := pgtest.URL(t)
	s := openAt(t, url)
	s.Close()
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(t.Context(), `INSERT INTO schema_migrations(version, name) VALUES ($1, 'from_the_future')`, ms[len(ms)-1].Version+1)
	conn.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s, err = Open(t.Context(), url, Options{})
	if !errors.Is(err, store.ErrSchemaTooNew) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open of a newer schema: got %v, want ErrSchemaTooNew", err)
	}
}

// TestReopenKeepsData: data and event sequences survive closing the store;
// Update after Close fails; Close twice is fine.
func TestReopenKeepsData(t *testing.T) {
	url := pgtest.URL(t)
	s := openAt(t, url)
	err := s.Update(t.Context(), func(tx store.Tx) error {
		if err := tx.PutMeta(t.Context(), "instance", "one"); err != nil {
			return err
		}
		return tx.AppendEvent(t.Context(), &store.Event{SessionID: "ses-1", Kind: "session.created"})
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
	s = openAt(t, url)
	defer s.Close()
	err = s.Update(t.Context(), func(tx store.Tx) error {
		if v, err := tx.GetMeta(t.Context(), "instance"); err != nil || v != "one" {
			t.Errorf("GetMeta after reopening = %q, %v", v, err)
		}
		e := &store.Event{SessionID: "ses-1", Kind: "turn.queued"}
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

// TestEventSequencesAcrossStores: two stores on one database (as two nodes
// would be) append to the same Session concurrently; sequences stay
// gapless and unique.
func TestEventSequencesAcrossStores(t *testing.T) {
	url := pgtest.URL(t)
	a, b := openAt(t, url), openAt(t, url)
	defer a.Close()
	defer b.Close()
	const perWorker = 20
	var wg sync.WaitGroup
	for i, s := range []*Store{a, b, a, b} {
		wg.Go(func() {
			for j := range perWorker {
				err := s.Update(t.Context(), func(tx store.Tx) error {
					return tx.AppendEvent(t.Context(), &store.Event{SessionID: "ses-x", Kind: fmt.Sprintf("w%d.%d", i, j)})
				})
				if err != nil {
					t.Errorf("Update: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	err := a.View(t.Context(), func(tx store.Tx) error {
		es, err := tx.ListEvents(t.Context(), "ses-x", 0, 1000)
		if err != nil {
			return err
		}
		if len(es) != 4*perWorker {
			t.Errorf("%d events, want %d", len(es), 4*perWorker)
		}
		for i, e := range es {
			if e.Sequence != int64(i+1) {
				t.Fatalf("event %d has sequence %d", i, e.Sequence)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSessionUpdatesSerialize: Updates of one Session from two stores on
// one database (as two nodes) run one after another, so the engine's
// read-then-write patterns hold: MaxTurnSequence then InsertTurn never
// collides, and a get-or-create by key sees a concurrent create.
func TestSessionUpdatesSerialize(t *testing.T) {
	url := pgtest.URL(t)
	a, b := openAt(t, url), openAt(t, url)
	defer a.Close()
	defer b.Close()
	const perWorker = 15
	var wg sync.WaitGroup
	var created sync.Map
	for i, s := range []*Store{a, b, a, b} {
		wg.Go(func() {
			for j := range perWorker {
				err := s.Update(t.Context(), func(tx store.Tx) error {
					ctx := t.Context()
					seq, err := tx.MaxTurnSequence(ctx, "ses-s")
					if err != nil {
						return err
					}
					tr := &store.Turn{ID: fmt.Sprintf("turn-%d-%d", i, j), SessionID: "ses-s", Sequence: seq + 1, Status: "queued"}
					if err := tx.InsertTurn(ctx, tr); err != nil {
						return fmt.Errorf("InsertTurn(%d): %w", tr.Sequence, err)
					}
					// Get or create by key.
					key := fmt.Sprintf("k%d", j)
					if _, err := tx.GetSessionByKey(ctx, "a", key); err == nil {
						return nil
					} else if !errors.Is(err, store.ErrNotFound) {
						return err
					}
					id := fmt.Sprintf("ses-%d-%d", i, j)
					if err := tx.InsertSession(ctx, &store.Session{ID: id, Agent: "a", Key: key, Status: "open"}); err != nil {
						return fmt.Errorf("InsertSession(%s) after GetSessionByKey found none: %w", key, err)
					}
					created.Store(key, id)
					return nil
				})
				if err != nil {
					t.Errorf("Update: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	err := a.View(t.Context(), func(tx store.Tx) error {
		ts, err := tx.ListTurns(t.Context(), "ses-s", 0, 1000)
		if err != nil {
			return err
		}
		if len(ts) != 4*perWorker {
			t.Errorf("%d Turns, want %d", len(ts), 4*perWorker)
		}
		for j := range perWorker {
			key := fmt.Sprintf("k%d", j)
			s, err := tx.GetSessionByKey(t.Context(), "a", key)
			id, ok := created.Load(key)
			if err != nil || !ok || s.ID != id {
				t.Errorf("GetSessionByKey(%s) = %v, %v; created %v", key, s, err, id)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTokenKeyGetOrCreateSerializes: GetTokenByKey takes its Session's
// lock, so a get-or-create of a Token by idempotency key from two stores
// on one database (as two nodes) sees a concurrent create instead of
// colliding with it.
func TestTokenKeyGetOrCreateSerializes(t *testing.T) {
	url := pgtest.URL(t)
	a, b := openAt(t, url), openAt(t, url)
	defer a.Close()
	defer b.Close()
	const keys = 15
	var wg sync.WaitGroup
	var created sync.Map
	for i, s := range []*Store{a, b, a, b} {
		wg.Go(func() {
			for j := range keys {
				err := s.Update(t.Context(), func(tx store.Tx) error {
					ctx := t.Context()
					key := fmt.Sprintf("k%d", j)
					if _, err := tx.GetTokenByKey(ctx, "ses-t", key); err == nil {
						return nil
					} else if !errors.Is(err, store.ErrNotFound) {
						return err
					}
					id := fmt.Sprintf("tok-%d-%d", i, j)
					tk := &store.Token{ID: id, SessionID: "ses-t", Status: "pending", IdempotencyKey: key}
					if err := tx.InsertToken(ctx, tk); err != nil {
						return fmt.Errorf("InsertToken(%s) after GetTokenByKey found none: %w", key, err)
					}
					created.Store(key, id)
					return nil
				})
				if err != nil {
					t.Errorf("Update: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	err := a.View(t.Context(), func(tx store.Tx) error {
		for j := range keys {
			key := fmt.Sprintf("k%d", j)
			tk, err := tx.GetTokenByKey(t.Context(), "ses-t", key)
			id, ok := created.Load(key)
			if err != nil || !ok || tk.ID != id {
				t.Errorf("GetTokenByKey(%s) = %v, %v; created %v", key, tk, err, id)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestQueuedWriteFailure: a queued write that fails is reported by the next
// call and by the commit, and the Update stores nothing.
func TestQueuedWriteFailure(t *testing.T) {
	s := openAt(t, pgtest.URL(t))
	defer s.Close()
	ctx := t.Context()
	err := s.Update(ctx, func(stx store.Tx) error {
		if err := stx.PutMeta(ctx, "a", "1"); err != nil {
			t.Fatalf("PutMeta: %v", err)
		}
		// A NULL key violates the primary key's NOT NULL.
		if err := stx.(*tx).exec(ctx, "", `INSERT INTO meta(key, value) VALUES (NULL, 'x')`); err != nil {
			t.Fatalf("queued write refused early: %v", err)
		}
		if _, err := stx.GetMeta(ctx, "a"); err == nil || errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetMeta after a failed queued write = %v, want its error", err)
		}
		if err := stx.PutMeta(ctx, "b", "2"); err == nil {
			t.Errorf("PutMeta in a failed transaction succeeded")
		}
		return nil
	})
	if err == nil {
		t.Fatal("Update with a failed queued write succeeded")
	}
	err = s.View(ctx, func(stx store.Tx) error {
		_, err := stx.GetMeta(ctx, "a")
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetMeta(a) after the failed Update = %v, want ErrNotFound", err)
	}
	// The store still takes writes afterwards.
	if err := s.Update(ctx, func(stx store.Tx) error { return stx.PutMeta(ctx, "a", "3") }); err != nil {
		t.Errorf("Update after a failed one: %v", err)
	}
}

// TestReadHasNoSnapshot: each read of a Read sees what committed before
// it, even after the Read began (View would not).
func TestReadHasNoSnapshot(t *testing.T) {
	s := openAt(t, pgtest.URL(t))
	defer s.Close()
	ctx := t.Context()
	put := func(v string) {
		t.Helper()
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutMeta(ctx, "k", v) }); err != nil {
			t.Fatal(err)
		}
	}
	put("v1")
	err := s.Read(ctx, func(tx store.Tx) error {
		if v, err := tx.GetMeta(ctx, "k"); err != nil || v != "v1" {
			t.Errorf("first read = %q, %v", v, err)
		}
		put("v2")
		if v, err := tx.GetMeta(ctx, "k"); err != nil || v != "v2" {
			t.Errorf("read after a commit = %q, %v; want v2", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
