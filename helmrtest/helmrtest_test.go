package helmrtest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/helmr-go/helmr"
	"github.com/helmr-go/helmr/helmrtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// A control plane with its session "processes" leaves no goroutine
	// behind once the test ends (idle HTTP keep-alives excepted).
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
}

var box = helmr.Template(helmr.TemplateSpec{ID: "box", Image: helmr.Image("box").FromHost()})

var greeter = helmr.Agent(helmr.AgentSpec[helmr.InputContent, map[string]string, string]{ID: "greeter", Template: box,
	Init: func(ctx context.Context, ic *helmr.InitContext) (string, error) { return "Hello, ", nil },
	Turn: func(ctx context.Context, t *helmr.Turn[helmr.InputContent], ac *helmr.AgentContext[string]) (map[string]string, error) {
		if t.Input.PlainText() == "fail" {
			return nil, errors.New("no greeting today")
		}
		if _, err := t.Output.Write(ctx, "thinking"); err != nil {
			return nil, err
		}
		if err := t.Respond(ctx, ac.InitResult+t.Input.PlainText()); err != nil {
			return nil, err
		}
		return map[string]string{"session": ac.Session.ID}, nil
	}})

func TestRun(t *testing.T) {
	env := helmrtest.New(t, greeter)
	out := env.Run(t, "greeter", helmrtest.Text("Ada"))
	if out.Status != "completed" || out.Response.PlainText() != "Hello, Ada" {
		t.Fatalf("outcome %+v", out)
	}
	out = env.Run(t, "greeter", helmrtest.Text("fail"))
	if out.Status != "failed" || out.Error == nil || out.Error.Message != "no greeting today" {
		t.Fatalf("failing turn %+v", out.Error)
	}
}
