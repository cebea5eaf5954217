// Command webhook is an agent that waits for an outside system: it creates a
// Token, hands its callback URL out, and waits until something POSTs the
// result there — durably, surviving control-plane restarts. Run it with
// `helmr dev examples/webhook`; see README.md.
package main

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/helmr-go/helmr"
	"github.com/helmr-go/helmr/tokens"
)

var box = helmr.Template(helmr.TemplateSpec{ID: "box",
	Image:     helmr.Image("box").FromHost(),
	Resources: helmr.Resources{CPU: 1, Memory: "512MiB"}})

// Build is what the CI system reports back.
type Build struct {
	Status string `json:"status"`
	URL    string `json:"url,omitempty"`
}

var ciwait = helmr.Agent(helmr.AgentSpec[helmr.InputContent, Build, struct{}]{
	ID: "ciwait", Template: box,
	Turn: func(ctx context.Context, t *helmr.Turn[helmr.InputContent], _ *helmr.AgentContext[struct{}]) (Build, error) {
		tok, err := tokens.Create(ctx, tokens.Options{Timeout: "24h", Tags: []string{"ci"}})
		if err != nil {
			return Build{}, err
		}
		// A real agent hands tok.CallbackURL and tok.PublicAccessToken to the
		// CI system (for example as a webhook with a bearer token). Only the
		// ID and URL go in the output: the credential is a secret.
		info, _ := json.Marshal(map[string]string{"token": tok.ID, "callback_url": tok.CallbackURL})
		t.Output.Write(ctx, helmr.Content{{Type: "json", Value: info}})
		b, err := tokens.WaitAs[Build](ctx, tok, tokens.WaitOptions{
			Timeout: "2h", // this waiter gives up earlier than the Token expires
			Schema: func(raw json.RawMessage) error {
				var b Build
				if err := json.Unmarshal(raw, &b); err != nil || b.Status == "" {
					return errMissingStatus
				}
				return nil
			},
		})
		if err != nil {
			return Build{}, err // wait_timeout, token_expired, token_cancelled, result_invalid
		}
		return b, t.Respond(ctx, "CI finished: "+b.Status)
	}})

var errMissingStatus = errors.New(`the completion needs a "status"`)

func main() { helmr.Main(ciwait) }
