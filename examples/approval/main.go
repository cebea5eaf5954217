// Command approval is an agent that asks a person before it acts: it asks a
// choice question ("Deploy v1.2.3 to production?") and waits — durably,
// for days if need be, surviving control-plane restarts — for the answer.
// Run it with `helmr dev examples/approval`; see README.md.
package main

import (
	"context"
	"fmt"

	"github.com/helmr-go/helmr"
)

var box = helmr.Template(helmr.TemplateSpec{ID: "box",
	Image:     helmr.Image("box").FromHost(),
	Resources: helmr.Resources{CPU: 1, Memory: "512MiB"}})

// Decision is the deployer's result.
type Decision struct {
	Version  string `json:"version"`
	Deployed bool   `json:"deployed"`
	Note     string `json:"note,omitempty"`
	By       string `json:"by"`
}

var deployer = helmr.Agent(helmr.AgentSpec[helmr.InputContent, Decision, struct{}]{
	ID: "deployer", Template: box,
	Turn: func(ctx context.Context, t *helmr.Turn[helmr.InputContent], _ *helmr.AgentContext[struct{}]) (Decision, error) {
		version := t.Input.PlainText()
		t.Output.Write(ctx, fmt.Sprintf("Waiting for approval to deploy %s\n", version))
		a, err := t.Ask(ctx, helmr.Question{
			Prompt: helmr.Text(fmt.Sprintf("Deploy %s to production?", version)),
			Answer: helmr.Choice(false, true,
				helmr.Option("approve", "Approve", true),
				helmr.Option("reject", "Reject", false)),
		})
		if err != nil {
			return Decision{}, err // interrupted: the question is withdrawn
		}
		d := Decision{Version: version, Note: a.Text, By: a.RespondedBy.Kind}
		if len(a.Selected) == 1 && a.Selected[0].ID == "approve" {
			d.Deployed = true
			t.Output.Write(ctx, "Approved; deploying\n")
			return d, t.Respond(ctx, "Deployed "+version)
		}
		return d, t.Respond(ctx, "Not deployed: "+version+" was rejected")
	}})

func main() { helmr.Main(deployer) }
