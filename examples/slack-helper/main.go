// Command slack-helper is an agent that people talk to in a Slack thread:
// each message in the thread is a Turn of the thread's Session, and the
// agent's response is posted back as a reply. It answers "help" and
// "status", and for "deploy VERSION" it asks a choice question (Approve /
// Reject) that Slack shows as buttons, and waits for a click before it
// acts. Run it with `helmr dev examples/slack-helper` and a Slack app; see
// README.md.
package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/helmr-go/helmr"
)

var box = helmr.Template(helmr.TemplateSpec{ID: "box",
	Image:     helmr.Image("box").FromHost(),
	Resources: helmr.Resources{CPU: 1, Memory: "512MiB"}})

// Reply is the helper's result for one message.
type Reply struct {
	// Action is what the message asked for: "help", "status" or "deploy".
	Action string `json:"action"`
	// Version is the version a deploy was asked for.
	Version string `json:"version,omitempty"`
	// Deployed says whether the deploy was approved and done.
	Deployed bool `json:"deployed,omitempty"`
}

// thread is what the helper remembers within one Session (one Slack
// thread) while its process lives; init starts it empty again when a
// process is reconstructed.
type thread struct {
	mu       sync.Mutex
	deployed []string
	rejected []string
}

// mention is how Slack writes a mention of a user or of the bot in text.
var mention = regexp.MustCompile(`<@[A-Z0-9]+>`)

var helper = helmr.Agent(helmr.AgentSpec[helmr.InputContent, Reply, *thread]{
	ID: "helper", Template: box,
	// A Slack thread stays open for a week of quiet, and the process is
	// frozen after 30 s of waiting for a click.
	CloseAfterIdle: "7d", IdleTimeout: "30s",
	Init: func(ctx context.Context, ic *helmr.InitContext) (*thread, error) { return &thread{}, nil },
	Turn: func(ctx context.Context, t *helmr.Turn[helmr.InputContent], ac *helmr.AgentContext[*thread]) (Reply, error) {
		words := strings.Fields(strings.ToLower(mention.ReplaceAllString(t.Input.PlainText(), " ")))
		switch {
		case len(words) == 2 && words[0] == "deploy":
			return deploy(ctx, t, ac.InitResult, words[1])
		case len(words) == 1 && words[0] == "status":
			return Reply{Action: "status"}, t.Respond(ctx, ac.InitResult.status())
		}
		return Reply{Action: "help"}, t.Respond(ctx,
			"Hi! Ask me to `deploy VERSION` (someone approves it first) or for the `status` of this thread.")
	}})

// deploy asks for approval with two buttons and acts on the answer.
func deploy(ctx context.Context, t *helmr.Turn[helmr.InputContent], th *thread, version string) (Reply, error) {
	if _, err := t.Output.Write(ctx, fmt.Sprintf("Waiting for approval to deploy %s\n", version)); err != nil {
		return Reply{}, err
	}
	a, err := t.Ask(ctx, helmr.Question{
		Prompt: helmr.Text(fmt.Sprintf("Deploy %s to production?", version)),
		Answer: helmr.Choice(false, false,
			helmr.Option("approve", "Approve", true),
			helmr.Option("reject", "Reject", false)),
	})
	if err != nil {
		return Reply{}, err // interrupted: the question is withdrawn
	}
	r := Reply{Action: "deploy", Version: version}
	th.mu.Lock()
	defer th.mu.Unlock()
	if len(a.Selected) == 1 && a.Selected[0].ID == "approve" {
		r.Deployed = true
		th.deployed = append(th.deployed, version)
		return r, t.Respond(ctx, fmt.Sprintf("Deployed %s.", version))
	}
	th.rejected = append(th.rejected, version)
	return r, t.Respond(ctx, fmt.Sprintf("Not deploying %s: it was rejected.", version))
}

func (th *thread) status() string {
	th.mu.Lock()
	defer th.mu.Unlock()
	if len(th.deployed)+len(th.rejected) == 0 {
		return "Nothing deployed in this thread yet."
	}
	var b strings.Builder
	if len(th.deployed) > 0 {
		fmt.Fprintf(&b, "Deployed: %s.", strings.Join(th.deployed, ", "))
	}
	if len(th.rejected) > 0 {
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "Rejected: %s.", strings.Join(th.rejected, ", "))
	}
	return b.String()
}

func main() { helmr.Main(helper) }
