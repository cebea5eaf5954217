package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/helmr-go/helmr/internal/store"
)

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

// testImplicitComputers: Implicit reads back; IdleImplicitComputers lists
// the available implicit Computers with no Session that is not closed and
// no unfinished Command; SetComputerStatus is a compare-and-set that one
// of several concurrent transactions wins.
func testImplicitComputers(t *testing.T, s store.Store) {
	mk := func(id string, implicit bool, status string) *store.Computer {
		c := newComputer(id, "", status, 1)
		c.Implicit = implicit
		return c
	}
	idle := mk("cmp-1", true, "available")      // its Session is closed
	busy := mk("cmp-2", true, "available")      // an open Session
	running := mk("cmp-3", true, "available")   // a running Command
	explicit := mk("cmp-4", false, "available") // nothing on it, but explicit
	deleting := mk("cmp-5", true, "deleting")
	bare := mk("cmp-6", true, "available")      // nothing on it at all
	closingOn := mk("cmp-7", true, "available") // a closing Session
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, c := range []*store.Computer{idle, busy, running, explicit, deleting, bare, closingOn} {
			wantOK(t, "InsertComputer("+c.ID+")", tx.InsertComputer(ctx, c))
		}
		closed := newSession("ses-1", "a", "")
		closed.Status, closed.ComputerID = "closed", idle.ID
		open := newSession("ses-2", "a", "")
		open.ComputerID = busy.ID
		closing := newSession("ses-3", "a", "")
		closing.Status, closing.ComputerID = "closing", closingOn.ID
		for _, ss := range []*store.Session{closed, open, closing} {
			wantOK(t, "InsertSession("+ss.ID+")", tx.InsertSession(ctx, ss))
		}
		wantOK(t, "InsertCommand", tx.InsertCommand(ctx, &store.Command{ID: "cmd-1", ComputerID: running.ID, Argv: []string{"true"},
			Status: "running", CreatedAt: at(2), StartedAt: ptr(at(2))}))
		wantOK(t, "InsertCommand", tx.InsertCommand(ctx, &store.Command{ID: "cmd-2", ComputerID: idle.ID, Argv: []string{"true"},
			Status: "exited", ExitCode: ptr(0), CreatedAt: at(2), StartedAt: ptr(at(2)), EndedAt: ptr(at(3))}))
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetComputer(ctx, idle.ID)
		if err != nil || !got.Implicit {
			t.Errorf("GetComputer(implicit) = %+v, %v", got, err)
		}
		if got, err := tx.GetComputer(ctx, explicit.ID); err != nil || got.Implicit {
			t.Errorf("GetComputer(explicit) = %+v, %v", got, err)
		}
		list, err := tx.IdleImplicitComputers(ctx, "", 10)
		if ids := computerIDs(list); err != nil || !slices.Equal(ids, []string{"cmp-1", "cmp-6"}) {
			t.Errorf("IdleImplicitComputers = %v, %v; want [cmp-1 cmp-6]", ids, err)
		}
		if len(list) > 0 && list[0] != storedComputer(*idle) {
			t.Errorf("IdleImplicitComputers[0] = %+v, want %+v", list[0], storedComputer(*idle))
		}
		list, err = tx.IdleImplicitComputers(ctx, "cmp-1", 1)
		if ids := computerIDs(list); err != nil || !slices.Equal(ids, []string{"cmp-6"}) {
			t.Errorf("IdleImplicitComputers(after cmp-1, 1) = %v, %v", ids, err)
		}
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		ok, err := tx.SetComputerStatus(ctx, deleting.ID, "available", "deleting")
		if err != nil || ok {
			t.Errorf("SetComputerStatus(from a status it does not have) = %v, %v", ok, err)
		}
		ok, err = tx.SetComputerStatus(ctx, busy.ID, "available", "available")
		if err != nil || !ok {
			t.Errorf("SetComputerStatus(available, available) = %v, %v", ok, err)
		}
		_, err = tx.SetComputerStatus(ctx, "cmp-9", "available", "deleting")
		wantErr(t, "SetComputerStatus(missing)", err, store.ErrNotFound)
		return nil
	})
	// Several transactions claim the same Computer at once: one wins.
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Update(t.Context(), func(tx store.Tx) error {
				ok, err := tx.SetComputerStatus(t.Context(), bare.ID, "available", "deleting")
				if ok {
					mu.Lock()
					wins++
					mu.Unlock()
				}
				return err
			})
			if err != nil {
				t.Errorf("concurrent SetComputerStatus: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d concurrent claims won, want 1", wins)
	}
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		if got, err := tx.GetComputer(ctx, bare.ID); err != nil || got.Status != "deleting" {
			t.Errorf("claimed Computer = %+v, %v", got, err)
		}
		list, err := tx.IdleImplicitComputers(ctx, "", 10)
		if ids := computerIDs(list); err != nil || !slices.Equal(ids, []string{"cmp-1"}) {
			t.Errorf("IdleImplicitComputers after the claim = %v, %v; want [cmp-1]", ids, err)
		}
		return nil
	})
}
