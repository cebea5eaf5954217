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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

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
		{"APIKeyRevocation", testAPIKeyRevocation},
		{"Deployments", testDeployments},
		{"ListDeployments", testListDeployments},
		{"Sessions", testSessions},
		{"SessionKeys", testSessionKeys},
		{"UpdateSession", testUpdateSession},
		{"ListSessions", testListSessions},
		{"IdleDeadlines", testIdleDeadlines},
		{"Turns", testTurns},
		{"UpdateTurn", testUpdateTurn},
		{"ListTurns", testListTurns},
		{"TurnsByStatus", testTurnsByStatus},
		{"Messages", testMessages},
		{"PendingMessages", testPendingMessages},
		{"Events", testEvents},
		{"ExpireTurnPayloads", testExpireTurnPayloads},
		{"ConcurrentPayloadExpiry", testConcurrentPayloadExpiry},
		{"Idempotency", testIdempotency},
		{"Processes", testProcesses},
		{"Asks", testAsks},
		{"ListAsks", testListAsks},
		{"Tokens", testTokens},
		{"ExpiringTokens", testExpiringTokens},
		{"ListTokensByStatus", testListTokensByStatus},
		{"Waits", testWaits},
		{"OpenWaits", testOpenWaits},
		{"Holds", testHolds},
		{"ActiveHoldsOfKind", testActiveHoldsOfKind},
		{"Counts", testCounts},
		{"Schedules", testSchedules},
		{"Slack", testSlack},
		{"Computers", testComputers},
		{"ImplicitComputers", testImplicitComputers},
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
	s.IdleSince, s.IdleCloseAt = storedPtr(s.IdleSince), storedPtr(s.IdleCloseAt)
	return s
}

func storedTurn(tr store.Turn) store.Turn {
	tr.CreatedAt = stored(tr.CreatedAt)
	tr.StartedAt = storedPtr(tr.StartedAt)
	tr.TerminalAt = storedPtr(tr.TerminalAt)
	tr.PayloadExpiredAt = storedPtr(tr.PayloadExpiredAt)
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

// --- sessions ---

// --- turns ---

// --- messages ---

// --- events ---

// --- idempotency ---

// --- processes ---

// --- questions ---

// --- tokens ---

// --- waits ---

// --- transactions ---

// --- holds ---

// --- computers and commands ---
