// Command quickstart is a small Helmr agent program: a typed reviewer and a
// text echo agent. Run it with `helmr dev examples/quickstart`.
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/helmr-go/helmr"
)

var repo = helmr.Template(helmr.TemplateSpec{ID: "repo",
	Image:     helmr.Image("repo").FromHost(),
	Resources: helmr.Resources{CPU: 1, Memory: "1GiB"}})

// ReviewInput is what the reviewer takes.
type ReviewInput struct {
	Issue int `json:"issue"`
}

// ReviewResult is what the reviewer returns.
type ReviewResult struct {
	Reviewed bool `json:"reviewed"`
}

type state struct{ startedAt time.Time }

var reviewer = helmr.Agent(helmr.AgentSpec[ReviewInput, ReviewResult, *state]{
	ID: "reviewer", Template: repo,
	Init: func(ctx context.Context, ic *helmr.InitContext) (*state, error) {
		return &state{startedAt: time.Now()}, nil
	},
	Turn: func(ctx context.Context, t *helmr.Turn[ReviewInput], ac *helmr.AgentContext[*state]) (ReviewResult, error) {
		if _, err := t.Output.Write(ctx, fmt.Sprintf("Review of issue %d started\n", t.Input.Issue)); err != nil {
			return ReviewResult{}, err
		}
		if err := t.Respond(ctx, "Review complete"); err != nil {
			return ReviewResult{}, err
		}
		return ReviewResult{Reviewed: true}, nil
	}})

var echo = helmr.Agent(helmr.AgentSpec[helmr.InputContent, any, struct{}]{
	ID: "echo", Template: repo,
	Turn: func(ctx context.Context, t *helmr.Turn[helmr.InputContent], ac *helmr.AgentContext[struct{}]) (any, error) {
		return nil, t.Respond(ctx, t.Input.PlainText())
	}})

func main() { helmr.Main(reviewer, echo) }
