package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
)

// TestAttachChecksAgentAndDeployment: helmrclient.Attach gives a typed
// handle on an existing Session only when it is of the stated Agent and
// pinned to the stated Deployment; its enqueue, reads and waits then carry
// the Agent's types. Another Agent or Deployment is a conflict, a missing
// Session not_found, a missing Deployment ID invalid_request.
func TestAttachChecksAgentAndDeployment(t *testing.T) {
	p := startPlane(t, "")
	c := helmrclient.New(p.url, p.key)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	typed := helmrclient.Ref[Review, Verdict]("typed")
	created, err := helmrclient.Create(ctx, c, typed, Review{Issue: 1}, helmrclient.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sid, dep := created.Session.ID(), created.Receipt.Session.DeploymentID

	s, err := helmrclient.Attach(ctx, c, typed, sid, dep)
	if err != nil {
		t.Fatalf("Attach with the right Agent and Deployment: %v", err)
	}
	if s.ID() != sid || s.Session.Agent != "typed" || s.Session.DeploymentID != dep {
		t.Fatalf("attached %s: %+v", s.ID(), s.Session)
	}
	turn, err := s.Enqueue(ctx, Review{Issue: 7}, helmrclient.EnqueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o, err := turn.Wait(ctx)
	if err != nil || o.Status != helmrtype.TurnCompleted || !o.HasResult || !o.Result.Reviewed {
		t.Fatalf("typed wait through the attached handle: %+v, %v", o, err)
	}
	st, err := s.GetTurn(ctx, turn.ID())
	if err != nil || !st.HasInput || st.Input.Issue != 7 || !st.HasResult || st.Result != o.Result || st.Raw.ID != turn.ID() {
		t.Fatalf("typed read through the attached handle: %+v, %v", st, err)
	}
	if o2, err := s.Turn(created.Turn.ID()).Wait(ctx); err != nil || !o2.HasResult || !o2.Result.Reviewed {
		t.Fatalf("typed wait on the initial Turn: %+v, %v", o2, err)
	}

	conflict := func(what string, err error, field, actual string) {
		t.Helper()
		var he *helmrtype.Error
		if !errors.Is(err, helmrtype.CodeConflict) || !errors.As(err, &he) || he.Details[field] != actual {
			t.Fatalf("Attach with %s = %v; want conflict naming %s %q", what, err, field, actual)
		}
	}
	_, err = helmrclient.Attach(ctx, c, helmrclient.Ref[Review, Verdict]("echo"), sid, dep)
	conflict("the wrong Agent", err, "agent", "typed")
	_, err = helmrclient.Attach(ctx, c, typed, sid, engine.NewID())
	conflict("the wrong Deployment", err, "deployment_id", dep)
	if _, err := helmrclient.Attach(ctx, c, typed, engine.NewID(), dep); !errors.Is(err, helmrtype.CodeNotFound) {
		t.Fatalf("Attach to a missing Session = %v, want not_found", err)
	}
	if _, err := helmrclient.Attach(ctx, c, typed, sid, ""); !errors.Is(err, helmrtype.CodeInvalidRequest) {
		t.Fatalf("Attach without a Deployment = %v, want invalid_request", err)
	}
	if _, err := helmrclient.Attach(ctx, c, typed, "", dep); !errors.Is(err, helmrtype.CodeInvalidRequest) {
		t.Fatalf("Attach without a Session = %v, want invalid_request", err)
	}
}
