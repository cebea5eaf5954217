// Package storetest is the conformance suite of store.Store. Every
// implementation runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return openTemp(t) })
//	}
//
// The suite uses only the store package's interface, so it holds every
// implementation (SQLite, PostgreSQL) to the same behaviour.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/helmr-go/helmr/internal/store"
)

// Run runs the conformance suite. open must return a new, empty store for
// the calling (sub)test; Run closes it when that test ends.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Meta", testMeta},
		{"APIKeys", testAPIKeys},
		{"Deployments", testDeployments},
		{"ListDeployments", testListDeployments},
		{"Sessions", testSessions},
		{"SessionKeys", testSessionKeys},
		{"UpdateSession", testUpdateSession},
		{"ListSessions", testListSessions},
		{"Turns", testTurns},
		{"UpdateTurn", testUpdateTurn},
		{"ListTurns", testListTurns},
		{"TurnsByStatus", testTurnsByStatus},
		{"Messages", testMessages},
		{"PendingMessages", testPendingMessages},
		{"Events", testEvents},
		{"Idempotency", testIdempotency},
		{"Processes", testProcesses},
		{"Asks", testAsks},
		{"ListAsks", testListAsks},
		{"Tokens", testTokens},
		{"ExpiringTokens", testExpiringTokens},
		{"Waits", testWaits},
		{"OpenWaits", testOpenWaits},
		{"Holds", testHolds},
		{"Computers", testComputers},
		{"Commands", testCommands},
		{"CommandLogs", testCommandLogs},
		{"Leases", testLeases},
		{"UnleasedWork", testUnleasedWork},
		{"Binaries", testBinaries},
		{"Heartbeats", testHeartbeats},
		{"ConcurrentIdempotency", testConcurrentIdempotency},
		{"UpdateErrorWritesNothing", testUpdateErrorWritesNothing},
		{"UpdateCanceledContext", testUpdateCanceledContext},
		{"TxUsableAfterError", testTxUsableAfterError},
		{"ViewIsReadOnly", testViewIsReadOnly},
		{"Read", testRead},
		{"ViewIsSnapshot", testViewIsSnapshot},
		{"ConcurrentUpdates", testConcurrentUpdates},
		{"UUIDIDs", testUUIDIDs},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

// --- helpers ---

var errRollback = errors.New("storetest: deliberate failure")

func update(t *testing.T, s store.Store, fn func(ctx context.Context, tx store.Tx) error) {
	t.Helper()
	ctx := t.Context()
	if err := s.Update(ctx, func(tx store.Tx) error { return fn(ctx, tx) }); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func view(t *testing.T, s store.Store, fn func(ctx context.Context, tx store.Tx) error) {
	t.Helper()
	ctx := t.Context()
	if err := s.View(ctx, func(tx store.Tx) error { return fn(ctx, tx) }); err != nil {
		t.Fatalf("View: %v", err)
	}
}

// baseTime has nanoseconds and a non-UTC zone: stores keep microseconds and
// return UTC.
var baseTime = time.Date(2025, 6, 7, 8, 9, 10, 123456789, time.FixedZone("X", 2*3600+30*60))

// at returns baseTime plus n seconds (and n nanoseconds, to be truncated).
func at(n int) time.Time {
	return baseTime.Add(time.Duration(n)*time.Second + time.Duration(n)*time.Nanosecond)
}

// stored is t as a store returns it: microseconds, UTC.
func stored(t time.Time) time.Time { return t.Truncate(time.Microsecond).UTC() }

func storedPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := stored(*t)
	return &v
}

func ptr[T any](v T) *T { return &v }

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// check reports a difference between got and want, field by field.
func check(t *testing.T, what string, got, want any) {
	t.Helper()
	if d := diff(reflect.ValueOf(got), reflect.ValueOf(want), ""); d != "" {
		t.Errorf("%s differs:%s", what, d)
	}
}

func diff(got, want reflect.Value, path string) string {
	if !got.IsValid() || !want.IsValid() {
		if got.IsValid() != want.IsValid() {
			return fmt.Sprintf("\n  %s: got %s, want %s", path, show(got), show(want))
		}
		return ""
	}
	if got.Type() != want.Type() {
		return fmt.Sprintf("\n  %s: got type %s, want %s", path, got.Type(), want.Type())
	}
	switch {
	case got.Type() == reflect.TypeFor[time.Time]():
	case got.Kind() == reflect.Pointer && !got.IsNil() && !want.IsNil():
		return diff(got.Elem(), want.Elem(), path)
	case got.Kind() == reflect.Struct:
		var b strings.Builder
		for i := range got.NumField() {
			b.WriteString(diff(got.Field(i), want.Field(i), path+"."+got.Type().Field(i).Name))
		}
		return b.String()
	case got.Kind() == reflect.Slice && got.Type().Elem().Kind() != reflect.Uint8:
		if got.Len() != want.Len() {
			return fmt.Sprintf("\n  %s: got %d elements, want %d:\n    got  %s\n    want %s", path, got.Len(), want.Len(), show(got), show(want))
		}
		var b strings.Builder
		for i := range got.Len() {
			b.WriteString(diff(got.Index(i), want.Index(i), fmt.Sprintf("%s[%d]", path, i)))
		}
		return b.String()
	}
	if !reflect.DeepEqual(got.Interface(), want.Interface()) {
		return fmt.Sprintf("\n  %s: got %s, want %s", path, show(got), show(want))
	}
	return ""
}

func show(v reflect.Value) string {
	if !v.IsValid() {
		return "<invalid>"
	}
	switch {
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8:
		if v.IsNil() {
			return "nil"
		}
		return fmt.Sprintf("%q", v.Bytes())
	case v.Kind() == reflect.Pointer && v.IsNil():
		return "nil"
	case v.Kind() == reflect.Pointer:
		return "&" + show(v.Elem())
	case v.Type() == reflect.TypeFor[time.Time]():
		tm := v.Interface().(time.Time)
		return tm.Format(time.RFC3339Nano) + " (" + tm.Location().String() + ")"
	}
	return fmt.Sprintf("%+v", v.Interface())
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: got error %v, want %v", what, err, target)
	}
}

func wantOK(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

func newSession(id, agent, key string) *store.Session {
	return &store.Session{
		ID:                 id,
		DeploymentID:       "dep-1",
		RootSessionID:      id,
		Agent:              agent,
		Template:           "default",
		Key:                key,
		Status:             "open",
		CloseAfterIdle:     "7d",
		HibernateAfterIdle: "30s",
		CreatedAt:          at(0),
	}
}

func newTurn(sessionID, id string, seq int64, status string) *store.Turn {
	return &store.Turn{
		ID:        id,
		SessionID: sessionID,
		Sequence:  seq,
		Status:    status,
		Input:     raw(`"hello"`),
		Source:    raw(`{"kind":"user"}`),
		CreatedAt: at(int(seq)),
	}
}

func storedSession(s store.Session) store.Session {
	s.CreatedAt = stored(s.CreatedAt)
	s.IdleSince = storedPtr(s.IdleSince)
	return s
}

func storedTurn(tr store.Turn) store.Turn {
	tr.CreatedAt = stored(tr.CreatedAt)
	tr.StartedAt = storedPtr(tr.StartedAt)
	tr.TerminalAt = storedPtr(tr.TerminalAt)
	return tr
}

func storedMessage(m store.Message) store.Message {
	m.CreatedAt = stored(m.CreatedAt)
	return m
}

func sessionIDs(ss []store.Session) []string {
	ids := []string{}
	for _, s := range ss {
		ids = append(ids, s.ID)
	}
	return ids
}

func turnIDs(ts []store.Turn) []string {
	ids := []string{}
	for _, tr := range ts {
		ids = append(ids, tr.ID)
	}
	return ids
}

func messageIDs(ms []store.Message) []string {
	ids := []string{}
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return ids
}

func deploymentIDs(ds []store.Deployment) []string {
	ids := []string{}
	for _, d := range ds {
		ids = append(ids, d.ID)
	}
	return ids
}

func eventSeqs(es []store.Event) []int64 {
	seqs := []int64{}
	for _, e := range es {
		seqs = append(seqs, e.Sequence)
	}
	return seqs
}

func checkIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if got == nil {
		got = []string{}
	}
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: got %q, want %q", what, got, want)
	}
}

// --- meta, API keys, deployments ---

func testMeta(t *testing.T, s store.Store) {
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.GetMeta(ctx, "missing")
		wantErr(t, "GetMeta(missing)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "PutMeta(a)", tx.PutMeta(ctx, "a", "one"))
		wantOK(t, "PutMeta(b)", tx.PutMeta(ctx, "b", ""))
		v, err := tx.GetMeta(ctx, "a")
		if err != nil || v != "one" {
			t.Errorf("GetMeta(a) in the writing Update = %q, %v; want one", v, err)
		}
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "PutMeta(a) again", tx.PutMeta(ctx, "a", "two"))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for key, want := range map[string]string{"a": "two", "b": ""} {
			v, err := tx.GetMeta(ctx, key)
			if err != nil || v != want {
				t.Errorf("GetMeta(%s) = %q, %v; want %q", key, v, err, want)
			}
		}
		return nil
	})
}

func testAPIKeys(t *testing.T, s store.Store) {
	k := &store.APIKey{ID: "key-1", Name: "dev laptop", Hash: "sha256:aaaa", CreatedAt: at(1)}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "InsertAPIKey", tx.InsertAPIKey(ctx, k))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetAPIKeyByHash(ctx, k.Hash)
		if err != nil {
			t.Fatalf("GetAPIKeyByHash: %v", err)
		}
		want := *k
		want.CreatedAt = stored(k.CreatedAt)
		check(t, "APIKey", *got, want)
		_, err = tx.GetAPIKeyByHash(ctx, "sha256:bbbb")
		wantErr(t, "GetAPIKeyByHash(missing)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		err := tx.InsertAPIKey(ctx, &store.APIKey{ID: "key-2", Name: "other", Hash: k.Hash, CreatedAt: at(2)})
		wantErr(t, "InsertAPIKey(same hash)", err, store.ErrDuplicate)
		err = tx.InsertAPIKey(ctx, &store.APIKey{ID: k.ID, Name: "other", Hash: "sha256:cccc", CreatedAt: at(2)})
		wantErr(t, "InsertAPIKey(same id)", err, store.ErrDuplicate)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.GetAPIKeyByHash(ctx, "sha256:cccc")
		wantErr(t, "GetAPIKeyByHash(refused duplicate)", err, store.ErrNotFound)
		got, err := tx.GetAPIKeyByHash(ctx, k.Hash)
		if err != nil || got.ID != k.ID || got.Name != k.Name {
			t.Errorf("GetAPIKeyByHash after refused duplicates = %+v, %v; want the original", got, err)
		}
		return nil
	})
}

func testDeployments(t *testing.T, s store.Store) {
	d := &store.Deployment{
		ID:         "dep-1",
		Digest:     "sha256:1111",
		Manifest:   raw(`{"version":"helmr.manifest.v1","agents":[{"id":"a"}]}`),
		BinaryPath: "/var/lib/helmr/deployments/dep-1/agent",
		CreatedAt:  at(3),
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "InsertDeployment", tx.InsertDeployment(ctx, d))
		return nil
	})
	want := *d
	want.CreatedAt = stored(d.CreatedAt)
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetDeployment(ctx, d.ID)
		if err != nil {
			t.Fatalf("GetDeployment: %v", err)
		}
		check(t, "GetDeployment", *got, want)
		got, err = tx.GetDeploymentByDigest(ctx, d.Digest, "")
		if err != nil {
			t.Fatalf("GetDeploymentByDigest: %v", err)
		}
		check(t, "GetDeploymentByDigest", *got, want)
		_, err = tx.GetDeployment(ctx, "dep-missing")
		wantErr(t, "GetDeployment(missing)", err, store.ErrNotFound)
		_, err = tx.GetDeploymentByDigest(ctx, "sha256:missing", "")
		wantErr(t, "GetDeploymentByDigest(missing)", err, store.ErrNotFound)
		_, err = tx.GetDeploymentByDigest(ctx, d.Digest, "sha256:other-sources")
		wantErr(t, "GetDeploymentByDigest(other sources)", err, store.ErrNotFound)
		return nil
	})
	// The same binary with sources is another Deployment.
	withSrc := *d
	withSrc.ID, withSrc.SourcesDigest, withSrc.CreatedAt = "dep-src", "sha256:aaaa", at(4)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "InsertDeployment(same binary, with sources)", tx.InsertDeployment(ctx, &withSrc))
		return nil
	})
	wantSrc := withSrc
	wantSrc.CreatedAt = stored(withSrc.CreatedAt)
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetDeploymentByDigest(ctx, d.Digest, "sha256:aaaa")
		if err != nil {
			t.Fatalf("GetDeploymentByDigest(with sources): %v", err)
		}
		check(t, "GetDeploymentByDigest(with sources)", *got, wantSrc)
		got, err = tx.GetDeployment(ctx, "dep-src")
		if err != nil {
			t.Fatalf("GetDeployment(with sources): %v", err)
		}
		check(t, "GetDeployment(with sources)", *got, wantSrc)
		got, err = tx.GetDeploymentByDigest(ctx, d.Digest, "")
		if err != nil {
			t.Fatalf("GetDeploymentByDigest(without sources): %v", err)
		}
		check(t, "GetDeploymentByDigest(without sources) after one with sources", *got, want)
		ds, err := tx.ListDeployments(ctx, "", 10)
		if err != nil || len(ds) != 2 {
			t.Fatalf("ListDeployments = %v, %v; want 2", ds, err)
		}
		check(t, "listed deployment with sources", ds[0], wantSrc)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		dup := *d
		dup.ID = "dep-2"
		wantErr(t, "InsertDeployment(same digest)", tx.InsertDeployment(ctx, &dup), store.ErrDuplicate)
		dup = withSrc
		dup.ID = "dep-3"
		wantErr(t, "InsertDeployment(same digest and sources)", tx.InsertDeployment(ctx, &dup), store.ErrDuplicate)
		dup = *d
		dup.Digest = "sha256:2222"
		wantErr(t, "InsertDeployment(same id)", tx.InsertDeployment(ctx, &dup), store.ErrDuplicate)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.GetDeployment(ctx, "dep-2")
		wantErr(t, "GetDeployment(refused duplicate)", err, store.ErrNotFound)
		got, err := tx.GetDeployment(ctx, d.ID)
		if err != nil {
			t.Fatalf("GetDeployment: %v", err)
		}
		check(t, "GetDeployment after refused duplicates", *got, want)
		return nil
	})
}

func testListDeployments(t *testing.T, s store.Store) {
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		ds, err := tx.ListDeployments(ctx, "", 10)
		if err != nil || len(ds) != 0 {
			t.Errorf("ListDeployments on an empty store = %d deployments, %v; want none", len(ds), err)
		}
		return nil
	})
	// Inserted out of order; IDs sort by creation.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, i := range []int{3, 1, 5, 2, 4} {
			d := &store.Deployment{ID: fmt.Sprintf("dep-%d", i), Digest: fmt.Sprintf("sha256:%d", i),
				Manifest: raw(`{}`), BinaryPath: "bin", CreatedAt: at(i)}
			wantOK(t, "InsertDeployment", tx.InsertDeployment(ctx, d))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []struct {
			before string
			limit  int
			want   []string
		}{
			{"", 10, []string{"dep-5", "dep-4", "dep-3", "dep-2", "dep-1"}},
			{"", 2, []string{"dep-5", "dep-4"}},
			{"dep-4", 2, []string{"dep-3", "dep-2"}},
			{"dep-2", 10, []string{"dep-1"}},
			{"dep-1", 10, nil},
		} {
			ds, err := tx.ListDeployments(ctx, c.before, c.limit)
			if err != nil {
				t.Errorf("ListDeployments(%q, %d): %v", c.before, c.limit, err)
				continue
			}
			checkIDs(t, fmt.Sprintf("ListDeployments(%q, %d)", c.before, c.limit), deploymentIDs(ds), c.want)
		}
		ds, err := tx.ListDeployments(ctx, "", 1)
		if err != nil || len(ds) != 1 {
			t.Fatalf("ListDeployments(\"\", 1) = %v, %v", ds, err)
		}
		check(t, "listed deployment", ds[0], store.Deployment{ID: "dep-5", Digest: "sha256:5", Manifest: raw(`{}`), BinaryPath: "bin", CreatedAt: stored(at(5))})
		return nil
	})
}

// --- sessions ---

func testSessions(t *testing.T, s store.Store) {
	full := &store.Session{
		ID:                 "ses-1",
		DeploymentID:       "dep-1",
		RootSessionID:      "ses-0",
		Agent:              "support",
		Template:           "python",
		ComputerID:         "cmp-1",
		ParentSessionID:    "ses-0",
		RequesterSessionID: "ses-9",
		Key:                "ticket-42",
		Status:             "open",
		CloseAfterIdle:     "never",
		HibernateAfterIdle: "15m",
		MaxTurnDuration:    "1h",
		IdleSince:          ptr(at(7)),
		InitialTurnID:      "turn-1",
		CreatedAt:          at(6),
	}
	minimal := &store.Session{
		ID:                 "ses-2",
		DeploymentID:       "dep-1",
		RootSessionID:      "ses-2",
		Agent:              "support",
		Template:           "default",
		Status:             "closed",
		CloseAfterIdle:     "7d",
		HibernateAfterIdle: "30s",
		CreatedAt:          at(8),
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "InsertSession(full)", tx.InsertSession(ctx, full))
		wantOK(t, "InsertSession(minimal)", tx.InsertSession(ctx, minimal))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, want := range []*store.Session{full, minimal} {
			got, err := tx.GetSession(ctx, want.ID)
			if err != nil {
				t.Errorf("GetSession(%s): %v", want.ID, err)
				continue
			}
			check(t, "GetSession("+want.ID+")", *got, storedSession(*want))
		}
		got, err := tx.GetSessionByKey(ctx, "support", "ticket-42")
		if err != nil {
			t.Fatalf("GetSessionByKey: %v", err)
		}
		check(t, "GetSessionByKey", *got, storedSession(*full))
		_, err = tx.GetSession(ctx, "ses-missing")
		wantErr(t, "GetSession(missing)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		dup := *minimal
		dup.Agent = "other"
		wantErr(t, "InsertSession(same id)", tx.InsertSession(ctx, &dup), store.ErrDuplicate)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetSession(ctx, minimal.ID)
		if err != nil {
			t.Fatalf("GetSession: %v", err)
		}
		check(t, "GetSession after refused duplicate", *got, storedSession(*minimal))
		return nil
	})
}

func testSessionKeys(t *testing.T, s store.Store) {
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "InsertSession(a, k)", tx.InsertSession(ctx, newSession("ses-1", "a", "k")))
		// The same key under another agent is another Session.
		wantOK(t, "InsertSession(b, k)", tx.InsertSession(ctx, newSession("ses-2", "b", "k")))
		// Sessions without a key never collide.
		wantOK(t, "InsertSession(a, '') #1", tx.InsertSession(ctx, newSession("ses-3", "a", "")))
		wantOK(t, "InsertSession(a, '') #2", tx.InsertSession(ctx, newSession("ses-4", "a", "")))
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		err := tx.InsertSession(ctx, newSession("ses-5", "a", "k"))
		wantErr(t, "InsertSession(a, k) again", err, store.ErrDuplicate)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []struct{ agent, key, want string }{{"a", "k", "ses-1"}, {"b", "k", "ses-2"}} {
			got, err := tx.GetSessionByKey(ctx, c.agent, c.key)
			if err != nil || got.ID != c.want {
				t.Errorf("GetSessionByKey(%s, %s) = %v, %v; want %s", c.agent, c.key, got, err, c.want)
			}
		}
		_, err := tx.GetSessionByKey(ctx, "c", "k")
		wantErr(t, "GetSessionByKey(other agent)", err, store.ErrNotFound)
		_, err = tx.GetSessionByKey(ctx, "a", "other")
		wantErr(t, "GetSessionByKey(other key)", err, store.ErrNotFound)
		_, err = tx.GetSessionByKey(ctx, "a", "")
		wantErr(t, "GetSessionByKey(empty key)", err, store.ErrNotFound)
		_, err = tx.GetSession(ctx, "ses-5")
		wantErr(t, "GetSession(refused duplicate key)", err, store.ErrNotFound)
		return nil
	})
}

func testUpdateSession(t *testing.T, s store.Store) {
	ses := newSession("ses-1", "a", "k")
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "InsertSession", tx.InsertSession(ctx, ses))
		wantOK(t, "InsertSession(other)", tx.InsertSession(ctx, newSession("ses-2", "a", "")))
		return nil
	})
	changed := *ses
	changed.ComputerID = "cmp-7"
	changed.Status = "closing"
	changed.IdleSince = ptr(at(9))
	changed.InitialTurnID = "turn-1"
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateSession", tx.UpdateSession(ctx, &changed))
		got, err := tx.GetSession(ctx, ses.ID)
		if err != nil {
			t.Fatalf("GetSession in the writing Update: %v", err)
		}
		check(t, "GetSession in the writing Update", *got, storedSession(changed))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetSession(ctx, ses.ID)
		if err != nil {
			t.Fatalf("GetSession: %v", err)
		}
		check(t, "updated Session", *got, storedSession(changed))
		other, err := tx.GetSession(ctx, "ses-2")
		if err != nil {
			t.Fatalf("GetSession(other): %v", err)
		}
		check(t, "other Session", *other, storedSession(*newSession("ses-2", "a", "")))
		return nil
	})
	// SetSessionIdleSince changes the idle time alone.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "SetSessionIdleSince", tx.SetSessionIdleSince(ctx, ses.ID, ptr(at(11))))
		got, err := tx.GetSession(ctx, ses.ID)
		if err != nil {
			t.Fatalf("GetSession: %v", err)
		}
		want := changed
		want.IdleSince = ptr(at(11))
		check(t, "Session after SetSessionIdleSince", *got, storedSession(want))
		wantOK(t, "SetSessionIdleSince(nil)", tx.SetSessionIdleSince(ctx, ses.ID, nil))
		if got, _ := tx.GetSession(ctx, ses.ID); got.IdleSince != nil {
			t.Errorf("IdleSince after clearing: %v", got.IdleSince)
		}
		return nil
	})
	// IdleSince goes back to nil.
	changed.IdleSince = nil
	changed.Status = "closed"
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateSession(clear idle)", tx.UpdateSession(ctx, &changed))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetSession(ctx, ses.ID)
		if err != nil {
			t.Fatalf("GetSession: %v", err)
		}
		check(t, "Session with IdleSince cleared", *got, storedSession(changed))
		return nil
	})
}

func testListSessions(t *testing.T, s store.Store) {
	type row struct{ id, agent, key, status, parent, requester, computer string }
	rows := []row{
		{"ses-01", "a", "k1", "open", "", "", "cmp-1"},
		{"ses-02", "a", "", "closed", "", "", ""},
		{"ses-03", "b", "k1", "open", "ses-01", "ses-01", "cmp-2"},
		{"ses-04", "a", "k2", "closing", "ses-01", "ses-03", "cmp-1"},
		{"ses-05", "b", "", "open", "ses-03", "ses-01", ""},
		{"ses-06", "a", "", "open", "", "ses-03", "cmp-1"},
		{"ses-07", "c", "k3", "closed", "ses-01", "", "cmp-2"},
		{"ses-08", "a", "k3", "open", "", "", "cmp-1"},
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		// Insert in reverse so that insertion order is not ID order.
		for _, r := range slices.Backward(rows) {
			ses := newSession(r.id, r.agent, r.key)
			ses.Status, ses.ParentSessionID, ses.RequesterSessionID, ses.ComputerID = r.status, r.parent, r.requester, r.computer
			wantOK(t, "InsertSession("+r.id+")", tx.InsertSession(ctx, ses))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []struct {
			name string
			f    store.SessionFilter
			want []string
		}{
			{"all", store.SessionFilter{Limit: 100}, []string{"ses-01", "ses-02", "ses-03", "ses-04", "ses-05", "ses-06", "ses-07", "ses-08"}},
			{"agent", store.SessionFilter{Agent: "a", Limit: 100}, []string{"ses-01", "ses-02", "ses-04", "ses-06", "ses-08"}},
			{"key", store.SessionFilter{Key: "k1", Limit: 100}, []string{"ses-01", "ses-03"}},
			{"agent and key", store.SessionFilter{Agent: "a", Key: "k3", Limit: 100}, []string{"ses-08"}},
			{"one status", store.SessionFilter{Statuses: []string{"closed"}, Limit: 100}, []string{"ses-02", "ses-07"}},
			{"statuses", store.SessionFilter{Statuses: []string{"open", "closing"}, Limit: 100}, []string{"ses-01", "ses-03", "ses-04", "ses-05", "ses-06", "ses-08"}},
			{"parent", store.SessionFilter{ParentSessionID: "ses-01", Limit: 100}, []string{"ses-03", "ses-04", "ses-07"}},
			{"requester", store.SessionFilter{RequesterSessionID: "ses-03", Limit: 100}, []string{"ses-04", "ses-06"}},
			{"parent and requester", store.SessionFilter{ParentSessionID: "ses-01", RequesterSessionID: "ses-01", Limit: 100}, []string{"ses-03"}},
			{"agent and statuses", store.SessionFilter{Agent: "b", Statuses: []string{"open"}, Limit: 100}, []string{"ses-03", "ses-05"}},
			{"no match", store.SessionFilter{Agent: "zzz", Limit: 100}, nil},
			{"limit", store.SessionFilter{Limit: 3}, []string{"ses-01", "ses-02", "ses-03"}},
			{"after", store.SessionFilter{AfterID: "ses-03", Limit: 3}, []string{"ses-04", "ses-05", "ses-06"}},
			{"after last", store.SessionFilter{AfterID: "ses-08", Limit: 3}, nil},
			{"after with filter", store.SessionFilter{Agent: "a", AfterID: "ses-02", Limit: 2}, []string{"ses-04", "ses-06"}},
			{"after with statuses", store.SessionFilter{Statuses: []string{"open"}, AfterID: "ses-05", Limit: 100}, []string{"ses-06", "ses-08"}},
			{"computer", store.SessionFilter{ComputerID: "cmp-1", Limit: 100}, []string{"ses-01", "ses-04", "ses-06", "ses-08"}},
			{"other computer", store.SessionFilter{ComputerID: "cmp-2", Limit: 100}, []string{"ses-03", "ses-07"}},
			{"computer and statuses", store.SessionFilter{ComputerID: "cmp-1", Statuses: []string{"open"}, Limit: 100}, []string{"ses-01", "ses-06", "ses-08"}},
			{"computer and agent", store.SessionFilter{ComputerID: "cmp-2", Agent: "c", Limit: 100}, []string{"ses-07"}},
			{"computer and parent", store.SessionFilter{ComputerID: "cmp-1", ParentSessionID: "ses-01", Limit: 100}, []string{"ses-04"}},
			{"computer after", store.SessionFilter{ComputerID: "cmp-1", AfterID: "ses-01", Limit: 2}, []string{"ses-04", "ses-06"}},
			{"computer after last", store.SessionFilter{ComputerID: "cmp-1", AfterID: "ses-08", Limit: 2}, nil},
			{"no such computer", store.SessionFilter{ComputerID: "cmp-missing", Limit: 100}, nil},
		} {
			ss, err := tx.ListSessions(ctx, c.f)
			if err != nil {
				t.Errorf("ListSessions(%s): %v", c.name, err)
				continue
			}
			checkIDs(t, "ListSessions("+c.name+")", sessionIDs(ss), c.want)
		}
		// Paging through everything with a small page visits each Session once.
		var all []string
		f := store.SessionFilter{Statuses: []string{"open", "closed"}, Limit: 2}
		for range 10 {
			ss, err := tx.ListSessions(ctx, f)
			if err != nil {
				t.Fatalf("ListSessions: %v", err)
			}
			if len(ss) == 0 {
				break
			}
			all = append(all, sessionIDs(ss)...)
			f.AfterID = ss[len(ss)-1].ID
		}
		checkIDs(t, "paged ListSessions", all, []string{"ses-01", "ses-02", "ses-03", "ses-05", "ses-06", "ses-07", "ses-08"})
		// Listed rows carry every field.
		ss, err := tx.ListSessions(ctx, store.SessionFilter{Key: "k2", Limit: 1})
		if err != nil || len(ss) != 1 {
			t.Fatalf("ListSessions(k2) = %v, %v", ss, err)
		}
		want := newSession("ses-04", "a", "k2")
		want.Status, want.ParentSessionID, want.RequesterSessionID, want.ComputerID = "closing", "ses-01", "ses-03", "cmp-1"
		check(t, "listed Session", ss[0], storedSession(*want))
		return nil
	})
}

// --- turns ---

func testTurns(t *testing.T, s store.Store) {
	full := &store.Turn{
		ID:                 "turn-1",
		SessionID:          "ses-1",
		Sequence:           1,
		Status:             "completed",
		Input:              raw(`[{"type":"text","text":"hi"}]`),
		Source:             raw(`{"kind":"api_key"}`),
		CreatedAt:          at(10),
		StartedAt:          ptr(at(11)),
		TerminalAt:         ptr(at(12)),
		Result:             raw(`{"answer":42,"list":[1,2.5,"x"],"nested":{"ok":true}}`),
		Response:           raw(`[{"type":"json","value":{"a":null}}]`),
		ResponseStaged:     true,
		ErrorCode:          "handler_failed",
		ErrorMessage:       "it broke: \"quoted\" and ünïcode",
		OutputBytes:        123456,
		LastOp:             77,
		Waited:             true,
		Messaged:           true,
		InterruptRequested: true,
	}
	// Nil JSON and nil times stay nil.
	minimal := &store.Turn{ID: "turn-2", SessionID: "ses-1", Sequence: 2, Status: "queued", CreatedAt: at(13)}
	// JSON null and empty values are not nil.
	empties := &store.Turn{ID: "turn-3", SessionID: "ses-1", Sequence: 3, Status: "queued",
		Input: raw(`null`), Source: raw(`{}`), Result: raw(`""`), Response: raw(`[]`), CreatedAt: at(14)}
	other := &store.Turn{ID: "turn-4", SessionID: "ses-2", Sequence: 1, Status: "running", Input: raw(`1`), CreatedAt: at(15)}
	all := []*store.Turn{full, minimal, empties, other}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, tr := range all {
			wantOK(t, "InsertTurn("+tr.ID+")", tx.InsertTurn(ctx, tr))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, want := range all {
			got, err := tx.GetTurn(ctx, want.SessionID, want.ID)
			if err != nil {
				t.Errorf("GetTurn(%s): %v", want.ID, err)
				continue
			}
			check(t, "GetTurn("+want.ID+")", *got, storedTurn(*want))
		}
		_, err := tx.GetTurn(ctx, "ses-1", "turn-missing")
		wantErr(t, "GetTurn(missing)", err, store.ErrNotFound)
		_, err = tx.GetTurn(ctx, "ses-2", "turn-1")
		wantErr(t, "GetTurn(other Session's Turn)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		err := tx.InsertTurn(ctx, newTurn("ses-3", "turn-1", 1, "queued"))
		wantErr(t, "InsertTurn(same id, other Session)", err, store.ErrDuplicate)
		err = tx.InsertTurn(ctx, newTurn("ses-1", "turn-9", 2, "queued"))
		wantErr(t, "InsertTurn(same Session and sequence)", err, store.ErrDuplicate)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.GetTurn(ctx, "ses-1", "turn-9")
		wantErr(t, "GetTurn(refused duplicate)", err, store.ErrNotFound)
		_, err = tx.GetTurn(ctx, "ses-3", "turn-1")
		wantErr(t, "GetTurn(refused duplicate id)", err, store.ErrNotFound)
		got, err := tx.GetTurn(ctx, "ses-1", "turn-2")
		if err != nil {
			t.Fatalf("GetTurn: %v", err)
		}
		check(t, "GetTurn after refused duplicates", *got, storedTurn(*minimal))
		return nil
	})
}

func testUpdateTurn(t *testing.T, s store.Store) {
	tr := newTurn("ses-1", "turn-1", 1, "queued")
	sibling := newTurn("ses-1", "turn-2", 2, "queued")
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "InsertTurn", tx.InsertTurn(ctx, tr))
		wantOK(t, "InsertTurn(sibling)", tx.InsertTurn(ctx, sibling))
		return nil
	})
	// queued → running → completed with every mutable field set.
	running := *tr
	running.Status = "running"
	running.StartedAt = ptr(at(20))
	running.Response = raw(`[{"type":"text","text":"draft"}]`)
	running.OutputBytes = 10
	running.LastOp = 3
	running.Waited = false
	running.Messaged = true
	running.InterruptRequested = false
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateTurn(running)", tx.UpdateTurn(ctx, &running))
		got, err := tx.GetTurn(ctx, tr.SessionID, tr.ID)
		if err != nil {
			t.Fatalf("GetTurn in the writing Update: %v", err)
		}
		check(t, "GetTurn in the writing Update", *got, storedTurn(running))
		return nil
	})
	done := running
	done.Status = "failed"
	done.TerminalAt = ptr(at(21))
	done.Result = raw(`{"partial":true}`)
	done.Response = raw(`[{"type":"text","text":"final"}]`)
	done.ResponseStaged = true
	done.ErrorCode = "deadline_exceeded"
	done.ErrorMessage = "took too long"
	done.OutputBytes = 1 << 40
	done.LastOp = 1 << 33
	done.Waited = true
	done.Messaged = false
	done.InterruptRequested = true
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateTurn(failed)", tx.UpdateTurn(ctx, &done))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetTurn(ctx, tr.SessionID, tr.ID)
		if err != nil {
			t.Fatalf("GetTurn: %v", err)
		}
		check(t, "updated Turn", *got, storedTurn(done))
		got, err = tx.GetTurn(ctx, sibling.SessionID, sibling.ID)
		if err != nil {
			t.Fatalf("GetTurn(sibling): %v", err)
		}
		check(t, "sibling Turn", *got, storedTurn(*sibling))
		return nil
	})
	// Pointers and JSON go back to nil.
	cleared := done
	cleared.StartedAt, cleared.TerminalAt, cleared.Result, cleared.Response = nil, nil, nil, nil
	cleared.ResponseStaged, cleared.ErrorCode, cleared.ErrorMessage = false, "", ""
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateTurn(cleared)", tx.UpdateTurn(ctx, &cleared))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetTurn(ctx, tr.SessionID, tr.ID)
		if err != nil {
			t.Fatalf("GetTurn: %v", err)
		}
		check(t, "cleared Turn", *got, storedTurn(cleared))
		return nil
	})
}

func testListTurns(t *testing.T, s store.Store) {
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, seq := range []int64{3, 1, 5, 2, 4} {
			wantOK(t, "InsertTurn", tx.InsertTurn(ctx, newTurn("ses-a", fmt.Sprintf("a-%d", seq), seq, "completed")))
		}
		for _, seq := range []int64{1, 2} {
			wantOK(t, "InsertTurn", tx.InsertTurn(ctx, newTurn("ses-b", fmt.Sprintf("b-%d", seq), seq, "completed")))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []struct {
			session string
			after   int64
			limit   int
			want    []string
		}{
			{"ses-a", 0, 100, []string{"a-1", "a-2", "a-3", "a-4", "a-5"}},
			{"ses-a", 0, 2, []string{"a-1", "a-2"}},
			{"ses-a", 2, 2, []string{"a-3", "a-4"}},
			{"ses-a", 4, 100, []string{"a-5"}},
			{"ses-a", 5, 100, nil},
			{"ses-b", 0, 100, []string{"b-1", "b-2"}},
			{"ses-none", 0, 100, nil},
		} {
			ts, err := tx.ListTurns(ctx, c.session, c.after, c.limit)
			if err != nil {
				t.Errorf("ListTurns(%s, %d, %d): %v", c.session, c.after, c.limit, err)
				continue
			}
			checkIDs(t, fmt.Sprintf("ListTurns(%s, %d, %d)", c.session, c.after, c.limit), turnIDs(ts), c.want)
		}
		ts, err := tx.ListTurns(ctx, "ses-a", 2, 1)
		if err != nil || len(ts) != 1 {
			t.Fatalf("ListTurns = %v, %v", ts, err)
		}
		check(t, "listed Turn", ts[0], storedTurn(*newTurn("ses-a", "a-3", 3, "completed")))
		for session, want := range map[string]int64{"ses-a": 5, "ses-b": 2, "ses-none": 0} {
			n, err := tx.MaxTurnSequence(ctx, session)
			if err != nil || n != want {
				t.Errorf("MaxTurnSequence(%s) = %d, %v; want %d", session, n, err, want)
			}
		}
		return nil
	})
	// Without a sequence, InsertTurn assigns the Session's next one.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []struct {
			session, id string
			want        int64
		}{{"ses-a", "a-6", 6}, {"ses-a", "a-7", 7}, {"ses-new", "new-1", 1}} {
			tr := newTurn(c.session, c.id, 0, "queued")
			if err := tx.InsertTurn(ctx, tr); err != nil || tr.Sequence != c.want {
				t.Errorf("InsertTurn(%s, no sequence) assigned %d, %v; want %d", c.id, tr.Sequence, err, c.want)
			}
			got, err := tx.GetTurn(ctx, c.session, c.id)
			if err != nil || got.Sequence != c.want {
				t.Errorf("GetTurn(%s) = %+v, %v; want sequence %d", c.id, got, err, c.want)
			}
		}
		dup := newTurn("ses-a", "a-7", 0, "queued")
		wantErr(t, "InsertTurn(same id, no sequence)", tx.InsertTurn(ctx, dup), store.ErrDuplicate)
		if n, err := tx.MaxTurnSequence(ctx, "ses-a"); err != nil || n != 7 {
			t.Errorf("MaxTurnSequence after a refused insert = %d, %v; want 7", n, err)
		}
		return nil
	})
}

func testTurnsByStatus(t *testing.T, s store.Store) {
	type row struct {
		session string
		seq     int64
		status  string
	}
	rows := []row{
		{"ses-a", 1, "completed"}, {"ses-a", 2, "running"}, {"ses-a", 3, "queued"}, {"ses-a", 4, "queued"},
		{"ses-b", 1, "failed"}, {"ses-b", 2, "queued"},
		{"ses-c", 1, "completed"}, {"ses-c", 2, "cancelled"},
		{"ses-d", 1, "interrupted"}, {"ses-d", 2, "running"},
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, r := range slices.Backward(rows) {
			wantOK(t, "InsertTurn", tx.InsertTurn(ctx, newTurn(r.session, fmt.Sprintf("%s-%d", r.session, r.seq), r.seq, r.status)))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []struct{ session, want string }{
			{"ses-a", "ses-a-2"}, // running wins over queued
			{"ses-b", "ses-b-2"}, // oldest queued
			{"ses-d", "ses-d-2"},
		} {
			got, err := tx.ActiveTurn(ctx, c.session)
			if err != nil || got.ID != c.want {
				t.Errorf("ActiveTurn(%s) = %v, %v; want %s", c.session, got, err, c.want)
			}
		}
		got, err := tx.ActiveTurn(ctx, "ses-b")
		if err != nil {
			t.Fatalf("ActiveTurn: %v", err)
		}
		check(t, "ActiveTurn row", *got, storedTurn(*newTurn("ses-b", "ses-b-2", 2, "queued")))
		_, err = tx.ActiveTurn(ctx, "ses-c")
		wantErr(t, "ActiveTurn(none)", err, store.ErrNotFound)
		_, err = tx.ActiveTurn(ctx, "ses-none")
		wantErr(t, "ActiveTurn(no Session)", err, store.ErrNotFound)

		for status, want := range map[string][]string{
			"queued":    {"ses-a-3", "ses-a-4", "ses-b-2"},
			"running":   {"ses-a-2", "ses-d-2"},
			"cancelled": {"ses-c-2"},
			"unknown":   nil,
		} {
			ts, err := tx.TurnsWithStatus(ctx, status)
			if err != nil {
				t.Errorf("TurnsWithStatus(%s): %v", status, err)
				continue
			}
			for _, tr := range ts {
				if tr.Status != status {
					t.Errorf("TurnsWithStatus(%s) returned %s in status %s", status, tr.ID, tr.Status)
				}
			}
			ids := turnIDs(ts)
			slices.Sort(ids)
			checkIDs(t, "TurnsWithStatus("+status+")", ids, want)
		}

		ids, err := tx.SessionsWithWork(ctx)
		if err != nil {
			t.Fatalf("SessionsWithWork: %v", err)
		}
		slices.Sort(ids)
		checkIDs(t, "SessionsWithWork", ids, []string{"ses-a", "ses-b", "ses-d"})
		return nil
	})
	// Work drains as Turns settle.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, id := range []string{"ses-a-2", "ses-a-3", "ses-a-4"} {
			tr, err := tx.GetTurn(ctx, "ses-a", id)
			if err != nil {
				t.Fatalf("GetTurn: %v", err)
			}
			tr.Status = "completed"
			wantOK(t, "UpdateTurn", tx.UpdateTurn(ctx, tr))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		ids, err := tx.SessionsWithWork(ctx)
		if err != nil {
			t.Fatalf("SessionsWithWork: %v", err)
		}
		slices.Sort(ids)
		checkIDs(t, "SessionsWithWork after settling", ids, []string{"ses-b", "ses-d"})
		return nil
	})
}

// --- messages ---

func testMessages(t *testing.T, s store.Store) {
	m := &store.Message{ID: "msg-1", SessionID: "ses-1", TurnID: "turn-1",
		Content: raw(`[{"type":"text","text":"more"},{"type":"json","value":[1,{"b":false}]}]`),
		Source:  raw(`{"kind":"session","requester_session_id":"ses-0"}`), Status: "admitted", CreatedAt: at(30)}
	empty := &store.Message{ID: "msg-2", SessionID: "ses-1", TurnID: "turn-1",
		Content: raw(`[]`), Source: raw(`{}`), Status: "admitted", CreatedAt: at(31)}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "InsertMessage", tx.InsertMessage(ctx, m))
		wantOK(t, "InsertMessage(empty)", tx.InsertMessage(ctx, empty))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, want := range []*store.Message{m, empty} {
			got, err := tx.GetMessage(ctx, want.ID)
			if err != nil {
				t.Errorf("GetMessage(%s): %v", want.ID, err)
				continue
			}
			check(t, "GetMessage("+want.ID+")", *got, storedMessage(*want))
		}
		_, err := tx.GetMessage(ctx, "msg-missing")
		wantErr(t, "GetMessage(missing)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		dup := *empty
		dup.ID = m.ID
		wantErr(t, "InsertMessage(same id)", tx.InsertMessage(ctx, &dup), store.ErrDuplicate)
		return nil
	})
	// A message marks its Turn, so that the Turn's start and settlement
	// look for it.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		tr := newTurn("ses-1", "turn-m", 9, "queued")
		wantOK(t, "InsertTurn", tx.InsertTurn(ctx, tr))
		wantOK(t, "InsertMessage", tx.InsertMessage(ctx, &store.Message{ID: "msg-m", SessionID: "ses-1", TurnID: tr.ID,
			Content: raw(`[]`), Source: raw(`{}`), Status: "admitted", CreatedAt: at(32)}))
		if got, err := tx.GetTurn(ctx, "ses-1", tr.ID); err != nil || !got.Messaged {
			t.Errorf("GetTurn after InsertMessage = %+v, %v; want Messaged", got, err)
		}
		return nil
	})
	delivered := *m
	delivered.Status = "delivered"
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateMessage", tx.UpdateMessage(ctx, &delivered))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetMessage(ctx, m.ID)
		if err != nil {
			t.Fatalf("GetMessage: %v", err)
		}
		check(t, "updated Message", *got, storedMessage(delivered))
		got, err = tx.GetMessage(ctx, empty.ID)
		if err != nil {
			t.Fatalf("GetMessage: %v", err)
		}
		check(t, "other Message", *got, storedMessage(*empty))
		return nil
	})
}

func testPendingMessages(t *testing.T, s store.Store) {
	// IDs deliberately sort against creation time: order is oldest first.
	msgs := []struct {
		id, turn, status string
		at               int
	}{
		{"msg-9", "turn-1", "admitted", 1},
		{"msg-8", "turn-1", "delivered", 2},
		{"msg-7", "turn-1", "admitted", 3},
		{"msg-6", "turn-1", "rejected", 4},
		{"msg-5", "turn-2", "admitted", 5},
		{"msg-4", "turn-1", "admitted", 6},
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, i := range []int{3, 5, 0, 2, 4, 1} {
			c := msgs[i]
			m := &store.Message{ID: c.id, SessionID: "ses-1", TurnID: c.turn, Content: raw(`[{"type":"text","text":"` + c.id + `"}]`),
				Source: raw(`{"kind":"user"}`), Status: c.status, CreatedAt: at(c.at)}
			wantOK(t, "InsertMessage", tx.InsertMessage(ctx, m))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		ms, err := tx.PendingMessages(ctx, "turn-1")
		if err != nil {
			t.Fatalf("PendingMessages: %v", err)
		}
		checkIDs(t, "PendingMessages(turn-1)", messageIDs(ms), []string{"msg-9", "msg-7", "msg-4"})
		if len(ms) > 0 {
			check(t, "pending Message", ms[0], store.Message{ID: "msg-9", SessionID: "ses-1", TurnID: "turn-1",
				Content: raw(`[{"type":"text","text":"msg-9"}]`), Source: raw(`{"kind":"user"}`), Status: "admitted", CreatedAt: stored(at(1))})
		}
		ms, err = tx.PendingMessages(ctx, "turn-2")
		if err != nil {
			t.Fatalf("PendingMessages: %v", err)
		}
		checkIDs(t, "PendingMessages(turn-2)", messageIDs(ms), []string{"msg-5"})
		ms, err = tx.PendingMessages(ctx, "turn-none")
		if err != nil {
			t.Fatalf("PendingMessages: %v", err)
		}
		checkIDs(t, "PendingMessages(turn-none)", messageIDs(ms), nil)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		m, err := tx.GetMessage(ctx, "msg-9")
		if err != nil {
			t.Fatalf("GetMessage: %v", err)
		}
		m.Status = "delivered"
		wantOK(t, "UpdateMessage", tx.UpdateMessage(ctx, m))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		ms, err := tx.PendingMessages(ctx, "turn-1")
		if err != nil {
			t.Fatalf("PendingMessages: %v", err)
		}
		checkIDs(t, "PendingMessages(turn-1) after delivery", messageIDs(ms), []string{"msg-7", "msg-4"})
		return nil
	})
}

// --- events ---

func testEvents(t *testing.T, s store.Store) {
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		n, err := tx.LastEventSequence(ctx, "ses-a")
		if err != nil || n != 0 {
			t.Errorf("LastEventSequence on an empty store = %d, %v; want 0", n, err)
		}
		es, err := tx.ListEvents(ctx, "ses-a", 0, 100)
		if err != nil || len(es) != 0 {
			t.Errorf("ListEvents on an empty store = %v, %v; want none", es, err)
		}
		return nil
	})
	var want []store.Event
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for i, e := range []*store.Event{
			{SessionID: "ses-a", Kind: "session.created", Data: raw(`{"agent":"a"}`), CreatedAt: at(40)},
			{SessionID: "ses-b", Kind: "session.created", Data: raw(`{"agent":"b"}`), CreatedAt: at(41)},
			{SessionID: "ses-a", TurnID: "turn-1", Kind: "turn.queued", Data: raw(`{"n":[1,2,3]}`), CreatedAt: at(42)},
			// A preset sequence is ignored; the store assigns it.
			{SessionID: "ses-a", TurnID: "turn-1", Kind: "turn.running", Data: raw(`{}`), Sequence: 99, CreatedAt: at(43)},
		} {
			wantOK(t, "AppendEvent", tx.AppendEvent(ctx, e))
			wantSeq := []int64{1, 1, 2, 3}[i]
			if e.Sequence != wantSeq {
				t.Errorf("AppendEvent #%d assigned sequence %d, want %d", i, e.Sequence, wantSeq)
			}
			if e.SessionID == "ses-a" {
				w := *e
				w.CreatedAt = stored(e.CreatedAt)
				want = append(want, w)
			}
		}
		n, err := tx.LastEventSequence(ctx, "ses-a")
		if err != nil || n != 3 {
			t.Errorf("LastEventSequence in the writing Update = %d, %v; want 3", n, err)
		}
		return nil
	})
	// Sequences continue across Updates; nil data is stored as {}.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		e := &store.Event{SessionID: "ses-a", TurnID: "turn-1", Kind: "turn.completed", CreatedAt: at(44)}
		wantOK(t, "AppendEvent", tx.AppendEvent(ctx, e))
		if e.Sequence != 4 {
			t.Errorf("AppendEvent in a later Update assigned sequence %d, want 4", e.Sequence)
		}
		w := *e
		w.Data = raw(`{}`)
		w.CreatedAt = stored(e.CreatedAt)
		want = append(want, w)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		es, err := tx.ListEvents(ctx, "ses-a", 0, 100)
		if err != nil {
			t.Fatalf("ListEvents: %v", err)
		}
		check(t, "ListEvents(ses-a)", es, want)
		for _, c := range []struct {
			session      string
			after        int64
			limit        int
			want         []int64
			wantLastSeq  int64
			checkLastSeq bool
		}{
			{"ses-a", 1, 2, []int64{2, 3}, 4, true},
			{"ses-a", 3, 100, []int64{4}, 0, false},
			{"ses-a", 4, 100, nil, 0, false},
			{"ses-a", 0, 1, []int64{1}, 0, false},
			{"ses-b", 0, 100, []int64{1}, 1, true},
			{"ses-none", 0, 100, nil, 0, true},
		} {
			es, err := tx.ListEvents(ctx, c.session, c.after, c.limit)
			if err != nil {
				t.Errorf("ListEvents(%s, %d, %d): %v", c.session, c.after, c.limit, err)
				continue
			}
			if got := eventSeqs(es); !slices.Equal(got, append([]int64{}, c.want...)) {
				t.Errorf("ListEvents(%s, %d, %d) sequences = %v, want %v", c.session, c.after, c.limit, got, c.want)
			}
			for _, e := range es {
				if e.SessionID != c.session {
					t.Errorf("ListEvents(%s) returned an event of %s", c.session, e.SessionID)
				}
			}
			if c.checkLastSeq {
				n, err := tx.LastEventSequence(ctx, c.session)
				if err != nil || n != c.wantLastSeq {
					t.Errorf("LastEventSequence(%s) = %d, %v; want %d", c.session, n, err, c.wantLastSeq)
				}
			}
		}
		return nil
	})
}

// --- idempotency ---

func testIdempotency(t *testing.T, s store.Store) {
	r := &store.Idempotency{Scope: "key-1:POST /v1/sessions", Key: "abc", Digest: "sha256:dddd",
		Response: raw(`{"session":{"id":"ses-1"},"turn":null}`), CreatedAt: at(50)}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "InsertIdempotency", tx.InsertIdempotency(ctx, r))
		// The same key in another scope is another record.
		other := *r
		other.Scope = "key-2:POST /v1/sessions"
		other.Response = raw(`{}`)
		wantOK(t, "InsertIdempotency(other scope)", tx.InsertIdempotency(ctx, &other))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetIdempotency(ctx, r.Scope, r.Key)
		if err != nil {
			t.Fatalf("GetIdempotency: %v", err)
		}
		want := *r
		want.CreatedAt = stored(r.CreatedAt)
		check(t, "GetIdempotency", *got, want)
		got, err = tx.GetIdempotency(ctx, "key-2:POST /v1/sessions", r.Key)
		if err != nil || string(got.Response) != `{}` {
			t.Errorf("GetIdempotency(other scope) = %v, %v", got, err)
		}
		_, err = tx.GetIdempotency(ctx, r.Scope, "missing")
		wantErr(t, "GetIdempotency(missing key)", err, store.ErrNotFound)
		_, err = tx.GetIdempotency(ctx, "key-3:POST /v1/sessions", r.Key)
		wantErr(t, "GetIdempotency(missing scope)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		dup := *r
		dup.Digest = "sha256:eeee"
		wantErr(t, "InsertIdempotency(same scope and key)", tx.InsertIdempotency(ctx, &dup), store.ErrDuplicate)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetIdempotency(ctx, r.Scope, r.Key)
		if err != nil || got.Digest != r.Digest {
			t.Errorf("GetIdempotency after refused duplicate = %v, %v; want digest %s", got, err, r.Digest)
		}
		return nil
	})
}

// --- processes ---

func processSessionIDs(ps []store.Process) []string {
	ids := []string{}
	for _, p := range ps {
		ids = append(ids, p.SessionID)
	}
	return ids
}

func storedProcess(p store.Process) store.Process {
	p.LaunchedAt = stored(p.LaunchedAt)
	return p
}

func testProcesses(t *testing.T, s store.Store) {
	full := &store.Process{SessionID: "ses-2", LaunchID: "launch-1", PID: 4194303, StartID: "boot-abc:123456789",
		TokenHash: "sha256:ffff", ComputerID: "cmp-1", Recovery: "reattach", LaunchedAt: at(60), NodeID: "node-1"}
	minimal := &store.Process{SessionID: "ses-1", LaunchID: "launch-2", PID: 1, LaunchedAt: at(61)}
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		ps, err := tx.ListProcesses(ctx)
		if err != nil || len(ps) != 0 {
			t.Errorf("ListProcesses on an empty store = %v, %v; want none", ps, err)
		}
		_, err = tx.GetProcess(ctx, "ses-1")
		wantErr(t, "GetProcess(missing)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "PutProcess(full)", tx.PutProcess(ctx, full))
		wantOK(t, "PutProcess(minimal)", tx.PutProcess(ctx, minimal))
		got, err := tx.GetProcess(ctx, full.SessionID)
		if err != nil {
			t.Fatalf("GetProcess in the writing Update: %v", err)
		}
		check(t, "GetProcess in the writing Update", *got, storedProcess(*full))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, want := range []*store.Process{full, minimal} {
			got, err := tx.GetProcess(ctx, want.SessionID)
			if err != nil {
				t.Errorf("GetProcess(%s): %v", want.SessionID, err)
				continue
			}
			check(t, "GetProcess("+want.SessionID+")", *got, storedProcess(*want))
		}
		ps, err := tx.ListProcesses(ctx)
		if err != nil {
			t.Fatalf("ListProcesses: %v", err)
		}
		check(t, "ListProcesses", ps, []store.Process{storedProcess(*minimal), storedProcess(*full)})
		return nil
	})
	// A later launch replaces the record, every field of it.
	relaunched := &store.Process{SessionID: "ses-2", LaunchID: "launch-3", PID: 77, StartID: "boot-def:1",
		TokenHash: "sha256:eeee", ComputerID: "cmp-2", Recovery: "restart", LaunchedAt: at(62)}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "PutProcess(relaunched)", tx.PutProcess(ctx, relaunched))
		// A record with empty fields replaces one that has them.
		wantOK(t, "PutProcess(minimal again)", tx.PutProcess(ctx, &store.Process{SessionID: "ses-3", LaunchID: "launch-4", PID: 5,
			StartID: "x", TokenHash: "y", ComputerID: "z", Recovery: "w", LaunchedAt: at(63)}))
		wantOK(t, "PutProcess(ses-3 emptied)", tx.PutProcess(ctx, &store.Process{SessionID: "ses-3", LaunchID: "launch-5", PID: 6, LaunchedAt: at(64)}))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetProcess(ctx, "ses-2")
		if err != nil {
			t.Fatalf("GetProcess: %v", err)
		}
		check(t, "replaced process", *got, storedProcess(*relaunched))
		got, err = tx.GetProcess(ctx, "ses-3")
		if err != nil {
			t.Fatalf("GetProcess: %v", err)
		}
		check(t, "emptied process", *got, storedProcess(store.Process{SessionID: "ses-3", LaunchID: "launch-5", PID: 6, LaunchedAt: at(64)}))
		ps, err := tx.ListProcesses(ctx)
		if err != nil {
			t.Fatalf("ListProcesses: %v", err)
		}
		checkIDs(t, "ListProcesses after replacing", processSessionIDs(ps), []string{"ses-1", "ses-2", "ses-3"})
		return nil
	})
	// DeleteProcess removes only the launch it names.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "DeleteProcess(stale launch)", tx.DeleteProcess(ctx, "ses-2", full.LaunchID))
		if _, err := tx.GetProcess(ctx, "ses-2"); err != nil {
			t.Errorf("GetProcess after DeleteProcess with a stale launch ID: %v", err)
		}
		wantOK(t, "DeleteProcess(current launch)", tx.DeleteProcess(ctx, "ses-2", relaunched.LaunchID))
		_, err := tx.GetProcess(ctx, "ses-2")
		wantErr(t, "GetProcess after DeleteProcess", err, store.ErrNotFound)
		wantOK(t, "DeleteProcess(again)", tx.DeleteProcess(ctx, "ses-2", relaunched.LaunchID))
		wantOK(t, "DeleteProcess(no record)", tx.DeleteProcess(ctx, "ses-none", "launch-1"))
		// A launch ID of another Session does not delete this one's.
		wantOK(t, "DeleteProcess(other Session's launch)", tx.DeleteProcess(ctx, "ses-1", "launch-5"))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.GetProcess(ctx, "ses-2")
		wantErr(t, "GetProcess(deleted)", err, store.ErrNotFound)
		got, err := tx.GetProcess(ctx, "ses-1")
		if err != nil {
			t.Fatalf("GetProcess(ses-1): %v", err)
		}
		check(t, "kept process", *got, storedProcess(*minimal))
		ps, err := tx.ListProcesses(ctx)
		if err != nil {
			t.Fatalf("ListProcesses: %v", err)
		}
		checkIDs(t, "ListProcesses after deleting", processSessionIDs(ps), []string{"ses-1", "ses-3"})
		return nil
	})
}

// --- questions ---

func storedAsk(a store.Ask) store.Ask {
	a.CreatedAt = stored(a.CreatedAt)
	a.ResolvedAt = storedPtr(a.ResolvedAt)
	return a
}

func askIDs(as []store.Ask) []string {
	ids := []string{}
	for _, a := range as {
		ids = append(ids, a.ID)
	}
	return ids
}

func newAsk(id, turnID, status string, n int) *store.Ask {
	return &store.Ask{ID: id, SessionID: "ses-1", TurnID: turnID, Status: status,
		Question: raw(`{"text":"` + id + `?"}`), CreatedAt: at(n)}
}

func testAsks(t *testing.T, s store.Store) {
	full := &store.Ask{
		ID:          "ask-1",
		SessionID:   "ses-1",
		TurnID:      "turn-1",
		Status:      "responded",
		Question:    raw(`{"text":"Ship it?","choices":["yes","no"],"nested":{"n":[1,2.5]}}`),
		Answer:      raw(`{"choice":"yes","note":"ünïcode \"quoted\""}`),
		RespondedBy: raw(`{"kind":"user","id":"u-1"}`),
		ResponseID:  "resp-1",
		CreatedAt:   at(70),
		ResolvedAt:  ptr(at(71)),
	}
	// Nil JSON and nil times stay nil.
	minimal := &store.Ask{ID: "ask-2", SessionID: "ses-1", TurnID: "turn-1", Status: "pending", CreatedAt: at(72)}
	// JSON null and empty values are not nil.
	empties := &store.Ask{ID: "ask-3", SessionID: "ses-1", TurnID: "turn-1", Status: "pending",
		Question: raw(`null`), Answer: raw(`{}`), RespondedBy: raw(`""`), CreatedAt: at(73)}
	all := []*store.Ask{full, minimal, empties}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, a := range all {
			wantOK(t, "InsertAsk("+a.ID+")", tx.InsertAsk(ctx, a))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, want := range all {
			got, err := tx.GetAsk(ctx, want.ID)
			if err != nil {
				t.Errorf("GetAsk(%s): %v", want.ID, err)
				continue
			}
			check(t, "GetAsk("+want.ID+")", *got, storedAsk(*want))
		}
		_, err := tx.GetAsk(ctx, "ask-missing")
		wantErr(t, "GetAsk(missing)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		dup := *minimal
		dup.ID = full.ID
		wantErr(t, "InsertAsk(same id)", tx.InsertAsk(ctx, &dup), store.ErrDuplicate)
		// The transaction goes on after the refused insert.
		got, err := tx.GetAsk(ctx, full.ID)
		if err != nil {
			t.Fatalf("GetAsk after ErrDuplicate: %v", err)
		}
		check(t, "GetAsk after refused duplicate", *got, storedAsk(*full))
		return nil
	})
	// pending → responded with every mutable field set.
	responded := *minimal
	responded.Status = "responded"
	responded.Answer = raw(`{"text":"later"}`)
	responded.RespondedBy = raw(`{"kind":"session","id":"ses-9"}`)
	responded.ResponseID = "resp-2"
	responded.ResolvedAt = ptr(at(74))
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateAsk", tx.UpdateAsk(ctx, &responded))
		got, err := tx.GetAsk(ctx, minimal.ID)
		if err != nil {
			t.Fatalf("GetAsk in the writing Update: %v", err)
		}
		check(t, "GetAsk in the writing Update", *got, storedAsk(responded))
		missing := *minimal
		missing.ID = "ask-missing"
		wantErr(t, "UpdateAsk(missing)", tx.UpdateAsk(ctx, &missing), store.ErrNotFound)
		// The transaction goes on after ErrNotFound.
		wantOK(t, "InsertAsk after ErrNotFound", tx.InsertAsk(ctx, newAsk("ask-4", "turn-1", "pending", 75)))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetAsk(ctx, minimal.ID)
		if err != nil {
			t.Fatalf("GetAsk: %v", err)
		}
		check(t, "updated Ask", *got, storedAsk(responded))
		got, err = tx.GetAsk(ctx, full.ID)
		if err != nil {
			t.Fatalf("GetAsk: %v", err)
		}
		check(t, "other Ask", *got, storedAsk(*full))
		_, err = tx.GetAsk(ctx, "ask-missing")
		wantErr(t, "GetAsk(refused update)", err, store.ErrNotFound)
		if _, err := tx.GetAsk(ctx, "ask-4"); err != nil {
			t.Errorf("GetAsk(ask-4) written after ErrNotFound: %v", err)
		}
		return nil
	})
	// JSON and times go back to nil.
	cleared := responded
	cleared.Status, cleared.Answer, cleared.RespondedBy, cleared.ResponseID, cleared.ResolvedAt = "cancelled", nil, nil, "", nil
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateAsk(cleared)", tx.UpdateAsk(ctx, &cleared))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetAsk(ctx, minimal.ID)
		if err != nil {
			t.Fatalf("GetAsk: %v", err)
		}
		check(t, "cleared Ask", *got, storedAsk(cleared))
		return nil
	})
}

func testListAsks(t *testing.T, s store.Store) {
	// IDs sort by creation; inserted out of order.
	asks := []*store.Ask{
		newAsk("ask-1", "turn-1", "responded", 1),
		newAsk("ask-2", "turn-1", "pending", 2),
		newAsk("ask-3", "turn-2", "pending", 3),
		newAsk("ask-4", "turn-1", "cancelled", 4),
		newAsk("ask-5", "turn-1", "pending", 5),
		newAsk("ask-6", "turn-1", "pending", 6),
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, i := range []int{4, 0, 2, 5, 1, 3} {
			wantOK(t, "InsertAsk", tx.InsertAsk(ctx, asks[i]))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []struct {
			turn, after string
			limit       int
			want        []string
		}{
			{"turn-1", "", 100, []string{"ask-1", "ask-2", "ask-4", "ask-5", "ask-6"}},
			{"turn-1", "", 2, []string{"ask-1", "ask-2"}},
			{"turn-1", "ask-2", 2, []string{"ask-4", "ask-5"}},
			{"turn-1", "ask-3", 100, []string{"ask-4", "ask-5", "ask-6"}},
			{"turn-1", "ask-6", 100, nil},
			{"turn-2", "", 100, []string{"ask-3"}},
			{"turn-none", "", 100, nil},
		} {
			as, err := tx.ListAsks(ctx, c.turn, c.after, c.limit)
			if err != nil {
				t.Errorf("ListAsks(%s, %q, %d): %v", c.turn, c.after, c.limit, err)
				continue
			}
			checkIDs(t, fmt.Sprintf("ListAsks(%s, %q, %d)", c.turn, c.after, c.limit), askIDs(as), c.want)
		}
		as, err := tx.ListAsks(ctx, "turn-1", "ask-1", 1)
		if err != nil || len(as) != 1 {
			t.Fatalf("ListAsks = %v, %v", as, err)
		}
		check(t, "listed Ask", as[0], storedAsk(*asks[1]))

		as, err = tx.PendingAsks(ctx, "turn-1")
		if err != nil {
			t.Fatalf("PendingAsks: %v", err)
		}
		checkIDs(t, "PendingAsks(turn-1)", askIDs(as), []string{"ask-2", "ask-5", "ask-6"})
		if len(as) > 0 {
			check(t, "pending Ask", as[0], storedAsk(*asks[1]))
		}
		as, err = tx.PendingAsks(ctx, "turn-2")
		if err != nil {
			t.Fatalf("PendingAsks: %v", err)
		}
		checkIDs(t, "PendingAsks(turn-2)", askIDs(as), []string{"ask-3"})
		as, err = tx.PendingAsks(ctx, "turn-none")
		if err != nil {
			t.Fatalf("PendingAsks: %v", err)
		}
		checkIDs(t, "PendingAsks(turn-none)", askIDs(as), nil)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		a, err := tx.GetAsk(ctx, "ask-5")
		if err != nil {
			t.Fatalf("GetAsk: %v", err)
		}
		a.Status, a.Answer, a.ResolvedAt = "responded", raw(`"ok"`), ptr(at(9))
		wantOK(t, "UpdateAsk", tx.UpdateAsk(ctx, a))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		as, err := tx.PendingAsks(ctx, "turn-1")
		if err != nil {
			t.Fatalf("PendingAsks: %v", err)
		}
		checkIDs(t, "PendingAsks(turn-1) after a response", askIDs(as), []string{"ask-2", "ask-6"})
		as, err = tx.ListAsks(ctx, "turn-1", "ask-4", 1)
		if err != nil || len(as) != 1 || as[0].Status != "responded" || string(as[0].Answer) != `"ok"` {
			t.Errorf("ListAsks after a response = %+v, %v", as, err)
		}
		return nil
	})
}

// --- tokens ---

func storedToken(tk store.Token) store.Token {
	tk.CreatedAt = stored(tk.CreatedAt)
	tk.ExpiresAt = storedPtr(tk.ExpiresAt)
	tk.ResolvedAt = storedPtr(tk.ResolvedAt)
	return tk
}

func tokenIDs(ts []store.Token) []string {
	ids := []string{}
	for _, tk := range ts {
		ids = append(ids, tk.ID)
	}
	return ids
}

func newToken(id, sessionID, status, key string, n int) *store.Token {
	return &store.Token{ID: id, SessionID: sessionID, TurnID: "turn-1", Status: status,
		SecretHash: "sha256:" + id, IdempotencyKey: key, CreatedAt: at(n)}
}

func testTokens(t *testing.T, s store.Store) {
	full := &store.Token{
		ID:             "tok-1",
		SessionID:      "ses-1",
		TurnID:         "turn-1",
		Status:         "completed",
		Tags:           raw(`["approval","ünïcode"]`),
		Metadata:       raw(`{"order":{"id":42,"lines":[1,2.5,"x"]}}`),
		Data:           raw(`{"approved":true,"by":"u-1"}`),
		SecretHash:     "sha256:abcd",
		IdempotencyKey: "approve-42",
		CreatedAt:      at(80),
		ExpiresAt:      ptr(at(90)),
		ResolvedAt:     ptr(at(81)),
	}
	// Nil JSON and nil times stay nil.
	minimal := &store.Token{ID: "tok-2", SessionID: "ses-1", Status: "pending", CreatedAt: at(82)}
	// JSON null and empty values are not nil.
	empties := &store.Token{ID: "tok-3", SessionID: "ses-1", TurnID: "turn-1", Status: "pending",
		Tags: raw(`[]`), Metadata: raw(`{}`), Data: raw(`null`), CreatedAt: at(83)}
	all := []*store.Token{full, minimal, empties}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, tk := range all {
			wantOK(t, "InsertToken("+tk.ID+")", tx.InsertToken(ctx, tk))
		}
		// Tokens without a key never collide.
		wantOK(t, "InsertToken(no key)", tx.InsertToken(ctx, newToken("tok-4", "ses-1", "pending", "", 84)))
		// The same key in another Session is another Token.
		wantOK(t, "InsertToken(same key, other Session)", tx.InsertToken(ctx, newToken("tok-5", "ses-2", "pending", full.IdempotencyKey, 85)))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, want := range all {
			got, err := tx.GetToken(ctx, want.ID)
			if err != nil {
				t.Errorf("GetToken(%s): %v", want.ID, err)
				continue
			}
			check(t, "GetToken("+want.ID+")", *got, storedToken(*want))
		}
		_, err := tx.GetToken(ctx, "tok-missing")
		wantErr(t, "GetToken(missing)", err, store.ErrNotFound)

		got, err := tx.GetTokenByKey(ctx, "ses-1", full.IdempotencyKey)
		if err != nil {
			t.Fatalf("GetTokenByKey: %v", err)
		}
		check(t, "GetTokenByKey", *got, storedToken(*full))
		got, err = tx.GetTokenByKey(ctx, "ses-2", full.IdempotencyKey)
		if err != nil || got.ID != "tok-5" {
			t.Errorf("GetTokenByKey(ses-2) = %+v, %v; want tok-5", got, err)
		}
		_, err = tx.GetTokenByKey(ctx, "ses-3", full.IdempotencyKey)
		wantErr(t, "GetTokenByKey(other Session)", err, store.ErrNotFound)
		_, err = tx.GetTokenByKey(ctx, "ses-1", "other")
		wantErr(t, "GetTokenByKey(other key)", err, store.ErrNotFound)
		_, err = tx.GetTokenByKey(ctx, "ses-1", "")
		wantErr(t, "GetTokenByKey(empty key)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantErr(t, "InsertToken(same Session and key)", tx.InsertToken(ctx, newToken("tok-6", "ses-1", "pending", full.IdempotencyKey, 86)), store.ErrDuplicate)
		// Insert, and on ErrDuplicate read the existing Token, in one Update.
		got, err := tx.GetTokenByKey(ctx, "ses-1", full.IdempotencyKey)
		if err != nil || got.ID != full.ID {
			t.Errorf("GetTokenByKey after ErrDuplicate = %+v, %v; want %s", got, err, full.ID)
		}
		dup := *minimal
		dup.ID = full.ID
		dup.IdempotencyKey = "fresh"
		wantErr(t, "InsertToken(same id)", tx.InsertToken(ctx, &dup), store.ErrDuplicate)
		wantOK(t, "InsertToken after errors", tx.InsertToken(ctx, newToken("tok-7", "ses-1", "pending", "k7", 87)))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.GetToken(ctx, "tok-6")
		wantErr(t, "GetToken(refused duplicate key)", err, store.ErrNotFound)
		_, err = tx.GetTokenByKey(ctx, "ses-1", "fresh")
		wantErr(t, "GetTokenByKey(refused duplicate id)", err, store.ErrNotFound)
		got, err := tx.GetToken(ctx, full.ID)
		if err != nil {
			t.Fatalf("GetToken: %v", err)
		}
		check(t, "GetToken after refused duplicates", *got, storedToken(*full))
		got, err = tx.GetTokenByKey(ctx, "ses-1", "k7")
		if err != nil || got.ID != "tok-7" {
			t.Errorf("GetTokenByKey(k7) = %+v, %v", got, err)
		}
		return nil
	})
	// pending → completed with every mutable field set.
	completed := *minimal
	completed.Status = "completed"
	completed.Tags = raw(`["late"]`)
	completed.Metadata = raw(`{"m":1}`)
	completed.Data = raw(`{"result":[1,2,3]}`)
	completed.ExpiresAt = ptr(at(99))
	completed.ResolvedAt = ptr(at(88))
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateToken", tx.UpdateToken(ctx, &completed))
		got, err := tx.GetToken(ctx, minimal.ID)
		if err != nil {
			t.Fatalf("GetToken in the writing Update: %v", err)
		}
		check(t, "GetToken in the writing Update", *got, storedToken(completed))
		missing := *minimal
		missing.ID = "tok-missing"
		wantErr(t, "UpdateToken(missing)", tx.UpdateToken(ctx, &missing), store.ErrNotFound)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetToken(ctx, minimal.ID)
		if err != nil {
			t.Fatalf("GetToken: %v", err)
		}
		check(t, "updated Token", *got, storedToken(completed))
		got, err = tx.GetToken(ctx, empties.ID)
		if err != nil {
			t.Fatalf("GetToken: %v", err)
		}
		check(t, "other Token", *got, storedToken(*empties))
		_, err = tx.GetToken(ctx, "tok-missing")
		wantErr(t, "GetToken(refused update)", err, store.ErrNotFound)
		return nil
	})
	// JSON and times go back to nil.
	cleared := *full
	cleared.Status, cleared.Tags, cleared.Metadata, cleared.Data, cleared.ExpiresAt, cleared.ResolvedAt = "cancelled", nil, nil, nil, nil, nil
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateToken(cleared)", tx.UpdateToken(ctx, &cleared))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetToken(ctx, full.ID)
		if err != nil {
			t.Fatalf("GetToken: %v", err)
		}
		check(t, "cleared Token", *got, storedToken(cleared))
		// The key still finds it.
		got, err = tx.GetTokenByKey(ctx, "ses-1", full.IdempotencyKey)
		if err != nil || got.ID != full.ID {
			t.Errorf("GetTokenByKey after UpdateToken = %+v, %v", got, err)
		}
		return nil
	})
}

func testExpiringTokens(t *testing.T, s store.Store) {
	withExpiry := func(tk *store.Token, n int) *store.Token {
		tk.ExpiresAt = ptr(at(n))
		return tk
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, tk := range []*store.Token{
			withExpiry(newToken("tok-1", "ses-1", "pending", "", 1), 30),
			withExpiry(newToken("tok-2", "ses-2", "pending", "k", 2), 10),
			newToken("tok-3", "ses-1", "pending", "", 3), // no expiry
			withExpiry(newToken("tok-4", "ses-1", "completed", "", 4), 5),
			withExpiry(newToken("tok-5", "ses-1", "expired", "", 5), 6),
			withExpiry(newToken("tok-6", "ses-3", "pending", "", 6), 20),
			withExpiry(newToken("tok-7", "ses-1", "cancelled", "", 7), 7),
			// Same expiry as tok-6: ties go by ID.
			withExpiry(newToken("tok-0", "ses-1", "pending", "", 8), 20),
		} {
			wantOK(t, "InsertToken("+tk.ID+")", tx.InsertToken(ctx, tk))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		ts, err := tx.ExpiringTokens(ctx)
		if err != nil {
			t.Fatalf("ExpiringTokens: %v", err)
		}
		checkIDs(t, "ExpiringTokens", tokenIDs(ts), []string{"tok-2", "tok-0", "tok-6", "tok-1"})
		if len(ts) > 0 {
			check(t, "expiring Token", ts[0], storedToken(*withExpiry(newToken("tok-2", "ses-2", "pending", "k", 2), 10)))
		}
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for id, f := range map[string]func(*store.Token){
			"tok-2": func(tk *store.Token) { tk.Status, tk.ResolvedAt = "expired", ptr(at(10)) },
			"tok-6": func(tk *store.Token) { tk.Status, tk.Data, tk.ResolvedAt = "completed", raw(`{}`), ptr(at(11)) },
			"tok-1": func(tk *store.Token) { tk.ExpiresAt = ptr(at(1)) },  // sooner
			"tok-3": func(tk *store.Token) { tk.ExpiresAt = ptr(at(25)) }, // gains an expiry
			"tok-0": func(tk *store.Token) { tk.ExpiresAt = nil },         // loses it
		} {
			tk, err := tx.GetToken(ctx, id)
			if err != nil {
				t.Fatalf("GetToken(%s): %v", id, err)
			}
			f(tk)
			wantOK(t, "UpdateToken("+id+")", tx.UpdateToken(ctx, tk))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		ts, err := tx.ExpiringTokens(ctx)
		if err != nil {
			t.Fatalf("ExpiringTokens: %v", err)
		}
		checkIDs(t, "ExpiringTokens after updates", tokenIDs(ts), []string{"tok-1", "tok-3"})
		return nil
	})
}

// --- waits ---

func storedWait(w store.Wait) store.Wait {
	w.Deadline = storedPtr(w.Deadline)
	w.CreatedAt = stored(w.CreatedAt)
	w.ResolvedAt = storedPtr(w.ResolvedAt)
	return w
}

func waitIDs(ws []store.Wait) []string {
	ids := []string{}
	for _, w := range ws {
		ids = append(ids, w.ID)
	}
	return ids
}

func testWaits(t *testing.T, s store.Store) {
	timer := &store.Wait{ID: "wait-1", SessionID: "ses-1", TurnID: "turn-1", Kind: "timer", Status: "waiting",
		Deadline: ptr(at(100)), CreatedAt: at(90)}
	// Durations keep every microsecond, up to long ones.
	token := &store.Wait{ID: "wait-2", SessionID: "ses-1", TurnID: "turn-1", Kind: "token", TargetID: "tok-1", Status: "waiting",
		Deadline: ptr(at(200)), IdleTimeout: 90*time.Second + 123456*time.Microsecond, CreatedAt: at(91)}
	resolved := &store.Wait{ID: "wait-3", SessionID: "ses-2", TurnID: "turn-2", Kind: "ask", TargetID: "ask-1", Status: "resolved",
		IdleTimeout: 400 * 24 * time.Hour, Outcome: raw(`{"kind":"answered","answer":{"a":[1,"ü"]}}`), CreatedAt: at(92), ResolvedAt: ptr(at(93))}
	// JSON null is not nil; a microsecond is kept.
	empties := &store.Wait{ID: "wait-4", SessionID: "ses-2", TurnID: "turn-2", Kind: "ask", TargetID: "ask-2", Status: "resolved",
		IdleTimeout: time.Microsecond, Outcome: raw(`null`), CreatedAt: at(94), ResolvedAt: ptr(at(95))}
	all := []*store.Wait{timer, token, resolved, empties}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, w := range all {
			wantOK(t, "InsertWait("+w.ID+")", tx.InsertWait(ctx, w))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, want := range all {
			got, err := tx.GetWait(ctx, want.ID)
			if err != nil {
				t.Errorf("GetWait(%s): %v", want.ID, err)
				continue
			}
			check(t, "GetWait("+want.ID+")", *got, storedWait(*want))
		}
		_, err := tx.GetWait(ctx, "wait-missing")
		wantErr(t, "GetWait(missing)", err, store.ErrNotFound)
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		dup := *resolved
		dup.ID = timer.ID
		wantErr(t, "InsertWait(same id)", tx.InsertWait(ctx, &dup), store.ErrDuplicate)
		got, err := tx.GetWait(ctx, timer.ID)
		if err != nil {
			t.Fatalf("GetWait after ErrDuplicate: %v", err)
		}
		check(t, "GetWait after refused duplicate", *got, storedWait(*timer))
		return nil
	})
	// waiting → resolved with every mutable field set.
	done := *token
	done.Status = "resolved"
	done.Deadline = ptr(at(150))
	done.IdleTimeout = 5*time.Minute + time.Microsecond
	done.Outcome = raw(`{"kind":"completed","data":{"ok":true}}`)
	done.ResolvedAt = ptr(at(96))
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateWait", tx.UpdateWait(ctx, &done))
		got, err := tx.GetWait(ctx, token.ID)
		if err != nil {
			t.Fatalf("GetWait in the writing Update: %v", err)
		}
		check(t, "GetWait in the writing Update", *got, storedWait(done))
		missing := *token
		missing.ID = "wait-missing"
		wantErr(t, "UpdateWait(missing)", tx.UpdateWait(ctx, &missing), store.ErrNotFound)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetWait(ctx, token.ID)
		if err != nil {
			t.Fatalf("GetWait: %v", err)
		}
		check(t, "updated Wait", *got, storedWait(done))
		got, err = tx.GetWait(ctx, timer.ID)
		if err != nil {
			t.Fatalf("GetWait: %v", err)
		}
		check(t, "other Wait", *got, storedWait(*timer))
		_, err = tx.GetWait(ctx, "wait-missing")
		wantErr(t, "GetWait(refused update)", err, store.ErrNotFound)
		return nil
	})
	// Times, the duration and JSON go back to zero and nil.
	cleared := done
	cleared.Status, cleared.Deadline, cleared.IdleTimeout, cleared.Outcome, cleared.ResolvedAt = "waiting", nil, 0, nil, nil
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateWait(cleared)", tx.UpdateWait(ctx, &cleared))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetWait(ctx, token.ID)
		if err != nil {
			t.Fatalf("GetWait: %v", err)
		}
		check(t, "cleared Wait", *got, storedWait(cleared))
		return nil
	})
}

func testOpenWaits(t *testing.T, s store.Store) {
	// IDs deliberately sort against creation time: order is oldest first.
	type row struct {
		id, session, kind, target, status string
		at                                int
	}
	rows := []row{
		{"wait-9", "ses-1", "timer", "", "waiting", 1},
		{"wait-8", "ses-2", "token", "tok-1", "waiting", 2},
		{"wait-7", "ses-1", "token", "tok-1", "resolved", 3},
		{"wait-6", "ses-1", "token", "tok-1", "waiting", 4},
		{"wait-5", "ses-3", "ask", "ask-1", "waiting", 5},
		{"wait-4", "ses-1", "ask", "ask-1", "resolved", 6},
		{"wait-3", "ses-2", "timer", "", "waiting", 7},
		{"wait-2", "ses-1", "token", "tok-2", "waiting", 8},
	}
	newWait := func(r row) *store.Wait {
		w := &store.Wait{ID: r.id, SessionID: r.session, TurnID: "turn-" + r.session, Kind: r.kind, TargetID: r.target,
			Status: r.status, Deadline: ptr(at(100 - r.at)), IdleTimeout: time.Duration(r.at) * time.Second, CreatedAt: at(r.at)}
		if r.status == "resolved" {
			w.Outcome, w.ResolvedAt = raw(`{"kind":"x"}`), ptr(at(50))
		}
		return w
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, i := range []int{3, 7, 0, 5, 1, 6, 2, 4} {
			wantOK(t, "InsertWait("+rows[i].id+")", tx.InsertWait(ctx, newWait(rows[i])))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []struct {
			session string
			want    []string
		}{
			{"ses-1", []string{"wait-9", "wait-6", "wait-2"}},
			{"ses-2", []string{"wait-8", "wait-3"}},
			{"ses-3", []string{"wait-5"}},
			{"ses-none", nil},
			{"", []string{"wait-9", "wait-8", "wait-6", "wait-5", "wait-3", "wait-2"}},
		} {
			ws, err := tx.OpenWaits(ctx, c.session)
			if err != nil {
				t.Errorf("OpenWaits(%q): %v", c.session, err)
				continue
			}
			checkIDs(t, fmt.Sprintf("OpenWaits(%q)", c.session), waitIDs(ws), c.want)
		}
		for _, c := range []struct {
			target string
			want   []string
		}{
			{"tok-1", []string{"wait-8", "wait-6"}},
			{"tok-2", []string{"wait-2"}},
			{"ask-1", []string{"wait-5"}},
			{"tok-none", nil},
		} {
			ws, err := tx.WaitsOn(ctx, c.target)
			if err != nil {
				t.Errorf("WaitsOn(%s): %v", c.target, err)
				continue
			}
			checkIDs(t, "WaitsOn("+c.target+")", waitIDs(ws), c.want)
		}
		// Listed rows carry every field.
		ws, err := tx.OpenWaits(ctx, "ses-2")
		if err != nil || len(ws) == 0 {
			t.Fatalf("OpenWaits(ses-2) = %v, %v", ws, err)
		}
		check(t, "open Wait", ws[0], storedWait(*newWait(rows[1])))
		ws, err = tx.WaitsOn(ctx, "ask-1")
		if err != nil || len(ws) == 0 {
			t.Fatalf("WaitsOn(ask-1) = %v, %v", ws, err)
		}
		check(t, "Wait on ask-1", ws[0], storedWait(*newWait(rows[4])))
		return nil
	})
	// A resolved wait is no longer open, nor waiting on its target.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		w, err := tx.GetWait(ctx, "wait-6")
		if err != nil {
			t.Fatalf("GetWait: %v", err)
		}
		w.Status, w.Outcome, w.ResolvedAt = "resolved", raw(`{"kind":"completed"}`), ptr(at(60))
		wantOK(t, "UpdateWait", tx.UpdateWait(ctx, w))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		ws, err := tx.OpenWaits(ctx, "ses-1")
		if err != nil {
			t.Fatalf("OpenWaits: %v", err)
		}
		checkIDs(t, "OpenWaits(ses-1) after resolving", waitIDs(ws), []string{"wait-9", "wait-2"})
		ws, err = tx.OpenWaits(ctx, "")
		if err != nil {
			t.Fatalf("OpenWaits: %v", err)
		}
		checkIDs(t, "OpenWaits(\"\") after resolving", waitIDs(ws), []string{"wait-9", "wait-8", "wait-5", "wait-3", "wait-2"})
		ws, err = tx.WaitsOn(ctx, "tok-1")
		if err != nil {
			t.Fatalf("WaitsOn: %v", err)
		}
		checkIDs(t, "WaitsOn(tok-1) after resolving", waitIDs(ws), []string{"wait-8"})
		return nil
	})
}

// --- transactions ---

// fixture is one row in every table, to see whether later writes change them.
func insertFixture(t *testing.T, s store.Store) {
	t.Helper()
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "PutMeta", tx.PutMeta(ctx, "m", "v1"))
		wantOK(t, "InsertSession", tx.InsertSession(ctx, newSession("ses-1", "a", "k")))
		wantOK(t, "InsertTurn", tx.InsertTurn(ctx, newTurn("ses-1", "turn-1", 1, "queued")))
		wantOK(t, "InsertMessage", tx.InsertMessage(ctx, &store.Message{ID: "msg-1", SessionID: "ses-1", TurnID: "turn-1",
			Content: raw(`[]`), Source: raw(`{}`), Status: "admitted", CreatedAt: at(1)}))
		wantOK(t, "AppendEvent", tx.AppendEvent(ctx, &store.Event{SessionID: "ses-1", Kind: "session.created", CreatedAt: at(1)}))
		wantOK(t, "PutProcess", tx.PutProcess(ctx, &store.Process{SessionID: "ses-1", LaunchID: "launch-1", PID: 10, LaunchedAt: at(1)}))
		wantOK(t, "InsertAsk", tx.InsertAsk(ctx, newAsk("ask-1", "turn-1", "pending", 1)))
		wantOK(t, "InsertToken", tx.InsertToken(ctx, newToken("tok-1", "ses-1", "pending", "k1", 1)))
		wantOK(t, "InsertWait", tx.InsertWait(ctx, &store.Wait{ID: "wait-1", SessionID: "ses-1", TurnID: "turn-1", Kind: "token",
			TargetID: "tok-1", Status: "waiting", CreatedAt: at(1)}))
		wantOK(t, "InsertComputer", tx.InsertComputer(ctx, newComputer("cmp-1", "ck", "available", 1)))
		wantOK(t, "InsertCommand", tx.InsertCommand(ctx, &store.Command{ID: "cmd-1", ComputerID: "cmp-1", Argv: []string{"true"},
			Status: "queued", CreatedAt: at(1)}))
		wantOK(t, "AppendCommandLog", tx.AppendCommandLog(ctx, &store.CommandLog{CommandID: "cmd-1", Sequence: 1, Stream: "stdout",
			Data: []byte("x"), At: at(1)}))
		return nil
	})
}

// writeEverything calls every write method of tx and returns their errors.
func writeEverything(ctx context.Context, tx store.Tx) []error {
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	add(tx.PutMeta(ctx, "m", "v2"))
	add(tx.PutMeta(ctx, "n", "new"))
	add(tx.InsertAPIKey(ctx, &store.APIKey{ID: "key-9", Name: "x", Hash: "h9", CreatedAt: at(9)}))
	add(tx.InsertDeployment(ctx, &store.Deployment{ID: "dep-9", Digest: "d9", Manifest: raw(`{}`), BinaryPath: "b", CreatedAt: at(9)}))
	add(tx.InsertSession(ctx, newSession("ses-9", "a", "k9")))
	changed := newSession("ses-1", "a", "k")
	changed.Status = "closed"
	add(tx.UpdateSession(ctx, changed))
	add(tx.InsertTurn(ctx, newTurn("ses-1", "turn-9", 2, "queued")))
	tr := newTurn("ses-1", "turn-1", 1, "running")
	add(tx.UpdateTurn(ctx, tr))
	add(tx.InsertMessage(ctx, &store.Message{ID: "msg-9", SessionID: "ses-1", TurnID: "turn-1",
		Content: raw(`[]`), Source: raw(`{}`), Status: "admitted", CreatedAt: at(9)}))
	add(tx.UpdateMessage(ctx, &store.Message{ID: "msg-1", SessionID: "ses-1", TurnID: "turn-1",
		Content: raw(`[]`), Source: raw(`{}`), Status: "delivered", CreatedAt: at(1)}))
	add(tx.AppendEvent(ctx, &store.Event{SessionID: "ses-1", Kind: "x", CreatedAt: at(9)}))
	add(tx.AppendEvent(ctx, &store.Event{SessionID: "ses-9", Kind: "x", CreatedAt: at(9)}))
	add(tx.InsertIdempotency(ctx, &store.Idempotency{Scope: "s", Key: "k", Digest: "d", Response: raw(`{}`), CreatedAt: at(9)}))
	add(tx.PutProcess(ctx, &store.Process{SessionID: "ses-9", LaunchID: "launch-9", PID: 9, LaunchedAt: at(9)}))
	add(tx.DeleteProcess(ctx, "ses-1", "launch-1"))
	add(tx.InsertAsk(ctx, newAsk("ask-9", "turn-1", "pending", 9)))
	responded := newAsk("ask-1", "turn-1", "responded", 1)
	responded.Answer, responded.ResolvedAt = raw(`"yes"`), ptr(at(9))
	add(tx.UpdateAsk(ctx, responded))
	add(tx.InsertToken(ctx, newToken("tok-9", "ses-1", "pending", "k9", 9)))
	completed := newToken("tok-1", "ses-1", "completed", "k1", 1)
	completed.Data, completed.ResolvedAt = raw(`{}`), ptr(at(9))
	add(tx.UpdateToken(ctx, completed))
	add(tx.InsertWait(ctx, &store.Wait{ID: "wait-9", SessionID: "ses-1", TurnID: "turn-1", Kind: "timer", Status: "waiting",
		Deadline: ptr(at(10)), CreatedAt: at(9)}))
	add(tx.UpdateWait(ctx, &store.Wait{ID: "wait-1", SessionID: "ses-1", TurnID: "turn-1", Kind: "token",
		TargetID: "tok-1", Status: "resolved", Outcome: raw(`{}`), CreatedAt: at(1), ResolvedAt: ptr(at(9))}))
	add(tx.InsertComputer(ctx, newComputer("cmp-9", "ck9", "available", 9)))
	gone := newComputer("cmp-1", "ck", "deleted", 1)
	gone.DeletedAt = ptr(at(9))
	add(tx.UpdateComputer(ctx, gone))
	add(tx.InsertCommand(ctx, &store.Command{ID: "cmd-9", ComputerID: "cmp-9", Argv: []string{"true"}, Status: "queued", CreatedAt: at(9)}))
	add(tx.UpdateCommand(ctx, &store.Command{ID: "cmd-1", ComputerID: "cmp-1", Argv: []string{"true"}, Status: "running",
		CreatedAt: at(1), StartedAt: ptr(at(9))}))
	add(tx.AppendCommandLog(ctx, &store.CommandLog{CommandID: "cmd-1", Sequence: 2, Stream: "stdout", Data: []byte("y"), At: at(9)}))
	add(tx.SetSessionIdleSince(ctx, "ses-1", ptr(at(9))))
	hold := &store.Hold{ID: "hold-9", SessionID: "ses-1", Kind: "interrupt", CanRelease: true, CreatedAt: at(9)}
	add(tx.InsertHold(ctx, hold))
	hold.ReleasedAt = ptr(at(9))
	add(tx.UpdateHold(ctx, hold))
	add(tx.PutBinary(ctx, "digest-9", []byte("bin")))
	_, _, err := tx.AcquireLease(ctx, "ses-9", "node-9", time.Hour)
	add(err)
	_, err = tx.RenewLeases(ctx, "node-9", time.Hour)
	add(err)
	_, _, err = tx.AcquireLease(ctx, "ses-8", "node-9", time.Hour)
	add(err)
	add(tx.ReleaseLease(ctx, "ses-8", "node-9"))
	_, err = tx.Heartbeat(ctx, "node-9", "inc-9", time.Hour)
	add(err)
	_, err = tx.RequestCommandCancel(ctx, "cmd-1")
	add(err)
	return errs
}

// checkFixtureOnly verifies that the store holds the fixture and nothing of
// writeEverything.
func checkFixtureOnly(t *testing.T, s store.Store) {
	t.Helper()
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		if ses, err := tx.GetSession(ctx, "ses-1"); err != nil || ses.IdleSince != nil {
			t.Errorf("GetSession(ses-1) = %+v, %v; want no idle time", ses, err)
		}
		_, err := tx.GetHold(ctx, "hold-9")
		wantErr(t, "GetHold(hold-9)", err, store.ErrNotFound)
		_, err = tx.GetBinary(ctx, "digest-9")
		wantErr(t, "GetBinary(digest-9)", err, store.ErrNotFound)
		if m, err := tx.Leases(ctx); err != nil || len(m) != 0 {
			t.Errorf("Leases = %v, %v; want none", m, err)
		}
		if m, err := tx.LiveNodes(ctx); err != nil || len(m) != 0 {
			t.Errorf("LiveNodes = %v, %v; want none", m, err)
		}
		if c, err := tx.GetCommand(ctx, "cmd-1"); err != nil || c.CancelRequested {
			t.Errorf("GetCommand(cmd-1) = %+v, %v; want no cancel requested", c, err)
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		if v, err := tx.GetMeta(ctx, "m"); err != nil || v != "v1" {
			t.Errorf("GetMeta(m) = %q, %v; want v1", v, err)
		}
		_, err := tx.GetMeta(ctx, "n")
		wantErr(t, "GetMeta(n)", err, store.ErrNotFound)
		_, err = tx.GetAPIKeyByHash(ctx, "h9")
		wantErr(t, "GetAPIKeyByHash", err, store.ErrNotFound)
		_, err = tx.GetDeployment(ctx, "dep-9")
		wantErr(t, "GetDeployment", err, store.ErrNotFound)
		_, err = tx.GetSession(ctx, "ses-9")
		wantErr(t, "GetSession(ses-9)", err, store.ErrNotFound)
		if ses, err := tx.GetSession(ctx, "ses-1"); err != nil || ses.Status != "open" {
			t.Errorf("GetSession(ses-1) = %+v, %v; want status open", ses, err)
		}
		_, err = tx.GetTurn(ctx, "ses-1", "turn-9")
		wantErr(t, "GetTurn(turn-9)", err, store.ErrNotFound)
		if tr, err := tx.GetTurn(ctx, "ses-1", "turn-1"); err != nil || tr.Status != "queued" {
			t.Errorf("GetTurn(turn-1) = %+v, %v; want status queued", tr, err)
		}
		_, err = tx.GetMessage(ctx, "msg-9")
		wantErr(t, "GetMessage(msg-9)", err, store.ErrNotFound)
		if m, err := tx.GetMessage(ctx, "msg-1"); err != nil || m.Status != "admitted" {
			t.Errorf("GetMessage(msg-1) = %+v, %v; want status admitted", m, err)
		}
		if n, err := tx.LastEventSequence(ctx, "ses-1"); err != nil || n != 1 {
			t.Errorf("LastEventSequence(ses-1) = %d, %v; want 1", n, err)
		}
		if n, err := tx.LastEventSequence(ctx, "ses-9"); err != nil || n != 0 {
			t.Errorf("LastEventSequence(ses-9) = %d, %v; want 0", n, err)
		}
		_, err = tx.GetIdempotency(ctx, "s", "k")
		wantErr(t, "GetIdempotency", err, store.ErrNotFound)
		_, err = tx.GetProcess(ctx, "ses-9")
		wantErr(t, "GetProcess(ses-9)", err, store.ErrNotFound)
		if p, err := tx.GetProcess(ctx, "ses-1"); err != nil || p.LaunchID != "launch-1" {
			t.Errorf("GetProcess(ses-1) = %+v, %v; want launch-1", p, err)
		}
		_, err = tx.GetAsk(ctx, "ask-9")
		wantErr(t, "GetAsk(ask-9)", err, store.ErrNotFound)
		if a, err := tx.GetAsk(ctx, "ask-1"); err != nil || a.Status != "pending" || a.Answer != nil {
			t.Errorf("GetAsk(ask-1) = %+v, %v; want status pending", a, err)
		}
		_, err = tx.GetToken(ctx, "tok-9")
		wantErr(t, "GetToken(tok-9)", err, store.ErrNotFound)
		if tk, err := tx.GetToken(ctx, "tok-1"); err != nil || tk.Status != "pending" || tk.Data != nil {
			t.Errorf("GetToken(tok-1) = %+v, %v; want status pending", tk, err)
		}
		_, err = tx.GetWait(ctx, "wait-9")
		wantErr(t, "GetWait(wait-9)", err, store.ErrNotFound)
		if w, err := tx.GetWait(ctx, "wait-1"); err != nil || w.Status != "waiting" || w.Outcome != nil {
			t.Errorf("GetWait(wait-1) = %+v, %v; want status waiting", w, err)
		}
		_, err = tx.GetComputer(ctx, "cmp-9")
		wantErr(t, "GetComputer(cmp-9)", err, store.ErrNotFound)
		if c, err := tx.GetComputer(ctx, "cmp-1"); err != nil || c.Status != "available" || c.DeletedAt != nil {
			t.Errorf("GetComputer(cmp-1) = %+v, %v; want status available", c, err)
		}
		_, err = tx.GetCommand(ctx, "cmd-9")
		wantErr(t, "GetCommand(cmd-9)", err, store.ErrNotFound)
		if c, err := tx.GetCommand(ctx, "cmd-1"); err != nil || c.Status != "queued" || c.StartedAt != nil {
			t.Errorf("GetCommand(cmd-1) = %+v, %v; want status queued", c, err)
		}
		if ls, err := tx.ListCommandLogs(ctx, "cmd-1", 0, 10); err != nil || len(ls) != 1 || string(ls[0].Data) != "x" {
			t.Errorf("ListCommandLogs(cmd-1) = %+v, %v; want the fixture's one chunk", ls, err)
		}
		return nil
	})
}

func testUpdateErrorWritesNothing(t *testing.T, s store.Store) {
	insertFixture(t, s)
	err := s.Update(t.Context(), func(tx store.Tx) error {
		for i, err := range writeEverything(t.Context(), tx) {
			if err != nil {
				t.Errorf("write #%d in Update: %v", i, err)
			}
		}
		return fmt.Errorf("wrapped: %w", errRollback)
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("Update returned %v, want the error of its fn", err)
	}
	checkFixtureOnly(t, s)
	// The store still takes writes afterwards.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		e := &store.Event{SessionID: "ses-1", Kind: "after", CreatedAt: at(10)}
		wantOK(t, "AppendEvent", tx.AppendEvent(ctx, e))
		if e.Sequence != 2 {
			t.Errorf("AppendEvent after a failed Update assigned sequence %d, want 2", e.Sequence)
		}
		return nil
	})
}

func testUpdateCanceledContext(t *testing.T, s store.Store) {
	insertFixture(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := s.Update(ctx, func(tx store.Tx) error {
		writeEverything(ctx, tx)
		return nil
	})
	if err == nil {
		t.Fatal("Update with a canceled context succeeded")
	}
	checkFixtureOnly(t, s)
}

// testTxUsableAfterError: a refused insert or a missing row does not spoil
// the transaction; the engine relies on "insert, and on ErrDuplicate read the
// existing row" within one Update. (A PostgreSQL store needs a savepoint
// around statements that may fail.)
func testTxUsableAfterError(t *testing.T, s store.Store) {
	insertFixture(t, s)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantErr(t, "InsertSession(duplicate key)", tx.InsertSession(ctx, newSession("ses-2", "a", "k")), store.ErrDuplicate)
		existing, err := tx.GetSessionByKey(ctx, "a", "k")
		if err != nil || existing.ID != "ses-1" {
			t.Errorf("GetSessionByKey after ErrDuplicate = %v, %v", existing, err)
		}
		_, err = tx.GetTurn(ctx, "ses-1", "turn-missing")
		wantErr(t, "GetTurn(missing)", err, store.ErrNotFound)
		wantErr(t, "InsertTurn(duplicate)", tx.InsertTurn(ctx, newTurn("ses-1", "turn-1", 1, "queued")), store.ErrDuplicate)
		wantOK(t, "InsertTurn after errors", tx.InsertTurn(ctx, newTurn("ses-1", "turn-2", 2, "queued")))
		e := &store.Event{SessionID: "ses-1", Kind: "turn.queued", CreatedAt: at(2)}
		wantOK(t, "AppendEvent after errors", tx.AppendEvent(ctx, e))
		if e.Sequence != 2 {
			t.Errorf("AppendEvent assigned %d, want 2", e.Sequence)
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.GetTurn(ctx, "ses-1", "turn-2"); err != nil {
			t.Errorf("GetTurn(turn-2) written after errors in the same Update: %v", err)
		}
		if n, err := tx.LastEventSequence(ctx, "ses-1"); err != nil || n != 2 {
			t.Errorf("LastEventSequence = %d, %v; want 2", n, err)
		}
		_, err := tx.GetSession(ctx, "ses-2")
		wantErr(t, "GetSession(refused)", err, store.ErrNotFound)
		return nil
	})
}

func testViewIsReadOnly(t *testing.T, s store.Store) {
	insertFixture(t, s)
	err := s.View(t.Context(), func(tx store.Tx) error {
		for i, err := range writeEverything(t.Context(), tx) {
			if err == nil {
				t.Errorf("write #%d in View succeeded", i)
			}
		}
		// Reads still work after refused writes.
		if v, err := tx.GetMeta(t.Context(), "m"); err != nil || v != "v1" {
			t.Errorf("GetMeta after refused writes = %q, %v", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	checkFixtureOnly(t, s)
	err = s.View(t.Context(), func(tx store.Tx) error { return fmt.Errorf("wrapped: %w", errRollback) })
	if !errors.Is(err, errRollback) {
		t.Errorf("View returned %v, want the error of its fn", err)
	}
}

// testRead: Read refuses writes like View, and each of its reads sees what
// was committed before it, including Updates that commit while it runs.
func testRead(t *testing.T, s store.Store) {
	insertFixture(t, s)
	err := s.Read(t.Context(), func(tx store.Tx) error {
		if v, err := tx.GetMeta(t.Context(), "m"); err != nil || v != "v1" {
			t.Errorf("GetMeta = %q, %v", v, err)
		}
		for i, err := range writeEverything(t.Context(), tx) {
			if err == nil {
				t.Errorf("write #%d in Read succeeded", i)
			}
		}
		if _, err := tx.GetSession(t.Context(), "ses-none"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetSession(ses-none) in Read = %v, want ErrNotFound", err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	checkFixtureOnly(t, s)
	err = s.Read(t.Context(), func(tx store.Tx) error {
		update(t, s, func(ctx context.Context, tx store.Tx) error { return tx.PutMeta(ctx, "m", "v2") })
		if v, err := tx.GetMeta(t.Context(), "m"); err != nil || (v != "v2" && v != "v1") {
			t.Errorf("GetMeta after a concurrent Update = %q, %v", v, err)
		}
		return fmt.Errorf("wrapped: %w", errRollback)
	})
	if !errors.Is(err, errRollback) {
		t.Errorf("Read returned %v, want the error of its fn", err)
	}
	err = s.Read(t.Context(), func(tx store.Tx) error {
		if v, err := tx.GetMeta(t.Context(), "m"); err != nil || v != "v2" {
			t.Errorf("GetMeta in a Read after an Update = %q, %v; want v2", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
}

// testViewIsSnapshot: a View does not see Updates that commit while it runs.
func testViewIsSnapshot(t *testing.T, s store.Store) {
	insertFixture(t, s)
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		if v, err := tx.GetMeta(ctx, "m"); err != nil || v != "v1" {
			t.Fatalf("GetMeta = %q, %v", v, err)
		}
		update(t, s, func(ctx context.Context, tx store.Tx) error {
			wantOK(t, "PutMeta", tx.PutMeta(ctx, "m", "v2"))
			wantOK(t, "AppendEvent", tx.AppendEvent(ctx, &store.Event{SessionID: "ses-1", Kind: "x", CreatedAt: at(2)}))
			return nil
		})
		if v, err := tx.GetMeta(ctx, "m"); err != nil || v != "v1" {
			t.Errorf("GetMeta in the View after a concurrent Update = %q, %v; want v1", v, err)
		}
		if n, err := tx.LastEventSequence(ctx, "ses-1"); err != nil || n != 1 {
			t.Errorf("LastEventSequence in the View after a concurrent Update = %d, %v; want 1", n, err)
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		if v, err := tx.GetMeta(ctx, "m"); err != nil || v != "v2" {
			t.Errorf("GetMeta in a later View = %q, %v; want v2", v, err)
		}
		return nil
	})
}

// testConcurrentUpdates runs many Updates at once, so that a store that
// commits them in groups commits many together, some of them failing. Each
// goroutine appends to its own Session and to a shared one.
func testConcurrentUpdates(t *testing.T, s store.Store) {
	const (
		workers = 50
		rounds  = 8
		shared  = "ses-shared"
	)
	own := func(w int) string { return fmt.Sprintf("ses-w%02d", w) }
	// failsAt says which round of a worker runs an Update that fails after
	// writing (-1: none).
	failsAt := func(w int) int {
		if w%5 == 2 {
			return w % rounds
		}
		return -1
	}

	// The first Update blocks until every worker is about to call Update,
	// so that their Updates queue up behind it.
	var ready sync.WaitGroup
	ready.Add(workers)
	blocked := make(chan error, 1)
	go func() {
		blocked <- s.Update(t.Context(), func(tx store.Tx) error {
			ready.Wait()
			return tx.PutMeta(t.Context(), "gate", "open")
		})
	}()

	type result struct {
		worker, round int
		fails         bool
		err           error
	}
	results := make(chan result, workers*(rounds+1))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			first := true
			for r := range rounds {
				// A failing Update runs before the round's successful one.
				runs := []bool{false}
				if r == failsAt(w) {
					runs = []bool{true, false}
				}
				for _, fails := range runs {
					if first {
						ready.Done()
						first = false
					}
					err := s.Update(t.Context(), func(tx store.Tx) error {
						data := raw(fmt.Sprintf(`{"worker":%d,"round":%d,"fails":%t}`, w, r, fails))
						for _, ses := range []string{own(w), shared} {
							e := &store.Event{SessionID: ses, Kind: "test", Data: data, CreatedAt: at(r)}
							if err := tx.AppendEvent(t.Context(), e); err != nil {
								return err
							}
						}
						if fails {
							return errRollback
						}
						return nil
					})
					results <- result{w, r, fails, err}
				}
			}
		})
	}
	wg.Wait()
	close(results)
	if err := <-blocked; err != nil {
		t.Fatalf("blocking Update: %v", err)
	}
	for res := range results {
		switch {
		case res.fails && !errors.Is(res.err, errRollback):
			t.Errorf("worker %d round %d: failing Update returned %v, want its own error", res.worker, res.round, res.err)
		case !res.fails && res.err != nil:
			t.Errorf("worker %d round %d: Update: %v", res.worker, res.round, res.err)
		}
	}

	type payload struct {
		Worker int  `json:"worker"`
		Round  int  `json:"round"`
		Fails  bool `json:"fails"`
	}
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		if v, err := tx.GetMeta(ctx, "gate"); err != nil || v != "open" {
			t.Errorf("GetMeta(gate) = %q, %v", v, err)
		}
		for w := range workers {
			es, err := tx.ListEvents(ctx, own(w), 0, 1000)
			if err != nil {
				t.Fatalf("ListEvents: %v", err)
			}
			if len(es) != rounds {
				t.Errorf("%s has %d events, want %d", own(w), len(es), rounds)
			}
			for i, e := range es {
				var p payload
				if err := json.Unmarshal(e.Data, &p); err != nil {
					t.Fatalf("event data %s: %v", e.Data, err)
				}
				if e.Sequence != int64(i+1) || p != (payload{Worker: w, Round: i}) {
					t.Errorf("%s event %d: sequence %d, data %s; want sequence %d of round %d", own(w), i, e.Sequence, e.Data, i+1, i)
				}
			}
		}
		es, err := tx.ListEvents(ctx, shared, 0, 1000)
		if err != nil {
			t.Fatalf("ListEvents: %v", err)
		}
		if len(es) != workers*rounds {
			t.Errorf("shared Session has %d events, want %d", len(es), workers*rounds)
		}
		next := make([]int, workers) // next round expected of each worker
		for i, e := range es {
			var p payload
			if err := json.Unmarshal(e.Data, &p); err != nil {
				t.Fatalf("event data %s: %v", e.Data, err)
			}
			if e.Sequence != int64(i+1) {
				t.Errorf("shared event %d has sequence %d", i, e.Sequence)
			}
			if p.Fails || p.Worker < 0 || p.Worker >= workers || p.Round != next[p.Worker] {
				t.Errorf("shared event %d: %s; want worker's round %d of a successful Update", e.Sequence, e.Data, next[max(0, min(p.Worker, workers-1))])
				continue
			}
			next[p.Worker]++
		}
		if n, err := tx.LastEventSequence(ctx, shared); err != nil || n != workers*rounds {
			t.Errorf("LastEventSequence(shared) = %d, %v; want %d", n, err, workers*rounds)
		}
		return nil
	})
}

// testUUIDIDs uses real UUIDv7 IDs, as the engine does: a store may encode
// them compactly, and every read must give them back exactly and in order.
func testUUIDIDs(t *testing.T, s store.Store) {
	sid := uuid.Must(uuid.NewV7()).String()
	var ids []string
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "InsertSession", tx.InsertSession(ctx, newSession(sid, "agent", "")))
		for i := 1; i <= 3; i++ {
			id := uuid.Must(uuid.NewV7()).String()
			ids = append(ids, id)
			wantOK(t, "InsertTurn", tx.InsertTurn(ctx, newTurn(sid, id, int64(i), "queued")))
			wantOK(t, "AppendEvent", tx.AppendEvent(ctx, &store.Event{SessionID: sid, TurnID: id, Kind: "turn.queued", CreatedAt: at(i)}))
		}
		return tx.AppendEvent(ctx, &store.Event{SessionID: sid, Kind: "session.note", CreatedAt: at(4)})
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for i, id := range ids {
			got, err := tx.GetTurn(ctx, sid, id)
			if err != nil || got.ID != id || got.SessionID != sid || got.Sequence != int64(i+1) {
				t.Errorf("GetTurn(%s) = %+v, %v", id, got, err)
			}
		}
		turns, err := tx.ListTurns(ctx, sid, 0, 10)
		if err != nil || len(turns) != 3 || turns[0].ID != ids[0] || turns[2].ID != ids[2] {
			t.Errorf("ListTurns = %+v, %v", turns, err)
		}
		active, err := tx.ActiveTurn(ctx, sid)
		if err != nil || active.ID != ids[0] {
			t.Errorf("ActiveTurn = %+v, %v", active, err)
		}
		evs, err := tx.ListEvents(ctx, sid, 0, 10)
		if err != nil || len(evs) != 4 || evs[0].SessionID != sid || evs[1].TurnID != ids[1] || evs[3].TurnID != "" {
			t.Errorf("ListEvents = %+v, %v", evs, err)
		}
		work, err := tx.SessionsWithWork(ctx)
		if err != nil || len(work) != 1 || work[0] != sid {
			t.Errorf("SessionsWithWork = %v, %v", work, err)
		}
		if _, err := tx.GetTurn(ctx, uuid.Must(uuid.NewV7()).String(), ids[0]); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetTurn in another session: %v", err)
		}
		return nil
	})
}

// --- holds ---

func storedHold(h store.Hold) store.Hold {
	h.CreatedAt, h.ReleasedAt, h.RecoveredAt = stored(h.CreatedAt), storedPtr(h.ReleasedAt), storedPtr(h.RecoveredAt)
	return h
}

func testHolds(t *testing.T, s store.Store) {
	interrupt := &store.Hold{ID: "hold-1", SessionID: "ses-1", Kind: "interrupt", CanRelease: true, CreatedAt: at(70), IssuerSessionID: "ses-0"}
	failed := &store.Hold{ID: "hold-2", SessionID: "ses-2", Kind: "process_failed", CanRelease: true,
		Reason: "the session process exited with status 7", CreatedAt: at(71)}
	other := &store.Hold{ID: "hold-3", SessionID: "ses-3", Kind: "storage_pressure", CreatedAt: at(72)}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, h := range []*store.Hold{interrupt, failed, other} {
			wantOK(t, "InsertHold("+h.ID+")", tx.InsertHold(ctx, h))
		}
		wantErr(t, "InsertHold(duplicate)", tx.InsertHold(ctx, interrupt), store.ErrDuplicate)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetHold(ctx, failed.ID)
		if err != nil {
			t.Fatalf("GetHold: %v", err)
		}
		check(t, "GetHold", *got, storedHold(*failed))
		_, err = tx.GetHold(ctx, "hold-missing")
		wantErr(t, "GetHold(missing)", err, store.ErrNotFound)
		hs, err := tx.ActiveHolds(ctx, []string{"ses-2", "ses-1"})
		if err != nil {
			t.Fatalf("ActiveHolds: %v", err)
		}
		check(t, "ActiveHolds(ses-1, ses-2)", hs, []store.Hold{storedHold(*interrupt), storedHold(*failed)})
		if hs, err := tx.ActiveHolds(ctx, nil); err != nil || len(hs) != 0 {
			t.Errorf("ActiveHolds(none) = %v, %v", hs, err)
		}
		if hs, err := tx.HoldsToRecover(ctx, "ses-2"); err != nil || len(hs) != 0 {
			t.Errorf("HoldsToRecover before release = %v, %v", hs, err)
		}
		return nil
	})
	// Released holds are no longer active; a released process_failed hold
	// waits for its reconstruction.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		interrupt.ReleasedAt, failed.ReleasedAt = ptr(at(73)), ptr(at(74))
		wantOK(t, "UpdateHold(interrupt)", tx.UpdateHold(ctx, interrupt))
		wantOK(t, "UpdateHold(failed)", tx.UpdateHold(ctx, failed))
		wantErr(t, "UpdateHold(missing)", tx.UpdateHold(ctx, &store.Hold{ID: "hold-missing"}), store.ErrNotFound)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		if hs, err := tx.ActiveHolds(ctx, []string{"ses-1", "ses-2", "ses-3"}); err != nil || len(hs) != 1 || hs[0].ID != other.ID {
			t.Errorf("ActiveHolds after release = %v, %v", hs, err)
		}
		hs, err := tx.HoldsToRecover(ctx, "ses-2")
		if err != nil {
			t.Fatalf("HoldsToRecover: %v", err)
		}
		check(t, "HoldsToRecover", hs, []store.Hold{storedHold(*failed)})
		if hs, err := tx.HoldsToRecover(ctx, "ses-1"); err != nil || len(hs) != 0 {
			t.Errorf("HoldsToRecover of an interrupt hold = %v, %v", hs, err)
		}
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		failed.RecoveredAt = ptr(at(75))
		wantOK(t, "UpdateHold(recovered)", tx.UpdateHold(ctx, failed))
		return nil
	})
	// Within one Update, ActiveHolds follows the holds that the same
	// transaction inserts, releases and makes active again.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		active := func(what string, want ...string) {
			t.Helper()
			hs, err := tx.ActiveHolds(ctx, []string{"ses-4", "ses-1"})
			var ids []string
			for _, h := range hs {
				ids = append(ids, h.ID)
			}
			if err != nil || fmt.Sprint(ids) != fmt.Sprint(want) {
				t.Errorf("ActiveHolds(ses-4, ses-1) %s = %v, %v; want %v", what, ids, err, want)
			}
		}
		active("without holds")
		h := &store.Hold{ID: "hold-4", SessionID: "ses-4", Kind: "interrupt", CanRelease: true, CreatedAt: at(76)}
		wantOK(t, "InsertHold", tx.InsertHold(ctx, h))
		active("after InsertHold", "hold-4")
		h.ReleasedAt = ptr(at(77))
		wantOK(t, "UpdateHold(released)", tx.UpdateHold(ctx, h))
		active("after its release")
		interrupt.ReleasedAt = nil
		wantOK(t, "UpdateHold(active again)", tx.UpdateHold(ctx, interrupt))
		active("after a hold is active again", "hold-1")
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		if hs, err := tx.HoldsToRecover(ctx, "ses-2"); err != nil || len(hs) != 0 {
			t.Errorf("HoldsToRecover after recovery = %v, %v", hs, err)
		}
		got, err := tx.GetHold(ctx, failed.ID)
		if err == nil {
			check(t, "GetHold(recovered)", *got, storedHold(*failed))
		}
		return nil
	})
}

// --- computers and commands ---

func storedComputer(c store.Computer) store.Computer {
	c.CreatedAt, c.DeletedAt = stored(c.CreatedAt), storedPtr(c.DeletedAt)
	return c
}

func computerIDs(cs []store.Computer) []string {
	ids := []string{}
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	return ids
}

func newComputer(id, key, status string, n int) *store.Computer {
	return &store.Computer{ID: id, Template: "default", DeploymentID: "dep-1", Key: key, Status: status, CreatedAt: at(n)}
}

func testComputers(t *testing.T, s store.Store) {
	keyed := newComputer("cmp-1", "alpha", "available", 10)
	// Computers without a key do not collide with each other.
	plain := newComputer("cmp-2", "", "available", 11)
	plain2 := newComputer("cmp-3", "", "available", 12)
	deleting := newComputer("cmp-4", "beta", "deleting", 13)
	deleting.Template, deleting.DeploymentID = "gpu", "dep-2"
	// A Computer stored deleted does not hold its key.
	gone := newComputer("cmp-5", "beta", "deleted", 5)
	gone.DeletedAt = ptr(at(6))
	all := []*store.Computer{keyed, plain, plain2, deleting, gone}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		// Insert in reverse so that insertion order is not ID order.
		for _, c := range slices.Backward(all) {
			wantOK(t, "InsertComputer("+c.ID+")", tx.InsertComputer(ctx, c))
		}
		dup := *plain
		dup.Key = "gamma"
		wantErr(t, "InsertComputer(same id)", tx.InsertComputer(ctx, &dup), store.ErrDuplicate)
		wantErr(t, "InsertComputer(live key)", tx.InsertComputer(ctx, newComputer("cmp-9", "alpha", "available", 14)), store.ErrDuplicate)
		wantErr(t, "InsertComputer(key of a deleting Computer)", tx.InsertComputer(ctx, newComputer("cmp-9", "beta", "available", 14)), store.ErrDuplicate)
		// The transaction goes on after the refusals.
		got, err := tx.GetComputerByKey(ctx, "alpha")
		if err != nil || got.ID != keyed.ID {
			t.Errorf("GetComputerByKey after ErrDuplicate = %+v, %v", got, err)
		}
		_, err = tx.GetComputer(ctx, "cmp-9")
		wantErr(t, "GetComputer(refused)", err, store.ErrNotFound)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, want := range all {
			got, err := tx.GetComputer(ctx, want.ID)
			if err != nil {
				t.Errorf("GetComputer(%s): %v", want.ID, err)
				continue
			}
			check(t, "GetComputer("+want.ID+")", *got, storedComputer(*want))
		}
		_, err := tx.GetComputer(ctx, "cmp-missing")
		wantErr(t, "GetComputer(missing)", err, store.ErrNotFound)
		got, err := tx.GetComputerByKey(ctx, "alpha")
		if err != nil {
			t.Fatalf("GetComputerByKey(alpha): %v", err)
		}
		check(t, "GetComputerByKey(alpha)", *got, storedComputer(*keyed))
		// A deleting Computer still holds its key; a deleted one does not.
		got, err = tx.GetComputerByKey(ctx, "beta")
		if err != nil || got.ID != deleting.ID {
			t.Errorf("GetComputerByKey(beta) = %+v, %v; want %s", got, err, deleting.ID)
		}
		_, err = tx.GetComputerByKey(ctx, "")
		wantErr(t, "GetComputerByKey(empty)", err, store.ErrNotFound)
		_, err = tx.GetComputerByKey(ctx, "missing")
		wantErr(t, "GetComputerByKey(missing)", err, store.ErrNotFound)
		return nil
	})

	// Listing: by ID, deleted ones included, in pages.
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []struct {
			after string
			limit int
			want  []string
		}{
			{"", 100, []string{"cmp-1", "cmp-2", "cmp-3", "cmp-4", "cmp-5"}},
			{"", 2, []string{"cmp-1", "cmp-2"}},
			{"cmp-2", 2, []string{"cmp-3", "cmp-4"}},
			{"cmp-4", 2, []string{"cmp-5"}},
			{"cmp-5", 2, nil},
			{"cmp-0", 1, []string{"cmp-1"}},
		} {
			cs, err := tx.ListComputers(ctx, c.after, c.limit)
			if err != nil {
				t.Errorf("ListComputers(%q, %d): %v", c.after, c.limit, err)
				continue
			}
			checkIDs(t, fmt.Sprintf("ListComputers(%q, %d)", c.after, c.limit), computerIDs(cs), c.want)
		}
		var paged []string
		after := ""
		for range 10 {
			cs, err := tx.ListComputers(ctx, after, 2)
			if err != nil {
				t.Fatalf("ListComputers: %v", err)
			}
			if len(cs) == 0 {
				break
			}
			paged = append(paged, computerIDs(cs)...)
			after = cs[len(cs)-1].ID
		}
		checkIDs(t, "paged ListComputers", paged, []string{"cmp-1", "cmp-2", "cmp-3", "cmp-4", "cmp-5"})
		// Listed rows carry every field.
		cs, err := tx.ListComputers(ctx, "cmp-3", 2)
		if err != nil {
			t.Fatalf("ListComputers: %v", err)
		}
		check(t, "listed Computers", cs, []store.Computer{storedComputer(*deleting), storedComputer(*gone)})
		return nil
	})

	// Deleting a Computer frees its key; UpdateComputer writes Status and
	// DeletedAt only.
	deleted := *keyed
	deleted.Status, deleted.DeletedAt = "deleted", ptr(at(20))
	reuse := newComputer("cmp-6", "alpha", "available", 21)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		changed := deleted
		changed.Template, changed.DeploymentID, changed.Key, changed.CreatedAt = "other", "dep-9", "zeta", at(99)
		wantOK(t, "UpdateComputer(deleted)", tx.UpdateComputer(ctx, &changed))
		got, err := tx.GetComputer(ctx, keyed.ID)
		if err != nil {
			t.Fatalf("GetComputer in the writing Update: %v", err)
		}
		check(t, "GetComputer in the writing Update", *got, storedComputer(deleted))
		_, err = tx.GetComputerByKey(ctx, "alpha")
		wantErr(t, "GetComputerByKey(alpha) of a deleted Computer", err, store.ErrNotFound)
		wantOK(t, "InsertComputer(freed key)", tx.InsertComputer(ctx, reuse))
		wantErr(t, "InsertComputer(reused key again)", tx.InsertComputer(ctx, newComputer("cmp-7", "alpha", "available", 22)), store.ErrDuplicate)
		missing := *plain
		missing.ID = "cmp-missing"
		wantErr(t, "UpdateComputer(missing)", tx.UpdateComputer(ctx, &missing), store.ErrNotFound)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetComputer(ctx, keyed.ID)
		if err != nil {
			t.Fatalf("GetComputer: %v", err)
		}
		check(t, "deleted Computer", *got, storedComputer(deleted))
		got, err = tx.GetComputerByKey(ctx, "alpha")
		if err != nil {
			t.Fatalf("GetComputerByKey(alpha): %v", err)
		}
		check(t, "GetComputerByKey(reused key)", *got, storedComputer(*reuse))
		_, err = tx.GetComputerByKey(ctx, "zeta")
		wantErr(t, "GetComputerByKey(key not written by UpdateComputer)", err, store.ErrNotFound)
		_, err = tx.GetComputer(ctx, "cmp-7")
		wantErr(t, "GetComputer(refused)", err, store.ErrNotFound)
		cs, err := tx.ListComputers(ctx, "", 100)
		if err != nil {
			t.Fatalf("ListComputers: %v", err)
		}
		checkIDs(t, "ListComputers after the delete", computerIDs(cs), []string{"cmp-1", "cmp-2", "cmp-3", "cmp-4", "cmp-5", "cmp-6"})
		return nil
	})

	// A deleting Computer that finishes deleting frees its key too, and
	// DeletedAt goes back to nil.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		done := *deleting
		done.Status, done.DeletedAt = "deleted", ptr(at(30))
		wantOK(t, "UpdateComputer(deleting → deleted)", tx.UpdateComputer(ctx, &done))
		wantOK(t, "InsertComputer(beta)", tx.InsertComputer(ctx, newComputer("cmp-8", "beta", "available", 31)))
		cleared := *plain
		cleared.Status = "deleting"
		wantOK(t, "UpdateComputer(no DeletedAt)", tx.UpdateComputer(ctx, &cleared))
		got, err := tx.GetComputer(ctx, plain.ID)
		if err == nil {
			check(t, "GetComputer(deleting)", *got, storedComputer(cleared))
		} else {
			t.Errorf("GetComputer: %v", err)
		}
		return nil
	})

	// Concurrent creates with one key: exactly one wins.
	const racers = 8
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			errs[i] = s.Update(t.Context(), func(tx store.Tx) error {
				return tx.InsertComputer(t.Context(), newComputer(fmt.Sprintf("cmp-race-%d", i), "raced", "available", 40+i))
			})
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrDuplicate):
			t.Errorf("concurrent InsertComputer #%d: %v", i, err)
		}
	}
	if won != 1 {
		t.Errorf("concurrent InsertComputer with one key: %d succeeded, want 1", won)
	}
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.GetComputerByKey(ctx, "raced"); err != nil {
			t.Errorf("GetComputerByKey(raced): %v", err)
		}
		return nil
	})
}

func storedCommand(c store.Command) store.Command {
	c.CreatedAt, c.StartedAt, c.EndedAt = stored(c.CreatedAt), storedPtr(c.StartedAt), storedPtr(c.EndedAt)
	return c
}

func commandIDs(cs []store.Command) []string {
	ids := []string{}
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	return ids
}

func testCommands(t *testing.T, s store.Store) {
	full := &store.Command{ID: "cmd-1", ComputerID: "cmp-1", Argv: []string{"sh", "-c", "echo \"$A\" | tr a-z A-Z", "", "ü\n\t"},
		Cwd: "/workspace/src", Env: []string{"A=1", "B= two ", "C=ü=\"x\""}, Stdin: []byte("in\x00put\xff\n"),
		TimeoutMS: 30_000, Status: "queued", CreatedAt: at(30), NodeID: "node-1"}
	running := &store.Command{ID: "cmd-2", ComputerID: "cmp-1", Argv: []string{"true"}, Status: "running",
		CreatedAt: at(29), StartedAt: ptr(at(31))}
	exited := &store.Command{ID: "cmd-3", ComputerID: "cmp-2", Argv: []string{"false"}, Status: "exited",
		ExitCode: ptr(0), CreatedAt: at(28), StartedAt: ptr(at(28)), EndedAt: ptr(at(29))}
	failed := &store.Command{ID: "cmd-4", ComputerID: "cmp-1", Argv: []string{"missing-binary"}, Status: "failed",
		Error: "exec: \"missing-binary\": executable file not found in $PATH", CreatedAt: at(32), EndedAt: ptr(at(32))}
	running.CancelRequested = true
	// Same creation time as cmd-2: the ID breaks the tie.
	queued := &store.Command{ID: "cmd-5", ComputerID: "cmp-2", Argv: []string{"sleep", "1"}, Env: []string{}, Stdin: []byte{},
		Status: "queued", CreatedAt: at(29)}
	all := []*store.Command{full, running, exited, failed, queued}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range slices.Backward(all) {
			wantOK(t, "InsertCommand("+c.ID+")", tx.InsertCommand(ctx, c))
		}
		dup := *exited
		dup.ID = full.ID
		wantErr(t, "InsertCommand(same id)", tx.InsertCommand(ctx, &dup), store.ErrDuplicate)
		got, err := tx.GetCommand(ctx, full.ID)
		if err != nil {
			t.Fatalf("GetCommand after ErrDuplicate: %v", err)
		}
		check(t, "GetCommand after refused duplicate", *got, storedCommand(*full))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, want := range all {
			got, err := tx.GetCommand(ctx, want.ID)
			if err != nil {
				t.Errorf("GetCommand(%s): %v", want.ID, err)
				continue
			}
			w := storedCommand(*want)
			if len(w.Stdin) == 0 {
				w.Stdin = nil // empty stdin reads back nil
			}
			check(t, "GetCommand("+want.ID+")", *got, w)
		}
		// Empty lists and stdin read back as nil.
		for _, id := range []string{running.ID, queued.ID} {
			got, err := tx.GetCommand(ctx, id)
			if err != nil {
				t.Fatalf("GetCommand(%s): %v", id, err)
			}
			if got.Env != nil || got.Stdin != nil {
				t.Errorf("GetCommand(%s): Env %#v, Stdin %#v; want nil", id, got.Env, got.Stdin)
			}
		}
		_, err := tx.GetCommand(ctx, "cmd-missing")
		wantErr(t, "GetCommand(missing)", err, store.ErrNotFound)
		return nil
	})

	// Listing a Computer's Commands by ID, in pages.
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []struct {
			computer, after string
			limit           int
			want            []string
		}{
			{"cmp-1", "", 100, []string{"cmd-1", "cmd-2", "cmd-4"}},
			{"cmp-1", "", 2, []string{"cmd-1", "cmd-2"}},
			{"cmp-1", "cmd-2", 2, []string{"cmd-4"}},
			{"cmp-1", "cmd-4", 2, nil},
			{"cmp-2", "", 100, []string{"cmd-3", "cmd-5"}},
			{"cmp-2", "cmd-3", 100, []string{"cmd-5"}},
			{"cmp-missing", "", 100, nil},
		} {
			cs, err := tx.ListCommands(ctx, c.computer, c.after, c.limit)
			if err != nil {
				t.Errorf("ListCommands(%s, %q, %d): %v", c.computer, c.after, c.limit, err)
				continue
			}
			checkIDs(t, fmt.Sprintf("ListCommands(%s, %q, %d)", c.computer, c.after, c.limit), commandIDs(cs), c.want)
		}
		cs, err := tx.ListCommands(ctx, "cmp-1", "", 1)
		if err != nil || len(cs) != 1 {
			t.Fatalf("ListCommands(cmp-1, 1) = %v, %v", cs, err)
		}
		check(t, "listed Command", cs[0], storedCommand(*full))
		// Unfinished: queued or running, of every Computer, oldest first.
		cs, err = tx.UnfinishedCommands(ctx)
		if err != nil {
			t.Fatalf("UnfinishedCommands: %v", err)
		}
		checkIDs(t, "UnfinishedCommands", commandIDs(cs), []string{"cmd-2", "cmd-5", "cmd-1"})
		if len(cs) == 3 {
			check(t, "unfinished Command", cs[2], storedCommand(*full))
		}
		return nil
	})

	// queued → running → exited. UpdateCommand writes Status, ExitCode,
	// Error, StartedAt and EndedAt only.
	started := *full
	started.Status, started.StartedAt = "running", ptr(at(40))
	ended := started
	ended.Status, ended.ExitCode, ended.EndedAt = "exited", ptr(137), ptr(at(41))
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateCommand(running)", tx.UpdateCommand(ctx, &started))
		changed := ended
		changed.ComputerID, changed.Argv, changed.Cwd, changed.Env = "cmp-9", []string{"other"}, "/", []string{"X=1"}
		changed.Stdin, changed.TimeoutMS, changed.CreatedAt = []byte("other"), 1, at(99)
		wantOK(t, "UpdateCommand(exited)", tx.UpdateCommand(ctx, &changed))
		got, err := tx.GetCommand(ctx, full.ID)
		if err != nil {
			t.Fatalf("GetCommand in the writing Update: %v", err)
		}
		check(t, "GetCommand in the writing Update", *got, storedCommand(ended))
		missing := *full
		missing.ID = "cmd-missing"
		wantErr(t, "UpdateCommand(missing)", tx.UpdateCommand(ctx, &missing), store.ErrNotFound)
		// A failure with an error and no exit code; a cancelled Command
		// with a signal's exit code.
		f := *queued
		f.Status, f.Error, f.StartedAt, f.EndedAt = "timed_out", "timed out after 1s", ptr(at(42)), ptr(at(43))
		f.ExitCode = ptr(128 + 9)
		wantOK(t, "UpdateCommand(timed out)", tx.UpdateCommand(ctx, &f))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetCommand(ctx, full.ID)
		if err != nil {
			t.Fatalf("GetCommand: %v", err)
		}
		check(t, "exited Command", *got, storedCommand(ended))
		got, err = tx.GetCommand(ctx, queued.ID)
		if err != nil {
			t.Fatalf("GetCommand: %v", err)
		}
		if got.Status != "timed_out" || got.Error != "timed out after 1s" || got.ExitCode == nil || *got.ExitCode != 137 ||
			got.StartedAt == nil || !got.StartedAt.Equal(stored(at(42))) || got.EndedAt == nil || !got.EndedAt.Equal(stored(at(43))) {
			t.Errorf("timed out Command = %+v", got)
		}
		cs, err := tx.UnfinishedCommands(ctx)
		if err != nil {
			t.Fatalf("UnfinishedCommands: %v", err)
		}
		checkIDs(t, "UnfinishedCommands after the updates", commandIDs(cs), []string{"cmd-2"})
		return nil
	})
	// A cancel is requested of a queued or running Command only, and
	// later updates keep it.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		c, err := tx.GetCommand(ctx, running.ID)
		if err != nil || !c.CancelRequested {
			t.Fatalf("GetCommand(%s) = %+v, %v; want CancelRequested (inserted so)", running.ID, c, err)
		}
		if set, err := tx.RequestCommandCancel(ctx, full.ID); err != nil || set {
			t.Errorf("RequestCommandCancel of an exited Command = %v, %v; want false", set, err)
		}
		if _, err := tx.RequestCommandCancel(ctx, "cmd-missing"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("RequestCommandCancel(missing) = %v, want ErrNotFound", err)
		}
		r := *running
		r.ID, r.CancelRequested = "cmd-6", false
		wantOK(t, "InsertCommand(cmd-6)", tx.InsertCommand(ctx, &r))
		if set, err := tx.RequestCommandCancel(ctx, r.ID); err != nil || !set {
			t.Errorf("RequestCommandCancel of a running Command = %v, %v; want true", set, err)
		}
		wantOK(t, "UpdateCommand(from an older read)", tx.UpdateCommand(ctx, &r))
		if c, err := tx.GetCommand(ctx, r.ID); err != nil || !c.CancelRequested {
			t.Errorf("GetCommand(%s) after an update from an older read = %+v, %v; want CancelRequested", r.ID, c, err)
		}
		r.Status, r.EndedAt = "cancelled", ptr(at(50))
		wantOK(t, "UpdateCommand(cancelled)", tx.UpdateCommand(ctx, &r))
		return nil
	})
	// The exit code, the error and the times go back to nil and empty.
	cleared := ended
	cleared.Status, cleared.ExitCode, cleared.Error, cleared.StartedAt, cleared.EndedAt = "queued", nil, "", nil, nil
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateCommand(cleared)", tx.UpdateCommand(ctx, &cleared))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetCommand(ctx, full.ID)
		if err != nil {
			t.Fatalf("GetCommand: %v", err)
		}
		check(t, "cleared Command", *got, storedCommand(cleared))
		cs, err := tx.UnfinishedCommands(ctx)
		if err != nil {
			t.Fatalf("UnfinishedCommands: %v", err)
		}
		checkIDs(t, "UnfinishedCommands after requeueing", commandIDs(cs), []string{"cmd-2", "cmd-1"})
		return nil
	})
}

func storedCommandLog(l store.CommandLog) store.CommandLog {
	l.At = stored(l.At)
	return l
}

func logSeqs(ls []store.CommandLog) []int64 {
	seqs := []int64{}
	for _, l := range ls {
		seqs = append(seqs, l.Sequence)
	}
	return seqs
}

func testCommandLogs(t *testing.T, s store.Store) {
	// Every byte value, NULs and invalid UTF-8 included, in a large chunk.
	big := make([]byte, 256*1024+3)
	for i := range big {
		big[i] = byte(i * 7)
	}
	logs := []*store.CommandLog{
		{CommandID: "cmd-1", Sequence: 1, Stream: "stdout", Data: []byte("hello\n"), At: at(50)},
		{CommandID: "cmd-1", Sequence: 2, Stream: "stderr", Data: []byte("\x00\x01\xff\xfebin\x00ary\x00"), At: at(51)},
		{CommandID: "cmd-1", Sequence: 3, Stream: "stdout", Data: big, At: at(52)},
		{CommandID: "cmd-1", Sequence: 4, Stream: "stderr", Data: []byte{0}, At: at(53)},
		// Another Command has its own sequence numbers.
		{CommandID: "cmd-2", Sequence: 1, Stream: "stdout", Data: []byte("other"), At: at(54)},
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, l := range logs {
			wantOK(t, fmt.Sprintf("AppendCommandLog(%s, %d)", l.CommandID, l.Sequence), tx.AppendCommandLog(ctx, l))
		}
		dup := &store.CommandLog{CommandID: "cmd-1", Sequence: 2, Stream: "stdout", Data: []byte("replaced"), At: at(55)}
		wantErr(t, "AppendCommandLog(same sequence)", tx.AppendCommandLog(ctx, dup), store.ErrDuplicate)
		// The transaction goes on after the refusal.
		wantOK(t, "AppendCommandLog after ErrDuplicate", tx.AppendCommandLog(ctx,
			&store.CommandLog{CommandID: "cmd-1", Sequence: 5, Stream: "stdout", Data: []byte("tail"), At: at(56)}))
		ls, err := tx.ListCommandLogs(ctx, "cmd-1", 1, 1)
		if err != nil || len(ls) != 1 {
			t.Fatalf("ListCommandLogs in the writing Update = %v, %v", ls, err)
		}
		check(t, "chunk after refused duplicate", ls[0], storedCommandLog(*logs[1]))
		return nil
	})
	logs = append(logs, &store.CommandLog{CommandID: "cmd-1", Sequence: 5, Stream: "stdout", Data: []byte("tail"), At: at(56)})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		ls, err := tx.ListCommandLogs(ctx, "cmd-1", 0, 100)
		if err != nil {
			t.Fatalf("ListCommandLogs: %v", err)
		}
		var want []store.CommandLog
		for _, l := range logs {
			if l.CommandID == "cmd-1" {
				want = append(want, storedCommandLog(*l))
			}
		}
		check(t, "ListCommandLogs(cmd-1)", ls, want)
		if len(ls) == 5 && !slices.Equal(ls[2].Data, big) {
			t.Errorf("large chunk: got %d bytes, want %d, not equal", len(ls[2].Data), len(big))
		}
		for _, c := range []struct {
			command string
			after   int64
			limit   int
			want    []int64
		}{
			{"cmd-1", 0, 2, []int64{1, 2}},
			{"cmd-1", 1, 2, []int64{2, 3}},
			{"cmd-1", 3, 100, []int64{4, 5}},
			{"cmd-1", 5, 100, nil},
			{"cmd-2", 0, 100, []int64{1}},
			{"cmd-missing", 0, 100, nil},
		} {
			ls, err := tx.ListCommandLogs(ctx, c.command, c.after, c.limit)
			if err != nil {
				t.Errorf("ListCommandLogs(%s, %d, %d): %v", c.command, c.after, c.limit, err)
				continue
			}
			got := logSeqs(ls)
			if c.want == nil {
				c.want = []int64{}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("ListCommandLogs(%s, %d, %d) = %v, want %v", c.command, c.after, c.limit, got, c.want)
			}
		}
		ls, err = tx.ListCommandLogs(ctx, "cmd-2", 0, 100)
		if err != nil || len(ls) != 1 {
			t.Fatalf("ListCommandLogs(cmd-2) = %v, %v", ls, err)
		}
		check(t, "ListCommandLogs(cmd-2)", ls[0], storedCommandLog(*logs[4]))
		return nil
	})
}

// testLeases checks Session leases: one holder at a time, renewal,
// release, expiry on the store's clock, and takeover after expiry.
func testLeases(t *testing.T, s store.Store) {
	const long = time.Hour
	acquire := func(session, node string, ttl time.Duration) (string, bool) {
		t.Helper()
		var holder string
		var fresh bool
		update(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			holder, fresh, err = tx.AcquireLease(ctx, session, node, ttl)
			return err
		})
		return holder, fresh
	}
	leases := func() map[string]string {
		t.Helper()
		var m map[string]string
		view(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			m, err = tx.Leases(ctx)
			return err
		})
		return m
	}
	check(t, "Leases on an empty store", leases(), map[string]string{})
	if h, fresh := acquire("ses-1", "node-a", long); h != "node-a" || !fresh {
		t.Errorf("first AcquireLease = %q, %v; want node-a, fresh", h, fresh)
	}
	if h, fresh := acquire("ses-1", "node-a", long); h != "node-a" || fresh {
		t.Errorf("AcquireLease by the holder = %q, %v; want node-a, not fresh", h, fresh)
	}
	if h, fresh := acquire("ses-1", "node-b", long); h != "node-a" || fresh {
		t.Errorf("AcquireLease of a held lease = %q, %v; want the holder node-a, not fresh", h, fresh)
	}
	acquire("ses-2", "node-b", long)
	acquire("ses-3", "node-a", long)
	check(t, "Leases", leases(), map[string]string{"ses-1": "node-a", "ses-2": "node-b", "ses-3": "node-a"})

	update(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.RenewLeases(ctx, "node-a", long)
		wantOK(t, "RenewLeases", err)
		check(t, "RenewLeases(node-a)", got, []string{"ses-1", "ses-3"})
		got, err = tx.RenewLeases(ctx, "node-z", long)
		wantOK(t, "RenewLeases(none)", err)
		if len(got) != 0 {
			t.Errorf("RenewLeases of a node without leases = %v", got)
		}
		wantOK(t, "ReleaseLease by another node", tx.ReleaseLease(ctx, "ses-1", "node-b"))
		wantOK(t, "ReleaseLease", tx.ReleaseLease(ctx, "ses-3", "node-a"))
		wantOK(t, "ReleaseLease again", tx.ReleaseLease(ctx, "ses-3", "node-a"))
		return nil
	})
	check(t, "Leases after releases", leases(), map[string]string{"ses-1": "node-a", "ses-2": "node-b"})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		for sid, want := range map[string]string{"ses-1": "node-a", "ses-2": "node-b", "ses-3": "", "ses-9": ""} {
			got, err := tx.LeaseHolder(ctx, sid)
			if err != nil || got != want {
				t.Errorf("LeaseHolder(%s) = %q, %v; want %q", sid, got, err, want)
			}
		}
		return nil
	})

	// Within one Update, LeaseHolder and MaxTurnSequence follow what the
	// same transaction changed.
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		holder := func(what, want string) {
			t.Helper()
			if got, err := tx.LeaseHolder(ctx, "ses-6"); err != nil || got != want {
				t.Errorf("LeaseHolder %s = %q, %v; want %q", what, got, err, want)
			}
		}
		holder("of a Session without a lease", "")
		_, _, err := tx.AcquireLease(ctx, "ses-6", "node-a", long)
		wantOK(t, "AcquireLease", err)
		holder("after AcquireLease in the transaction", "node-a")
		wantOK(t, "ReleaseLease", tx.ReleaseLease(ctx, "ses-6", "node-a"))
		holder("after ReleaseLease in the transaction", "")
		for i, want := range []int64{0, 1, 2} {
			n, err := tx.MaxTurnSequence(ctx, "ses-6")
			if err != nil || n != want {
				t.Errorf("MaxTurnSequence after %d inserts = %d, %v; want %d", i, n, err, want)
			}
			wantOK(t, "InsertTurn", tx.InsertTurn(ctx, newTurn("ses-6", fmt.Sprintf("t6-%d", i), want+1, "queued")))
		}
		return nil
	})

	// An expired lease is not listed, and another node takes it over.
	acquire("ses-4", "node-a", time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	if _, ok := leases()["ses-4"]; ok {
		t.Errorf("an expired lease is listed")
	}
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		if got, err := tx.LeaseHolder(ctx, "ses-4"); err != nil || got != "node-a" {
			t.Errorf("LeaseHolder of an expired lease = %q, %v; want its node", got, err)
		}
		return nil
	})
	if h, fresh := acquire("ses-4", "node-b", long); h != "node-b" || !fresh {
		t.Errorf("AcquireLease of an expired lease = %q, %v; want node-b, fresh", h, fresh)
	}
	// The former holder's own lease, expired, comes back fresh: what it
	// ran may have been taken over meanwhile.
	acquire("ses-5", "node-a", time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	if h, fresh := acquire("ses-5", "node-a", long); h != "node-a" || !fresh {
		t.Errorf("AcquireLease of its own expired lease = %q, %v; want node-a, fresh", h, fresh)
	}
	// Renewal revives a node's expired lease nobody took.
	acquire("ses-6", "node-c", time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.RenewLeases(ctx, "node-c", long)
		wantOK(t, "RenewLeases", err)
		check(t, "RenewLeases(node-c)", got, []string{"ses-6"})
		return nil
	})
	if leases()["ses-6"] != "node-c" {
		t.Errorf("a renewed lease is not listed")
	}
}

// testConcurrentIdempotency: Updates that read one idempotency key and
// then record it, at the same time, run one after the other: exactly one
// records it, the others find its record.
func testConcurrentIdempotency(t *testing.T, s store.Store) {
	ctx := t.Context()
	var wg sync.WaitGroup
	var mu sync.Mutex
	inserted, found := 0, 0
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Update(ctx, func(tx store.Tx) error {
				_, err := tx.GetIdempotency(ctx, "turns.enqueue:ses-1", "key-1")
				if err == nil {
					mu.Lock()
					found++
					mu.Unlock()
					return nil
				}
				if !errors.Is(err, store.ErrNotFound) {
					return err
				}
				time.Sleep(30 * time.Millisecond) // the work the key guards
				if err := tx.InsertIdempotency(ctx, &store.Idempotency{Scope: "turns.enqueue:ses-1", Key: "key-1",
					Digest: fmt.Sprint(i), Response: raw(`{}`), CreatedAt: at(1)}); err != nil {
					return err
				}
				mu.Lock()
				inserted++
				mu.Unlock()
				return nil
			})
			if err != nil {
				t.Errorf("Update: %v", err)
			}
		}()
	}
	wg.Wait()
	if inserted != 1 || found != 3 {
		t.Errorf("%d Updates recorded the key and %d found it; want 1 and 3", inserted, found)
	}
}

// testHeartbeats checks the nodes' heartbeats.
func testHeartbeats(t *testing.T, s store.Store) {
	beat := func(node, inc string, ttl time.Duration, wantPrev string) {
		t.Helper()
		update(t, s, func(ctx context.Context, tx store.Tx) error {
			prev, err := tx.Heartbeat(ctx, node, inc, ttl)
			wantOK(t, "Heartbeat", err)
			if prev != wantPrev {
				t.Errorf("Heartbeat(%s, %s) = previous %q, want %q", node, inc, prev, wantPrev)
			}
			return nil
		})
	}
	beat("node-a", "i1", time.Hour, "")
	beat("node-a", "i1", time.Hour, "i1")
	beat("node-a", "i2", time.Hour, "i1") // another process with node-a's ID
	beat("node-b", "i3", time.Millisecond, "")
	beat("node-c", "i4", time.Millisecond, "")
	time.Sleep(20 * time.Millisecond)
	beat("node-c", "i5", time.Hour, "") // an expired heartbeat tells nothing
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		live, err := tx.LiveNodes(ctx)
		wantOK(t, "LiveNodes", err)
		check(t, "LiveNodes", live, map[string]bool{"node-a": true, "node-c": true})
		return nil
	})
}

// testUnleasedWork checks the Sessions with queued or running Turns that
// no node supervises.
func testUnleasedWork(t *testing.T, s store.Store) {
	var seq int64
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, r := range []struct {
			session string
			status  string
		}{
			{"ses-a", "queued"}, {"ses-b", "running"}, {"ses-c", "completed"}, {"ses-d", "queued"}, {"ses-e", "running"},
			{"ses-a", "queued"}, {"ses-f", "queued"}, {"ses-g", "running"}, {"ses-h", "queued"},
		} {
			seq++
			wantOK(t, "InsertTurn", tx.InsertTurn(ctx, newTurn(r.session, uuid.Must(uuid.NewV7()).String(), seq, r.status)))
		}
		_, _, err := tx.AcquireLease(ctx, "ses-b", "node-a", time.Hour)
		wantOK(t, "AcquireLease", err)
		_, _, err = tx.AcquireLease(ctx, "ses-e", "node-a", time.Millisecond)
		wantOK(t, "AcquireLease", err)
		// A held Session's queued Turns wait for a resume; a running Turn
		// of a held Session still needs a node.
		for i, sid := range []string{"ses-f", "ses-g", "ses-h"} {
			h := &store.Hold{ID: fmt.Sprintf("hold-%d", i), SessionID: sid, Kind: "interrupt", CanRelease: true, CreatedAt: at(i)}
			if sid == "ses-h" {
				h.ReleasedAt = ptr(at(9))
			}
			wantOK(t, "InsertHold", tx.InsertHold(ctx, h))
		}
		return nil
	})
	time.Sleep(20 * time.Millisecond)
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.UnleasedWork(ctx, 10)
		wantOK(t, "UnleasedWork", err)
		slices.Sort(got)
		check(t, "UnleasedWork", got, []string{"ses-a", "ses-d", "ses-e", "ses-g", "ses-h"})
		got, err = tx.UnleasedWork(ctx, 1)
		wantOK(t, "UnleasedWork(limit 1)", err)
		if len(got) != 1 {
			t.Errorf("UnleasedWork(limit 1) = %v", got)
		}
		return nil
	})
}

// testBinaries checks deployment binaries kept in the store.
func testBinaries(t *testing.T, s store.Store) {
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.GetBinary(ctx, "sha256:none")
		wantErr(t, "GetBinary(missing)", err, store.ErrNotFound)
		wantOK(t, "PutBinary", tx.PutBinary(ctx, "sha256:one", data))
		wantOK(t, "PutBinary again", tx.PutBinary(ctx, "sha256:one", []byte("other")))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetBinary(ctx, "sha256:one")
		wantOK(t, "GetBinary", err)
		if !bytes.Equal(got, data) {
			t.Errorf("GetBinary returned %d bytes, not the %d stored", len(got), len(data))
		}
		return nil
	})
}
