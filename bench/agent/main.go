// Command agent is the agent program the benchmark runs: echo, a text
// Agent that writes one output fragment, responds and returns a small
// result; and parker, for the parking phase, which asks a question with a
// short idle timeout (so that its process is parked while it waits) and
// writes output as soon as the answer arrives.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync/atomic"

	"github.com/helmr-go/helmr"
)

var box = helmr.Template(helmr.TemplateSpec{ID: "bench", Image: helmr.Image("bench").FromHost()})

var echo = helmr.Agent(helmr.AgentSpec[helmr.InputContent, map[string]int64, struct{}]{ID: "echo", Template: box,
	Turn: func(ctx context.Context, t *helmr.Turn[helmr.InputContent], _ *helmr.AgentContext[struct{}]) (map[string]int64, error) {
		if _, err := t.Output.Write(ctx, "ok "); err != nil {
			return nil, err
		}
		if err := t.Respond(ctx, t.Input.PlainText()); err != nil {
			return nil, err
		}
		return map[string]int64{"seq": t.Sequence}, nil
	}})

// The parker's memory: a count of its Turns and a value drawn once per
// process. A process restored from its checkpoint keeps both; one started
// again would count from 1 under another boot.
var (
	parks atomic.Int64
	boot  = newBoot()
)

func newBoot() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// parkResult is what a parker's Turn returns.
type parkResult struct {
	Count  int64  `json:"count"`
	Boot   string `json:"boot"`
	Answer string `json:"answer"`
}

var parker = helmr.Agent(helmr.AgentSpec[helmr.InputContent, parkResult, struct{}]{ID: "parker", Template: box,
	Turn: func(ctx context.Context, t *helmr.Turn[helmr.InputContent], _ *helmr.AgentContext[struct{}]) (parkResult, error) {
		n := parks.Add(1)
		a, err := t.Ask(ctx, helmr.Question{Prompt: helmr.Text("park"), Answer: helmr.TextAnswer()},
			helmr.AskOptions{IdleTimeout: t.Input.PlainText()})
		if err != nil {
			return parkResult{}, err
		}
		if _, err := t.Output.Write(ctx, "resumed "); err != nil {
			return parkResult{}, err
		}
		return parkResult{Count: n, Boot: boot, Answer: a.Text}, nil
	}})

func main() { helmr.Main(echo, parker) }
