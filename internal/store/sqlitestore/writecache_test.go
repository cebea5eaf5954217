package sqlitestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/helmr-go/helmr/internal/store"
)

// snapshot is what the write cache answers for: a Session's row, its
// active Turn, its sequences, its active holds and its Turns' rows.
type snapshot struct {
	Session   *store.Session
	Active    *store.Turn
	TurnSeq   int64
	EventSeq  int64
	Holds     []store.Hold
	Turns     []*store.Turn
	TurnError []string
}

func readSnapshot(ctx context.Context, tx store.Tx, sessionID string, turnIDs []string) (snapshot, error) {
	var sn snapshot
	var err error
	if sn.Session, err = tx.GetSession(ctx, sessionID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return sn, err
	}
	if sn.Active, err = tx.ActiveTurn(ctx, sessionID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return sn, err
	}
	if sn.TurnSeq, err = tx.MaxTurnSequence(ctx, sessionID); err != nil {
		return sn, err
	}
	if sn.EventSeq, err = tx.LastEventSequence(ctx, sessionID); err != nil {
		return sn, err
	}
	if sn.Holds, err = tx.ActiveHolds(ctx, []string{sessionID}); err != nil {
		return sn, err
	}
	for _, id := range turnIDs {
		t, err := tx.GetTurn(ctx, sessionID, id)
		if err != nil {
			sn.TurnError = append(sn.TurnError, id+": "+err.Error())
			continue
		}
		sn.Turns = append(sn.Turns, t)
	}
	return sn, nil
}

// TestWriteCacheMatchesTheDatabase runs random Updates, some of which fail
// and many of which share a batch, and after each batch compares what a
// write transaction answers (from the cache where it can) with what a read
// transaction reads from the file.
func TestWriteCacheMatchesTheDatabase(t *testing.T) {
	ctx := t.Context()
	s := openAt(t, filepath.Join(t.TempDir(), "helmr.db"))
	defer s.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 1, 2, 3, 4, 5, 678901234, time.FixedZone("X", 3600))
	sessions := []string{"ses-a", "ses-b", uuid.NewString()}
	turns := map[string][]string{}
	var holdIDs []string
	holdSession := map[string]string{}
	clock := 0
	now := func() time.Time { clock++; return base.Add(time.Duration(clock) * time.Millisecond) }

	// op makes one random change in tx; the model (turns, holdIDs) is
	// changed only by Updates that commit, through keep.
	op := func(ctx context.Context, tx store.Tx, keep *[]func()) error {
		sid := sessions[rng.IntN(len(sessions))]
		switch rng.IntN(9) {
		case 0:
			if _, err := tx.GetSession(ctx, sid); err == nil {
				return nil
			}
			at := now()
			return tx.InsertSession(ctx, &store.Session{ID: sid, DeploymentID: "dep", RootSessionID: sid, Agent: "a", Template: "t",
				Status: "open", CloseAfterIdle: "7d", HibernateAfterIdle: "30s", IdleSince: &at, CreatedAt: now()})
		case 1, 2:
			tr := &store.Turn{ID: uuid.NewString(), SessionID: sid, Status: "queued", Input: json.RawMessage(`{"n":1}`), CreatedAt: now()}
			if err := tx.InsertTurn(ctx, tr); err != nil {
				return err
			}
			*keep = append(*keep, func() { turns[sid] = append(turns[sid], tr.ID) })
			return tx.AppendEvent(ctx, &store.Event{SessionID: sid, TurnID: tr.ID, Kind: "turn.queued", CreatedAt: now()})
		case 3, 4:
			// Move a Turn on: queued → running → completed.
			ids := turns[sid]
			if len(ids) == 0 {
				return nil
			}
			tr, err := tx.GetTurn(ctx, sid, ids[rng.IntN(len(ids))])
			if err != nil {
				return err
			}
			at := now()
			switch tr.Status {
			case "queued":
				tr.Status, tr.StartedAt = "running", &at
			case "running":
				tr.Status, tr.TerminalAt, tr.Result, tr.OutputBytes, tr.LastOp = "completed", &at, json.RawMessage(`{"ok":true}`), tr.OutputBytes+3, tr.LastOp+1
			default:
				return nil
			}
			return tx.UpdateTurn(ctx, tr)
		case 5:
			at := now()
			if rng.IntN(2) == 0 {
				return tx.SetSessionIdleSince(ctx, sid, nil, nil)
			}
			return tx.SetSessionIdleSince(ctx, sid, &at, &at)
		case 6:
			ss, err := tx.GetSession(ctx, sid)
			if err != nil {
				return nil
			}
			ss.Status, ss.ComputerID = []string{"open", "closing"}[rng.IntN(2)], fmt.Sprint("cmp-", rng.IntN(3))
			return tx.UpdateSession(ctx, ss)
		case 7:
			if rng.IntN(2) == 0 || len(holdIDs) == 0 {
				h := &store.Hold{ID: uuid.NewString(), SessionID: sid, Kind: "manual", CanRelease: true, CreatedAt: now()}
				if err := tx.InsertHold(ctx, h); err != nil {
					return err
				}
				*keep = append(*keep, func() { holdIDs = append(holdIDs, h.ID); holdSession[h.ID] = sid })
				return nil
			}
			h, err := tx.GetHold(ctx, holdIDs[rng.IntN(len(holdIDs))])
			if err != nil {
				return err
			}
			if h.ReleasedAt == nil {
				at := now()
				h.ReleasedAt = &at
			}
			return tx.UpdateHold(ctx, h)
		case 8:
			ids := turns[sid]
			if len(ids) == 0 {
				return nil
			}
			return tx.InsertMessage(ctx, &store.Message{ID: uuid.NewString(), SessionID: sid, TurnID: ids[rng.IntN(len(ids))],
				Content: json.RawMessage(`[]`), Source: json.RawMessage(`{}`), Status: "admitted", CreatedAt: now()})
		}
		return nil
	}
	errPlanned := errors.New("planned failure")
	for round := 0; round < 300; round++ {
		n := 1 + rng.IntN(4)
		batch := make([]*updateReq, n)
		keeps := make([][]func(), n)
		for i := range batch {
			fail := rng.IntN(4) == 0
			i := i
			batch[i] = &updateReq{ctx: ctx, err: make(chan error, 1), fn: func(tx store.Tx) error {
				keeps[i] = nil
				for range 1 + rng.IntN(4) {
					if err := op(ctx, tx, &keeps[i]); err != nil {
						return err
					}
				}
				if fail {
					return errPlanned
				}
				return nil
			}}
		}
		// No Update leads or is queued: this test leads.
		s.commitBatch(batch)
		for i, r := range batch {
			if err := <-r.err; err == nil {
				for _, k := range keeps[i] {
					k()
				}
			} else if !errors.Is(err, errPlanned) {
				t.Fatalf("round %d: Update %d: %v", round, i, err)
			}
		}
		for _, sid := range sessions {
			var cached, stored snapshot
			if err := s.Update(ctx, func(tx store.Tx) (err error) {
				cached, err = readSnapshot(ctx, tx, sid, turns[sid])
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if err := s.View(ctx, func(tx store.Tx) (err error) {
				stored, err = readSnapshot(ctx, tx, sid, turns[sid])
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cached, stored) {
				t.Fatalf("round %d, %s: a write transaction answers\n%s\nthe file holds\n%s", round, sid, dump(cached), dump(stored))
			}
		}
	}
	if len(holdIDs) == 0 || len(turns["ses-a"]) == 0 {
		t.Fatalf("the random run made no holds (%d) or no Turns (%d)", len(holdIDs), len(turns["ses-a"]))
	}
}

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", " ")
	return string(b)
}

// TestWriteCacheUndo checks the undo log alone: an Update's failure undoes
// its own changes, a batch's failure undoes all, and a reset is undone.
func TestWriteCacheUndo(t *testing.T) {
	c := newWriteCache()
	c.beginUpdate()
	c.setSeq(true, "a", 1)
	c.holdFree.set("a", struct{}{})
	c.endUpdate(true)
	c.beginUpdate()
	c.setSeq(true, "a", 2)
	c.setSeq(true, "b", 5)
	c.heldSession("")
	c.endUpdate(false)
	if n, _ := c.seq(true, "a"); n != 1 {
		t.Errorf("after a failed Update, a = %d; want 1", n)
	}
	if _, ok := c.seq(true, "b"); ok {
		t.Errorf("after a failed Update, b is still cached")
	}
	if !c.holdsFree([]string{"a"}) {
		t.Errorf("a failed Update's reset was not undone")
	}
	c.endBatch(false)
	if _, ok := c.seq(true, "a"); ok || c.holdsFree([]string{"a"}) {
		t.Errorf("a batch that did not commit left entries")
	}
	c.beginUpdate()
	c.setSeq(false, "a", 3)
	c.endUpdate(true)
	c.endBatch(true)
	if n, ok := c.seq(false, "a"); !ok || n != 3 || len(c.undo) != 0 {
		t.Errorf("after a commit: %d, %v, undo %d", n, ok, len(c.undo))
	}
	var nilCache *writeCache
	nilCache.setSeq(true, "a", 1)
	if _, ok := nilCache.seq(true, "a"); ok || nilCache.holdsFree([]string{"a"}) {
		t.Errorf("a nil cache answered")
	}
}
