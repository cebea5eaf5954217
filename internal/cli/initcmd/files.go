package initcmd

// The files helmr init writes, as text/template sources filled with a
// project.

const goModFile = `module {{.Module}}

go {{.GoVersion}}

require github.com/helmr-go/helmr {{.SDKVersion}}
{{if .SDKPath}}
// The Helmr SDK is not published yet: this replace builds the module
// against the Helmr checkout helmr init came from. Point it at another
// checkout with "go mod edit -replace github.com/helmr-go/helmr=PATH", or
// delete it once the version above can be downloaded.
replace github.com/helmr-go/helmr => {{.SDKPath}}
{{end}}`

const mainFile = `// Command {{.Name}} is a Helmr agent program: one Agent, "greeter". Run it
// with "helmr dev ." and test it with "go test ./...".
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/helmr-go/helmr"
)

// box is the Computer the Agent's Sessions run on: an image made from the
// host's system files.
var box = helmr.Template(helmr.TemplateSpec{ID: "box",
	Image:     helmr.Image("box").FromHost(),
	Resources: helmr.Resources{CPU: 1, Memory: "1GiB"}})

// GreetInput is what a Turn of the greeter takes.
type GreetInput struct {
	Name string ` + "`json:\"name\"`" + `
}

// GreetResult is what a Turn of the greeter returns.
type GreetResult struct {
	Greeting string ` + "`json:\"greeting\"`" + `
	Turns    int    ` + "`json:\"turns\"`" + `
}

// state is what Init returns once per Session process; every Turn reads it
// as ac.InitResult.
type state struct {
	salutation string
	startedAt  time.Time
	turns      int
}

var greeter = helmr.Agent(helmr.AgentSpec[GreetInput, GreetResult, *state]{
	ID: "greeter", Template: box,
	Init: func(ctx context.Context, ic *helmr.InitContext) (*state, error) {
		return &state{salutation: "Hello", startedAt: time.Now()}, nil
	},
	Turn: func(ctx context.Context, t *helmr.Turn[GreetInput], ac *helmr.AgentContext[*state]) (GreetResult, error) {
		st := ac.InitResult // the init state, kept between Turns of this process
		st.turns++
		if _, err := t.Output.Write(ctx, fmt.Sprintf("Greeting %s\n", t.Input.Name)); err != nil {
			return GreetResult{}, err
		}
		greeting := fmt.Sprintf("%s, %s!", st.salutation, t.Input.Name)
		if err := t.Respond(ctx, greeting); err != nil {
			return GreetResult{}, err
		}
		return GreetResult{Greeting: greeting, Turns: st.turns}, nil
	}})

func main() { helmr.Main(greeter) }
`

const mainTestFile = `package main

import (
	"context"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtest"
)

// TestGreeter runs the Agent in this test process (helmrtest: an
// in-process control plane, no binary built) and waits for its Turn.
func TestGreeter(t *testing.T) {
	env := helmrtest.New(t, greeter)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	started, err := helmrclient.Create(ctx, env.Client, greeter, GreetInput{Name: "Ada"}, helmrclient.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := started.Turn.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != "completed" || out.Result.Greeting != "Hello, Ada!" || out.Result.Turns != 1 || out.Response.PlainText() != "Hello, Ada!" {
		t.Fatalf("outcome %+v", out)
	}
}
`

const readmeFile = `# {{.Name}}

A Helmr agent program written by ` + "`helmr init`" + `: one Agent, ` + "`greeter`" + `, in
` + "`main.go`" + `, and its test in ` + "`main_test.go`" + `.

    go test ./...    # runs the Agent in the test process (helmrtest)
    helmr dev .      # an embedded control plane on 127.0.0.1:7070 that runs it
                     # and redeploys it whenever a file changes

With ` + "`helmr dev`" + ` running, in another shell (it saved its URL and key as the
` + "`dev`" + ` profile; ` + "`helmr profile list`" + ` shows it):

    helmr session create --agent greeter --input-json '{"name": "Ada"}' --wait

` + "`helmr deploy .`" + ` publishes the program to another control plane (see
` + "`helmr login`" + `).

## How the SDK is found

` + "`go.mod`" + ` requires ` + "`github.com/helmr-go/helmr {{.SDKVersion}}`" + `. The Helmr module is
not published yet, so {{if .SDKPath}}a ` + "`replace`" + ` directive points it at the checkout
helmr init came from:

    replace github.com/helmr-go/helmr => {{.SDKPath}}

helmr init found that checkout from its build (a helmr built from the
checkout knows where its sources are) or from ` + "`--sdk-path`" + `. To use another
checkout:

    go mod edit -replace github.com/helmr-go/helmr=/path/to/helmr
    go mod tidy

Once the module can be downloaded, delete the replace
(` + "`go mod edit -dropreplace github.com/helmr-go/helmr`" + `) and require a
published version.{{else}}you need a checkout of it: helmr init did not know
where one is. Point the module at it and tidy:

    go mod edit -replace github.com/helmr-go/helmr=/path/to/helmr
    go mod tidy{{end}}

The other dependencies are those of the SDK; ` + "`go.sum`" + ` starts as the
checkout's, so ` + "`go mod tidy`" + ` finds them in the module cache the checkout
already filled.
`

const gitignoreFile = `# helmr dev keeps its database, deployments and API key here.
/.helmr/
`
