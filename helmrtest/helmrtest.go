// Package helmrtest runs Agents inside a test: a real control plane on a
// temporary SQLite file, real HTTP on loopback and the real session
// protocol, with each Session's process a goroutine of the test instead of
// a built binary.
//
//	func TestEcho(t *testing.T) {
//		env := helmrtest.New(t, echo)
//		out := env.Run(t, "echo", helmrtest.Text("hi"))
//		if out.Response.PlainText() != "hi" { t.Fatal(out) }
//	}
package helmrtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/helmr-go/helmr"
	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/controlplane"
	"github.com/helmr-go/helmr/internal/sessionproc"
	"github.com/helmr-go/helmr/internal/supervisor"
)

// Env is a control plane serving the Agents under test.
type Env struct {
	// Client talks to the control plane with its API key.
	Client *helmrclient.Client
	// URL and APIKey reach the REST API.
	URL    string
	APIKey string
	// Deployment is the Deployment of the Agents under test.
	Deployment *helmrtype.Deployment

	cp *controlplane.ControlPlane
}

// New starts a control plane for agents and stops it when the test ends.
func New(t testing.TB, agents ...helmr.Definition) *Env {
	t.Helper()
	m, err := helmr.BuildManifest(agents...)
	if err != nil {
		t.Fatalf("helmrtest: %v", err)
	}
	ctx := context.Background()
	cp, err := controlplane.Open(ctx, controlplane.Config{DataDir: t.TempDir(), Launcher: &goLauncher{agents: helmr.Runtime(agents...)}})
	if err != nil {
		t.Fatalf("helmrtest: %v", err)
	}
	raw, _ := json.Marshal(m)
	sum := sha256.Sum256(raw)
	env := &Env{cp: cp}
	env.Deployment, err = cp.Engine.PublishDeployment(ctx, "sha256:"+hex.EncodeToString(sum[:]), m, "", "")
	if err != nil {
		cp.Close(ctx)
		t.Fatalf("helmrtest: %v", err)
	}
	if env.APIKey, err = cp.Engine.CreateAPIKey(ctx, "helmrtest"); err != nil {
		cp.Close(ctx)
		t.Fatalf("helmrtest: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cp.Close(ctx)
		t.Fatalf("helmrtest: %v", err)
	}
	env.URL = "http://" + ln.Addr().String()
	env.Client = helmrclient.New(env.URL, env.APIKey)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		cp.Serve(sctx, ln)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		cp.Close(context.Background())
	})
	return env
}

// Text is conversational input with one text part.
func Text(s string) helmrtype.Content { return helmrtype.Text(s) }

// Run creates a Session of agent with input, waits for its first Turn and
// returns the outcome. It fails the test on an API error or after a minute.
func (e *Env) Run(t testing.TB, agent string, input any) helmrtype.TurnOutcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if input == nil {
		t.Fatalf("helmrtest: Run needs input")
	}
	rec, err := e.Client.Sessions.Create(ctx, agent, input, helmrclient.CreateOptions{})
	if err != nil {
		t.Fatalf("helmrtest: create %s: %v", agent, err)
	}
	out, err := rec.Turn.Wait(ctx)
	if err != nil {
		t.Fatalf("helmrtest: wait: %v", err)
	}
	return *out
}

// goLauncher runs each session "process" as a goroutine serving the real
// protocol over the control plane's socket.
type goLauncher struct {
	agents []sessionproc.Agent
}

type goProcess struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func (l *goLauncher) Launch(_ context.Context, spec supervisor.LaunchSpec) (supervisor.Process, error) {
	ctx, cancel := context.WithCancel(context.Background())
	p := &goProcess{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		ws, err := sessionproc.Dial(ctx, spec.Socket, spec.Token)
		if err == nil {
			err = sessionproc.Serve(ctx, ws, spec.Agent, l.agents)
		}
		if ctx.Err() != nil {
			err = context.Canceled
		}
		p.err = err
	}()
	return p, nil
}

func (p *goProcess) Done() <-chan struct{} { return p.done }
func (p *goProcess) Err() error            { return p.err }
func (p *goProcess) Kill()                 { p.cancel() }
