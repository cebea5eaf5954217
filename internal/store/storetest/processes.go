package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/helmr-go/helmr/internal/store"
)

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
		TokenHash: "sha256:ffff", ComputerID: "cmp-1", Recovery: "reattach", LaunchedAt: at(60), NodeID: "node-1", Parked: true}
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
