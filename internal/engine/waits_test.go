package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/store"
)

func question(prompt string) *helmrtype.Question {
	return &helmrtype.Question{Prompt: helmrtype.Text(prompt), Answer: helmrtype.AnswerSpec{Type: helmrtype.AnswerText}}
}

// Questions count toward the Turn's output budget.
func TestAskCountsTowardOutputBudget(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	sid, tid := running(t, e)
	chunk := helmrtype.Text(strings.Repeat("y", 250<<10))
	op := int64(1)
	for ; ; op++ {
		if _, _, err := e.AppendOutput(ctx, sid, tid, op, chunk); err != nil {
			break
		}
	}
	// The budget is nearly spent: a question of 250 KiB no longer fits.
	err := e.Ask(ctx, sid, tid, op+1, engine.NewID(), question(strings.Repeat("q", 250<<10)))
	if !errors.Is(err, helmrtype.CodeLimitExceeded) {
		t.Fatalf("ask over the budget: %v", err)
	}
	if err := e.Ask(ctx, sid, tid, op+2, engine.NewID(), question("short?")); err != nil {
		t.Fatalf("a small question that fits: %v", err)
	}
}

// Only root Sessions may ask people.
func TestChildSessionCannotAsk(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	root, _ := running(t, e)
	// A child owned by root (the runtime MCP issue's spawn makes these).
	child := engine.NewID()
	err := e.Store().Update(ctx, func(tx store.Tx) error {
		s, err := tx.GetSession(ctx, root)
		if err != nil {
			return err
		}
		s.ID, s.ParentSessionID, s.RequesterSessionID, s.InitialTurnID, s.ComputerID = child, root, root, "", ""
		return tx.InsertSession(ctx, s)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Enqueue(ctx, child, helmrtype.EnqueueRequest{Input: text("hi")}, engine.APICaller); err != nil {
		t.Fatal(err)
	}
	turn, _, err := e.StartNextTurn(ctx, child)
	if err != nil || turn == nil {
		t.Fatalf("start the child's turn: %v %v", turn, err)
	}
	if err := e.Ask(ctx, child, turn.ID, 1, engine.NewID(), question("may I?")); !errors.Is(err, helmrtype.CodeForbidden) {
		t.Fatalf("ask from a child session: %v", err)
	}
}

func secret() string { return "hlmr_tok_" + strings.Repeat("ab", 32) }

// A Token's idempotency key gives the Session the same Token again.
func TestTokenIdempotencyKey(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	sid, tid := running(t, e)
	first, err := e.CreateToken(ctx, sid, tid, 1, engine.NewID(), secret(), helmrtype.TokenCreate{IdempotencyKey: "approval", Timeout: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.CreateToken(ctx, sid, tid, 2, engine.NewID(), secret(), helmrtype.TokenCreate{IdempotencyKey: "approval"})
	if err != nil || again.ID != first.ID || again.ExpiresAt == nil {
		t.Fatalf("second create with the key: %+v %v (first %s)", again, err, first.ID)
	}
	other, err := e.CreateToken(ctx, sid, tid, 3, engine.NewID(), secret(), helmrtype.TokenCreate{})
	if err != nil || other.ID == first.ID {
		t.Fatalf("create without a key: %+v %v", other, err)
	}
}

// A wait ends once, whichever of its ends comes first: its timeout or the
// Token's completion racing it.
func TestWaitEndsOnce(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	for i := range 20 {
		sid, tid := running(t, e)
		tok, err := e.CreateToken(ctx, sid, tid, 1, engine.NewID(), secret(), helmrtype.TokenCreate{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.StartWait(ctx, sid, tid, 2, helmrtype.WaitStart{ID: engine.NewID(), Kind: helmrtype.WaitToken,
			TargetID: tok.ID, Timeout: "1ms", IdleTimeout: "1h"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(i%3) * 500 * time.Microsecond)
		e.CompleteToken(ctx, tok.ID, []byte(`"done"`))
		deadline := time.Now().Add(5 * time.Second)
		for {
			page, err := e.ListEvents(ctx, sid, 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, ev := range page.Records {
				if ev.Kind == helmrtype.EventWaitResolved {
					n++
				}
			}
			if n > 1 {
				t.Fatalf("the wait ended %d times", n)
			}
			if n == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the wait never ended")
			}
			time.Sleep(time.Millisecond)
		}
	}
	e.Close()
}

// A Token wait's schema must be a JSON Schema and is for Token waits only.
func TestTokenWaitSchemaIsChecked(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	sid, tid := running(t, e)
	tok, err := e.CreateToken(ctx, sid, tid, 1, engine.NewID(), secret(), helmrtype.TokenCreate{})
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour)
	for i, w := range []helmrtype.WaitStart{
		{Kind: helmrtype.WaitToken, TargetID: tok.ID, Schema: json.RawMessage(`{"type":5}`)},
		{Kind: helmrtype.WaitToken, TargetID: tok.ID, Schema: json.RawMessage(`{"type":`)},
		{Kind: helmrtype.WaitTimer, Until: &until, Schema: json.RawMessage(`{"type":"string"}`)},
	} {
		w.ID = engine.NewID()
		if _, err := e.StartWait(ctx, sid, tid, int64(2+i), w); !errors.Is(err, helmrtype.CodeInvalidRequest) {
			t.Errorf("wait %d with schema %s: %v, want invalid_request", i, w.Schema, err)
		}
	}
	if _, err := e.StartWait(ctx, sid, tid, 5, helmrtype.WaitStart{ID: engine.NewID(), Kind: helmrtype.WaitToken, TargetID: tok.ID,
		Schema: json.RawMessage(`{"type": "string"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CompleteToken(ctx, tok.ID, []byte(`1`)); !errors.Is(err, helmrtype.CodeInputInvalid) {
		t.Fatalf("completion against the schema: %v", err)
	}
	if c, err := e.CompleteToken(ctx, tok.ID, []byte(`"ok"`)); err != nil || c.Status != "completed" {
		t.Fatalf("completion: %+v %v", c, err)
	}
}
