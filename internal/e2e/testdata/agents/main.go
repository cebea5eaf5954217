// Command agents is the agent program the end-to-end tests run.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/helmr-go/helmr"
)

var box = helmr.Template(helmr.TemplateSpec{ID: "box", Image: helmr.Image("box").FromHost(),
	Resources: helmr.Resources{CPU: 1, Memory: "512MiB"}})

type text = helmr.InputContent

// echo responds with its input and writes two output fragments.
var echo = helmr.Agent(helmr.AgentSpec[text, map[string]any, struct{}]{ID: "echo", Template: box,
	Turn: func(ctx context.Context, t *helmr.Turn[text], ac *helmr.AgentContext[struct{}]) (map[string]any, error) {
		in := t.Input.PlainText()
		switch in {
		case "crash":
			os.Exit(7)
		case "fail":
			return nil, errors.New("boom: the handler failed")
		case "panic":
			panic("kaboom")
		case "recovery":
			return map[string]any{"kind": ac.Recovery.Kind, "reason": ac.Recovery.Reason}, nil
		case "empty":
			if _, err := t.Output.Write(ctx, helmr.Content{}); err != nil {
				return nil, err
			}
			return nil, t.Respond(ctx, helmr.Content{})
		case "concurrent":
			var wg sync.WaitGroup
			seqs := make([]int64, 10)
			errs := make([]error, 10)
			for i := range seqs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := t.Output.Write(ctx, fmt.Sprintf("w%d ", i))
					seqs[i], errs[i] = r.Sequence, err
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				return nil, err
			}
			return map[string]any{"seqs": seqs}, nil
		case "pipe":
			seq := func(yield func(string) bool) {
				for _, s := range []string{"a", "b", "c"} {
					if !yield(s) {
						return
					}
				}
			}
			if err := t.Output.Pipe(ctx, iter.Seq[string](seq)); err != nil {
				return nil, err
			}
			ch := make(chan helmr.Content, 2)
			ch <- helmr.Text("d")
			j, _ := helmr.JSON(map[string]int{"n": 1})
			ch <- j
			close(ch)
			if err := t.Output.Pipe(ctx, ch); err != nil {
				return nil, err
			}
			if err := t.Output.Pipe(ctx, 42); err == nil {
				return nil, errors.New("Pipe took an int")
			}
			return map[string]any{"computer": ac.ComputerID, "deployment": ac.DeploymentID, "key": ac.Session.Key}, nil
		}
		if strings.HasPrefix(in, "sleep ") {
			d, _ := time.ParseDuration(strings.TrimPrefix(in, "sleep "))
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		t.Output.Write(ctx, "echo: ")
		t.Output.Write(ctx, in)
		if err := t.Respond(ctx, in); err != nil {
			return nil, err
		}
		return map[string]any{"sequence": t.Sequence, "session": ac.Session.ID, "recovery": ac.Recovery.Kind, "source": t.Source.Kind}, nil
	}})

// Review is the typed agent's input.
type Review struct {
	Issue int `json:"issue"`
}

// Verdict is the typed agent's result.
type Verdict struct {
	Reviewed bool   `json:"reviewed"`
	Note     string `json:"note,omitempty"`
}

type mustReview struct{}

func (mustReview) Validate(_ context.Context, raw json.RawMessage) (Verdict, error) {
	var v Verdict
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, err
	}
	if !v.Reviewed {
		return v, errors.New("reviewed must be true")
	}
	v.Note += " (checked)" // a validator may transform the result
	return v, nil
}
func (mustReview) JSONSchema() json.RawMessage { return nil }

// typed validates input against its type and results with a custom validator.
var typed = helmr.Agent(helmr.AgentSpec[Review, Verdict, int]{ID: "typed", Template: box, ResultSchema: mustReview{},
	Init: func(ctx context.Context, ic *helmr.InitContext) (int, error) { return 42, nil },
	Turn: func(ctx context.Context, t *helmr.Turn[Review], ac *helmr.AgentContext[int]) (Verdict, error) {
		t.Respond(ctx, fmt.Sprintf("issue %d", t.Input.Issue))
		return Verdict{Reviewed: t.Input.Issue != 13, Note: fmt.Sprintf("init=%d", ac.InitResult)}, nil
	}})

// limits exercises respond twice and the output limits; it reports the codes.
var limits = helmr.Agent(helmr.AgentSpec[text, map[string]string, struct{}]{ID: "limits", Template: box,
	Turn: func(ctx context.Context, t *helmr.Turn[text], ac *helmr.AgentContext[struct{}]) (map[string]string, error) {
		out := map[string]string{}
		code := func(err error) string {
			var he interface{ Error() string }
			if errors.As(err, &he) && err != nil {
				return strings.SplitN(err.Error(), ":", 2)[0]
			}
			return "ok"
		}
		out["respond1"] = code(t.Respond(ctx, ""))
		out["respond2"] = code(t.Respond(ctx, "again"))
		_, err := t.Output.Write(ctx, strings.Repeat("x", 300<<10))
		out["too_large"] = code(err)
		parts := make(helmr.Content, 65)
		for i := range parts {
			parts[i] = helmr.ContentPart{Type: "text", Text: "p"}
		}
		_, err = t.Output.Write(ctx, parts)
		out["too_many_parts"] = code(err)
		chunk := strings.Repeat("y", 250<<10)
		var budgetErr error
		for i := 0; i < 40 && budgetErr == nil; i++ {
			_, budgetErr = t.Output.Write(ctx, chunk)
		}
		out["budget"] = code(budgetErr)
		return out, nil
	}})

// chat accepts messages "ok…", rejects "no…", fails the Turn on "explode",
// and returns after "done".
var chat = helmr.Agent(helmr.AgentSpec[text, []string, struct{}]{ID: "chat", Template: box,
	Turn: func(ctx context.Context, t *helmr.Turn[text], ac *helmr.AgentContext[struct{}]) ([]string, error) {
		var got []string
		done := make(chan struct{})
		err := t.OnMessage(ctx, func(ctx context.Context, m helmr.Message) error {
			s := m.Content.PlainText()
			switch {
			case strings.HasPrefix(s, "no"):
				return helmr.RejectMessage("not now: %s", s)
			case s == "explode":
				return errors.New("the message handler exploded")
			case s == "done":
				close(done)
				return nil
			}
			got = append(got, s)
			t.Output.Write(ctx, "got "+s+"\n")
			return nil
		})
		if err != nil {
			return nil, err
		}
		t.Output.Write(ctx, "listening\n")
		select {
		case <-done:
			return got, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}})

// slow blocks until cancelled; its OnCancel callback writes output. Input
// "failcleanup" makes the callback fail; "late" registers it only after
// cancellation; "quick" returns at once. Every Turn reports its process ID.
var slow = helmr.Agent(helmr.AgentSpec[text, map[string]int, struct{}]{ID: "slow", Template: box, MaxTurnDuration: "1h",
	Turn: func(ctx context.Context, t *helmr.Turn[text], ac *helmr.AgentContext[struct{}]) (map[string]int, error) {
		in := t.Input.PlainText()
		if in == "quick" {
			return map[string]int{"pid": os.Getpid()}, nil
		}
		cleanup := func(cctx context.Context, reason error) error {
			if in == "failcleanup" {
				return errors.New("could not stop the tool")
			}
			if in == "blockcleanup" {
				select {} // a callback that never returns
			}
			_, err := t.Output.Write(cctx, "cleanup ran: "+reason.Error())
			return err
		}
		if in != "late" {
			t.OnCancel(cleanup)
		}
		t.Output.Write(ctx, fmt.Sprintf("waiting pid=%d\n", os.Getpid()))
		<-ctx.Done()
		if in == "late" {
			if err := t.OnCancel(cleanup); err != nil {
				return nil, err
			}
		}
		return nil, ctx.Err()
	}})

// deadline has a short max turn duration.
var deadline = helmr.Agent(helmr.AgentSpec[text, any, struct{}]{ID: "deadline", Template: box, MaxTurnDuration: "300ms",
	Turn: func(ctx context.Context, t *helmr.Turn[text], ac *helmr.AgentContext[struct{}]) (any, error) {
		if d, ok := ctx.Deadline(); ok && time.Until(d) <= 300*time.Millisecond {
			t.Output.Write(ctx, "deadline set")
		}
		t.OnCancel(func(cctx context.Context, reason error) error {
			_, err := t.Output.Write(cctx, "deadline cleanup")
			return err
		})
		<-ctx.Done()
		return nil, ctx.Err()
	}})

// badinit's init always fails.
var badinit = helmr.Agent(helmr.AgentSpec[text, any, struct{}]{ID: "badinit", Template: box,
	Init: func(ctx context.Context, ic *helmr.InitContext) (struct{}, error) {
		return struct{}{}, errors.New("no credentials for the model")
	},
	Turn: func(ctx context.Context, t *helmr.Turn[text], ac *helmr.AgentContext[struct{}]) (any, error) {
		return nil, nil
	}})

// tight's Computers have a disk limit of 4 MiB and at most 64 processes:
// its Turn writes 1 MiB a tenth of a second until stopped.
var tight = helmr.Agent(helmr.AgentSpec[text, any, struct{}]{ID: "tight",
	Template: helmr.Template(helmr.TemplateSpec{ID: "tight", Image: helmr.Image("tight").FromHost(),
		Resources: helmr.Resources{Disk: "4MiB", Processes: 64}}),
	Turn: func(ctx context.Context, t *helmr.Turn[text], ac *helmr.AgentContext[struct{}]) (any, error) {
		t.Output.Write(ctx, "filling")
		chunk := make([]byte, 1<<20)
		for i := 0; ctx.Err() == nil && i < 64; i++ {
			if err := os.WriteFile(fmt.Sprintf("%s/fill-%d", workspace(), i), chunk, 0o600); err != nil {
				return nil, err
			}
			time.Sleep(100 * time.Millisecond)
		}
		return "filled", nil
	}})

func main() {
	helmr.Main(echo, typed, limits, chat, slow, deadline, badinit, waiter, netwaiter, diskwaiter, counter, sleepy, driver, limited, worker, files, colocated, tight)
}
