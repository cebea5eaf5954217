package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/helmr-go/helmr"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/timers"
	"github.com/helmr-go/helmr/tokens"
)

// waiter waits durably. Input (words):
//   - "timer D [busy]": timers.WaitFor(D); with busy, a goroutine spins
//     meanwhile (to measure suspension).
//   - "token EXPIRY WAITTIMEOUT": creates a Token ("-" for none), writes
//     {"token": id, "secret": …, "url": …} as output, and waits on it.
//   - "tokenschema": like "token - -", and the wait carries the JSON
//     Schema of approval (the Token refuses other completions).
//   - "ask" / "asktext": asks a choice / text question.
//
// The result is {"value": …, "error": code, "pid": …, "init": n}.
var inits atomic.Int64

var waiter = helmr.Agent(helmr.AgentSpec[text, map[string]any, int64]{ID: "waiter", Template: box,
	Init: waitInit, Turn: waitTurn})

// netwaiter and diskwaiter are waiter on a Computer with network, and on
// one with a disk limit.
var (
	netwaiter = helmr.Agent(helmr.AgentSpec[text, map[string]any, int64]{ID: "netwaiter",
		Template: helmr.Template(helmr.TemplateSpec{ID: "netbox", Image: helmr.Image("netbox").FromHost(), Network: true}),
		Init:     waitInit, Turn: waitTurn})
	diskwaiter = helmr.Agent(helmr.AgentSpec[text, map[string]any, int64]{ID: "diskwaiter",
		Template: helmr.Template(helmr.TemplateSpec{ID: "diskbox", Image: helmr.Image("diskbox").FromHost(),
			Resources: helmr.Resources{Disk: "64MiB"}}),
		Init: waitInit, Turn: waitTurn})
)

// asked counts the countask Turns this process ran: memory that only a
// restored process keeps.
var asked atomic.Int64

func waitInit(ctx context.Context, ic *helmr.InitContext) (int64, error) { return inits.Add(1), nil }

func waitTurn(ctx context.Context, t *helmr.Turn[text], ac *helmr.AgentContext[int64]) (map[string]any, error) {
	f := strings.Fields(t.Input.PlainText())
	res := map[string]any{"pid": os.Getpid(), "init": ac.InitResult}
	fail := func(err error) (map[string]any, error) {
		if ctx.Err() != nil {
			return nil, err
		}
		res["error"] = helmrtype.CodeOf(err)
		return res, nil
	}
	idle := "50ms"
	switch f[0] {
	case "timer":
		d, _ := time.ParseDuration(f[1])
		if len(f) > 2 && f[2] == "busy" {
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
				}
			}()
		}
		start := time.Now()
		if err := timers.WaitFor(ctx, d, timers.Options{IdleTimeout: idle}); err != nil {
			return fail(err)
		}
		res["value"] = time.Since(start).Milliseconds()
		t.Output.Write(ctx, "timer fired\n")
	case "token", "tokenschema":
		if f[0] == "tokenschema" {
			f = []string{f[0], "-", "-"}
		}
		o := tokens.Options{Tags: []string{"e2e"}}
		if f[1] != "-" {
			o.Timeout = f[1]
		}
		tok, err := tokens.Create(ctx, o)
		if err != nil {
			return fail(err)
		}
		b, _ := json.Marshal(map[string]string{"token": tok.ID, "secret": tok.PublicAccessToken, "url": tok.CallbackURL})
		t.Output.Write(ctx, helmr.Content{{Type: "json", Value: b}})
		w := tokens.WaitOptions{IdleTimeout: idle}
		if f[2] != "-" {
			w.Timeout = f[2]
		}
		if f[0] == "tokenschema" {
			v, err := helmr.SchemaFor[approval]()
			if err != nil {
				return fail(err)
			}
			w.JSONSchema = v.JSONSchema()
			w.Schema = func(raw json.RawMessage) error { _, err := v.Validate(ctx, raw); return err }
		}
		v, err := tok.Wait(ctx, w)
		if err != nil {
			return fail(err)
		}
		res["value"] = v
	case "countask":
		// "countask [hot]": counts the Turn in memory, writes a stamp
		// it keeps in memory only, and asks (hot: with an idle timeout
		// of an hour, so the wait stays hot); the result has both, and
		// a file in /workspace written before the question.
		n := asked.Add(1)
		stamp := time.Now().UnixNano()
		os.WriteFile(workspace()+"/asked", []byte(strconv.FormatInt(n, 10)), 0o600)
		t.Output.Write(ctx, fmt.Sprintf("stamp %d\n", stamp))
		askIdle := idle
		if len(f) > 1 && f[1] == "hot" {
			askIdle = "1h"
		}
		a, err := t.Ask(ctx, helmr.Question{Prompt: helmr.Text("Go on?"), Answer: helmr.TextAnswer()}, helmr.AskOptions{IdleTimeout: askIdle})
		if err != nil {
			return fail(err)
		}
		file, _ := os.ReadFile(workspace() + "/asked")
		t.Output.Write(ctx, "answered\n")
		res["value"], res["count"], res["stamp"], res["file"] = a.Raw, n, stamp, string(file)
	case "ask", "asktext":
		q := helmr.Question{Prompt: helmr.Text("Deploy to production?"),
			Answer: helmr.Choice(false, true, helmr.Option("yes", "Yes", true), helmr.Option("no", "No", false))}
		if f[0] == "asktext" {
			q = helmr.Question{Prompt: helmr.Text("Why?"), Answer: helmr.TextAnswer()}
		}
		a, err := t.Ask(ctx, q, helmr.AskOptions{IdleTimeout: idle})
		if err != nil {
			return fail(err)
		}
		res["value"] = a.Raw
		res["responded_by"] = a.RespondedBy.Kind
		res["responded_by_id"] = a.RespondedBy.ID
	}
	return res, nil
}

// counter is an Actor: one Run loop receives every Turn of the Session and
// counts them. Input "wait" waits on a timer, "fail" fails the Turn,
// "implicit" leaves the Turn to the next Receive, "block" waits for an
// interrupt.
var counter = helmr.Agent(helmr.AgentSpec[text, map[string]any, int64]{ID: "counter", Template: box, IdleTimeout: "50ms",
	Init: func(ctx context.Context, ic *helmr.InitContext) (int64, error) { return inits.Add(1), nil },
	Run: func(ctx context.Context, s *helmr.ActorSession[text, map[string]any], ac *helmr.AgentContext[int64]) error {
		n := 0
		for {
			t, err := s.Receive(ctx)
			if t == nil || err != nil {
				return err
			}
			n++
			tctx := t.Context()
			switch in := t.Input.PlainText(); in {
			case "wait":
				if err := timers.WaitFor(tctx, 300*time.Millisecond); err != nil {
					t.Fail(err)
					continue
				}
			case "fail":
				t.Fail(errors.New("asked to fail"))
				continue
			case "implicit":
				t.Output.Write(tctx, "left to the next receive\n")
				continue
			case "block":
				<-tctx.Done()
				t.Fail(context.Cause(tctx))
				continue
			}
			t.Output.Write(tctx, "turn "+t.Input.PlainText()+"\n")
			t.Complete(map[string]any{"n": n, "pid": os.Getpid(), "init": ac.InitResult})
		}
	}})

// sleepy hibernates 100 ms after its Session goes idle; it reports its
// process and how many times init ran.
var sleepy = helmr.Agent(helmr.AgentSpec[text, map[string]any, int64]{ID: "sleepy", Template: box, HibernateAfterIdle: "100ms",
	Init: func(ctx context.Context, ic *helmr.InitContext) (int64, error) { return inits.Add(1), nil },
	Turn: func(ctx context.Context, t *helmr.Turn[text], ac *helmr.AgentContext[int64]) (map[string]any, error) {
		return map[string]any{"pid": os.Getpid(), "init": ac.InitResult}, nil
	}})

// approval is the completion a "tokenschema" wait takes.
type approval struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
}
