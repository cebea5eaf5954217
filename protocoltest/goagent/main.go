// Command goagent is the Go SDK's conformance agent: the program the
// protocol vectors (protocoltest/vectors) run against. It does exactly
// what protocoltest/README.md describes, as the TypeScript conformance
// agent (protocoltest/ts) does, so that both SDKs are checked by the same
// vectors.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/helmr-go/helmr"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/timers"
	"github.com/helmr-go/helmr/tokens"
)

var box = helmr.Template(helmr.TemplateSpec{ID: "box",
	Image:     helmr.Image("box").FromHost(),
	Resources: helmr.Resources{CPU: 1, Memory: "256MiB"}})

// Input selects what a Turn does ("do") and with what.
type Input struct {
	Do      string `json:"do"`
	Text    string `json:"text,omitempty"`
	For     string `json:"for,omitempty"`
	Cleanup string `json:"cleanup,omitempty"`
}

// Init is what init returns.
type Init struct {
	Ready bool `json:"ready"`
}

// codeOf is the stable code of an error, "" for none.
func codeOf(err error) string {
	if err == nil {
		return ""
	}
	if c := helmrtype.CodeOf(err); c != "" {
		return string(c)
	}
	return "unknown"
}

func turn(ctx context.Context, t *helmr.Turn[Input], ac *helmr.AgentContext[Init]) (map[string]any, error) {
	in := t.Input
	switch in.Do {
	case "echo":
		r, err := t.Output.Write(ctx, "echo: "+in.Text)
		if err != nil {
			return nil, err
		}
		if err := t.Respond(ctx, "echoed "+in.Text); err != nil {
			return nil, err
		}
		return map[string]any{"echo": in.Text, "sequence": r.Sequence}, nil
	case "info":
		return map[string]any{"session_id": ac.Session.ID, "session_key": ac.Session.Key, "computer_id": ac.ComputerID,
			"deployment_id": ac.DeploymentID, "recovery": ac.Recovery.Kind, "init_ready": ac.InitResult.Ready,
			"turn_id": t.ID, "turn_sequence": t.Sequence, "source": t.Source.Kind}, nil
	case "limits":
		parts := make(helmr.Content, 65)
		for i := range parts {
			parts[i] = helmrtype.ContentPart{Type: helmrtype.PartText, Text: "x"}
		}
		_, tooMany := t.Output.Write(ctx, parts)
		_, tooBig := t.Output.Write(ctx, strings.Repeat("a", 256<<10+1))
		_, server := t.Output.Write(ctx, "after")
		return map[string]any{"local": []string{codeOf(tooMany), codeOf(tooBig)}, "server": codeOf(server)}, nil
	case "respond_twice":
		if err := t.Respond(ctx, "one"); err != nil {
			return nil, err
		}
		return map[string]any{"second": codeOf(t.Respond(ctx, "two"))}, nil
	case "messages":
		var got []string
		done := make(chan struct{})
		err := t.OnMessage(ctx, func(ctx context.Context, m helmr.Message) error {
			text := m.Content.PlainText()
			if text == "reject" {
				return helmr.RejectMessage("rejected by design")
			}
			got = append(got, text)
			if text == "done" {
				close(done)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		select {
		case <-done:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		return map[string]any{"got": got}, nil
	case "block":
		t.OnCancel(func(context.Context, error) error {
			if in.Cleanup == "fail" {
				return errors.New("cleanup failed by design")
			}
			return nil
		})
		<-ctx.Done()
		return nil, context.Cause(ctx)
	case "fail":
		return nil, errors.New("failed by design")
	case "timer":
		d, err := helmrtype.ParseDuration(in.For)
		if err != nil {
			return nil, err
		}
		if err := timers.WaitFor(ctx, d); err != nil {
			return nil, err
		}
		return map[string]any{"timer": "fired"}, nil
	case "nap":
		// On the process's own clock, not a durable wait: the write that
		// follows happens whatever the connection's state (a park's pause).
		d, err := helmrtype.ParseDuration(in.For)
		if err != nil {
			return nil, err
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		if _, err := t.Output.Write(ctx, "awake"); err != nil {
			return nil, err
		}
		return map[string]any{"napped": true}, nil
	case "ask":
		a, err := t.Ask(ctx, helmr.Question{Prompt: helmr.Text("Your name?"), Answer: helmr.TextAnswer()})
		if err != nil {
			return nil, err
		}
		return map[string]any{"answer": a.Text, "by": a.RespondedBy.Kind}, nil
	case "token":
		tok, err := tokens.Create(ctx, tokens.Options{Timeout: "1h"})
		if err != nil {
			return nil, err
		}
		v, err := tok.Wait(ctx, tokens.WaitOptions{})
		if err != nil {
			return nil, err
		}
		return map[string]any{"token_id": tok.ID, "callback_url": tok.CallbackURL,
			"public": strings.HasPrefix(tok.PublicAccessToken, "hlmr_tok_"), "value": json.RawMessage(v)}, nil
	case "mcp":
		narrow := &helmr.RuntimeMCPPolicy{Allow: []helmr.RuntimeMCPRule{{Operation: "start", Agents: []string{"conformance"}}}}
		c, err := ac.MCP.ConnectionOptions(ctx, narrow)
		if err != nil {
			return nil, err
		}
		wide := &helmr.RuntimeMCPPolicy{Allow: []helmr.RuntimeMCPRule{{Operation: "cancel_session", Agents: []string{"conformance"}}}}
		_, refused := ac.MCP.ConnectionOptions(ctx, wide)
		return map[string]any{"loopback": strings.HasPrefix(c.URL, "http://127.0.0.1:"), "refused": codeOf(refused)}, nil
	}
	return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "unknown do %q", in.Do)
}

var conformance = helmr.Agent(helmr.AgentSpec[Input, map[string]any, Init]{
	ID: "conformance", Template: box,
	Init: func(ctx context.Context, ic *helmr.InitContext) (Init, error) { return Init{Ready: true}, nil },
	Turn: turn,
})

var initFails = helmr.Agent(helmr.AgentSpec[helmr.InputContent, string, struct{}]{
	ID: "init-fails", Template: box,
	Init: func(ctx context.Context, ic *helmr.InitContext) (struct{}, error) {
		return struct{}{}, errors.New("init refused by design")
	},
	Turn: func(ctx context.Context, t *helmr.Turn[helmr.InputContent], _ *helmr.AgentContext[struct{}]) (string, error) {
		return "unreachable", nil
	},
})

func main() {
	helmr.Main(conformance, initFails)
}
