package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
)

// Publishing a Deployment prepares its Templates' images: right after
// helmr deploy returns, before any Session, the image's roots are in the
// server's image store, and the first Session builds nothing. helmr
// deploy, not on a terminal, prints one plain line per step (the local
// build, the sources, the upload, each image step) on stderr and keeps
// stdout pure JSON. A Deployment whose image fails to build is refused
// with image_build_failed naming the Template, the image and the step,
// and the current Deployment stays.
func TestPublishPreparesImages(t *testing.T) {
	needSandbox(t) // the Computer sees its image as its root only in the sandbox
	if testing.Short() {
		t.Skip("runs helmr server and builds an agent")
	}
	pkg := copyPackage(t)
	data := t.TempDir()
	s := startServer(t, data, "server", "--log-level", "info")

	out, errOut, code := s.cli(t, "deploy", pkg, "--json")
	if code != 0 {
		t.Fatalf("deploy: %d %s %s", code, out, errOut)
	}
	var d1 helmrtype.Deployment
	if err := json.Unmarshal([]byte(out), &d1); err != nil {
		t.Fatalf("stdout is not the Deployment's JSON: %q: %v", out, err)
	}
	// (a) Built at publication: scratch and the two Copy steps' roots.
	roots := imageRoots(t, data)
	builds := strings.Count(s.output(), "image step built")
	if len(roots) != 3 || builds != 2 {
		t.Fatalf("after helmr deploy, before any Session: roots %v, %d steps built; server log:\n%s", roots, builds, s.output())
	}
	// (b) One line per step, in order, and no status line rewriting.
	if strings.Contains(errOut, "\r") {
		t.Fatalf("helmr deploy rewrote a status line while not on a terminal: %q", errOut)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	want := []string{
		"building " + pkg,
		"built " + pkg + " (sha256:",
		"bundling data, greeting.txt",
		"uploading ",
		"uploaded ",
		"template shelf: image shelf: step 1/3 copy /srv/data/ data: built",
		"template shelf: image shelf: step 2/3 workdir /etc: done",
		"template shelf: image shelf: step 3/3 copy greeting.txt greeting.txt: built",
		"template shelf: image shelf: ready (sha256:",
	}
	next := 0
	for _, l := range lines {
		if next < len(want) && strings.HasPrefix(l, want[next]) {
			next++
			continue
		}
		for _, w := range want {
			if strings.HasPrefix(l, w) {
				t.Fatalf("line %q out of order or twice in:\n%s", l, errOut)
			}
		}
	}
	if next != len(want) {
		t.Fatalf("helmr deploy's stderr lacks %q (in order); got:\n%s", want[next], errOut)
	}
	// The first Session finds the image cached.
	if got, _ := readInComputer(t, s, "/etc/greeting.txt"); got != "hello from the package\n" {
		t.Fatalf("/etc/greeting.txt = %q", got)
	}
	if n := strings.Count(s.output(), "image step built"); n != builds {
		t.Fatalf("the launch built %d image steps again; server log:\n%s", n-builds, s.output())
	}
	// Deploying it again says every step is cached.
	_, errOut, code = s.cli(t, "deploy", pkg, "--json")
	if code != 0 || !strings.Contains(errOut, "step 3/3 copy greeting.txt greeting.txt: cached") || !strings.Contains(errOut, "ready, cached") {
		t.Fatalf("second deploy: %d\n%s", code, errOut)
	}

	// (c) A build step that fails refuses the Deployment.
	main := filepath.Join(pkg, "main.go")
	src, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(src), `Copy("greeting.txt", "greeting.txt"),`,
		`Copy("greeting.txt", "greeting.txt").Run("/helmr-no-such-tool"),`, 1)
	if broken == string(src) {
		t.Fatal("could not add a Run step to the test agent")
	}
	if err := os.WriteFile(main, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = s.cli(t, "deploy", pkg)
	if code == 0 {
		t.Fatalf("a Deployment whose image fails to build was accepted: %s %s", out, errOut)
	}
	for _, w := range []string{"image_build_failed", "template shelf", `image "shelf"`, "step 4 of 4", "/helmr-no-such-tool"} {
		if !strings.Contains(errOut, w) {
			t.Fatalf("the refusal does not say %q:\n%s", w, errOut)
		}
	}
	c := helmrclient.New(s.url, s.key)
	cur, err := c.Deployments.Get(context.Background(), helmrclient.CurrentDeployment)
	if err != nil || cur.ID != d1.ID {
		t.Fatalf("current deployment after a refused one: %+v %v; want %s", cur, err, d1.ID)
	}
	page, err := c.Deployments.List(context.Background(), helmrclient.ListOptions{})
	if err != nil || len(page.Deployments) != 1 {
		t.Fatalf("deployments after a refused one: %+v %v", page, err)
	}
}
