// Command copyagent is an agent program whose Template copies files from
// its package into the image, for the end-to-end test of Copy steps.
package main

import (
	"context"
	"os"

	"github.com/helmr-go/helmr"
)

// shelf is a scratch image with the package's data directory at /srv/data
// and its greeting at /etc/greeting.txt.
var shelf = helmr.Template(helmr.TemplateSpec{ID: "shelf",
	Image: helmr.Image("shelf").From("scratch").
		Copy("/srv/data/", "data").
		Workdir("/etc").
		Copy("greeting.txt", "greeting.txt"),
	Resources: helmr.Resources{CPU: 1, Memory: "256MiB"}})

// reader returns the content of the file its input names.
var reader = helmr.Agent(helmr.AgentSpec[helmr.InputContent, string, struct{}]{ID: "reader", Template: shelf,
	Turn: func(ctx context.Context, t *helmr.Turn[helmr.InputContent], _ *helmr.AgentContext[struct{}]) (string, error) {
		b, err := os.ReadFile(t.Input.PlainText())
		if err != nil {
			return "error: " + err.Error(), nil
		}
		return string(b), nil
	}})

func main() { helmr.Main(reader) }
