package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/deploy"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
)

// copyPackage copies the agent package testdata/copyagent into a new
// directory of testdata (inside the module, so that it builds against it),
// for a test that changes it.
func copyPackage(t *testing.T) string {
	t.Helper()
	dst, err := os.MkdirTemp("testdata", "copyagent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dst) })
	err = filepath.WalkDir("testdata/copyagent", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("testdata/copyagent", p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// readInComputer starts a reader Session that reads path inside its
// Computer and returns what the Turn returned.
func readInComputer(t *testing.T, s *server, path string) (string, helmrtype.SessionCreateReceipt) {
	t.Helper()
	out, errOut, code := s.cli(t, "session", "create", "--agent", "reader", "--text", path, "--json")
	if code != 0 {
		t.Fatalf("create: %d %s %s", code, out, errOut)
	}
	var rec helmrtype.SessionCreateReceipt
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatal(err)
	}
	return turnResultCLI(t, s, rec.Session.ID, rec.Turn.ID), rec
}

// turnResultCLI waits with helmr session turn wait for a Turn that must
// complete with a string result, and returns the result.
func turnResultCLI(t *testing.T, s *server, sessionID, turnID string) string {
	t.Helper()
	out, errOut, code := s.cli(t, "session", "turn", "wait", sessionID, turnID, "--timeout", "90s", "--json")
	var res helmrtype.TimedTurnWaitResult
	json.Unmarshal([]byte(out), &res)
	if code != 0 || res.Outcome == nil || res.Outcome.Status != "completed" {
		t.Fatalf("turn %s: exit %d %s %s\nserver: %s", turnID, code, out, errOut, s.output())
	}
	var got string
	if err := json.Unmarshal(res.Outcome.Result, &got); err != nil {
		t.Fatalf("result %s: %v", res.Outcome.Result, err)
	}
	return got
}

// deployCLI runs helmr deploy DIR --json and returns the Deployment.
func deployCLI(t *testing.T, s *server, dir string) helmrtype.Deployment {
	t.Helper()
	out, errOut, code := s.cli(t, "deploy", dir, "--json")
	if code != 0 {
		t.Fatalf("deploy %s: %d %s %s", dir, code, out, errOut)
	}
	var d helmrtype.Deployment
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("deploy output %q: %v", out, err)
	}
	return d
}

// imageRoots lists the image store's built roots.
func imageRoots(t *testing.T, dataDir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dataDir, "images", "roots"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// A Template's Copy steps take files from the agent package: helmr deploy
// uploads them with the binary, the server keeps and unpacks them, and the
// image builder copies them into the Computer's image, where the agent reads
// them during a Turn. An unchanged package deploys to the same Deployment
// and builds nothing again; a changed data file makes a new Deployment whose
// Sessions see the new content. Uploads without the sources, or with a
// malicious archive, are refused with sources_invalid and change nothing.
func TestCopyStepsFromTheAgentPackage(t *testing.T) {
	needSandbox(t) // the Computer sees its image as its root only in the sandbox
	if testing.Short() {
		t.Skip("runs helmr server and builds an agent")
	}
	pkg := copyPackage(t)
	data := t.TempDir()
	s := startServer(t, data, "server", "--log-level", "info")

	d1 := deployCLI(t, s, pkg)
	if d1.SourcesDigest == "" {
		t.Fatalf("the deployment has no sources: %+v", d1)
	}
	if _, err := os.Stat(deploy.SourcesArchive(filepath.Join(data, "deployments"), d1.SourcesDigest)); err != nil {
		t.Fatalf("the sources archive is not kept: %v", err)
	}
	got, rec1 := readInComputer(t, s, "/srv/data/notes.txt")
	if got != "first notes\n" {
		t.Fatalf("/srv/data/notes.txt in the Computer = %q", got)
	}
	if got, _ := readInComputer(t, s, "/srv/data/sub/deep.txt"); got != "deeper\n" {
		t.Fatalf("/srv/data/sub/deep.txt in the Computer = %q", got)
	}
	if got, _ := readInComputer(t, s, "/etc/greeting.txt"); got != "hello from the package\n" {
		t.Fatalf("/etc/greeting.txt in the Computer = %q", got)
	}
	if got, _ := readInComputer(t, s, "/srv/data/main.go"); !strings.HasPrefix(got, "error: ") {
		t.Fatalf("a file the Template does not copy is in the Computer: %q", got)
	}
	roots := imageRoots(t, data)
	builds := strings.Count(s.output(), "image step built")
	if builds != 2 {
		t.Fatalf("%d image steps built for two Copy steps; server log:\n%s", builds, s.output())
	}

	// The unchanged package: the same Deployment, and nothing is built again.
	d2 := deployCLI(t, s, pkg)
	if d2.ID != d1.ID || d2.SourcesDigest != d1.SourcesDigest {
		t.Fatalf("an unchanged package deployed as %s (sources %s), first %s (sources %s)", d2.ID, d2.SourcesDigest, d1.ID, d1.SourcesDigest)
	}
	got, rec2 := readInComputer(t, s, "/srv/data/notes.txt")
	if got != "first notes\n" || rec2.Session.ID == rec1.Session.ID {
		t.Fatalf("second deploy: %q in session %s (first %s)", got, rec2.Session.ID, rec1.Session.ID)
	}
	if after := imageRoots(t, data); len(after) != len(roots) {
		t.Fatalf("image roots after an unchanged deploy: %v, before %v", after, roots)
	}
	if n := strings.Count(s.output(), "image step built"); n != builds {
		t.Fatalf("an unchanged Template was built again (%d builds, before %d)", n, builds)
	}

	// A changed data file: a new Deployment (the same binary, other
	// sources); its Sessions see the new content, the old Deployment's
	// Computers keep theirs.
	if err := os.WriteFile(filepath.Join(pkg, "data", "notes.txt"), []byte("second notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d3 := deployCLI(t, s, pkg)
	if d3.ID == d1.ID || d3.Digest != d1.Digest || d3.SourcesDigest == d1.SourcesDigest {
		t.Fatalf("changed sources deployed as %+v, first %+v", d3, d1)
	}
	if got, _ := readInComputer(t, s, "/srv/data/notes.txt"); got != "second notes\n" {
		t.Fatalf("after the change, notes.txt = %q", got)
	}
	if n := strings.Count(s.output(), "image step built"); n != builds+2 {
		t.Fatalf("%d image steps built after changing the first Copy step's source, want %d", n, builds+2)
	}
	out, _, code := s.cli(t, "session", "enqueue", rec1.Session.ID, "--text", "/srv/data/notes.txt", "--json")
	var ts helmrtype.TurnState
	json.Unmarshal([]byte(out), &ts)
	if code != 0 {
		t.Fatalf("enqueue on the first session: %d %s", code, out)
	}
	if got := turnResultCLI(t, s, rec1.Session.ID, ts.ID); got != "first notes\n" {
		t.Fatalf("the first Deployment's Session read %q", got)
	}

	// Refused uploads change nothing: the current Deployment stays, and a
	// malicious archive leaves nothing on disk. (A well-formed archive
	// refused for what it lacks stays kept under its digest, as a binary
	// does.)
	deps := filepath.Join(data, "deployments")
	before := dirNames(t, deps)
	tmp := t.TempDir()
	b, err := deploy.BuildDir(context.Background(), pkg, tmp)
	if err != nil {
		t.Fatal(err)
	}
	c := helmrclient.New(s.url, s.key)
	ctx := context.Background()
	upload := func(sources []byte) error {
		f, err := os.Open(b.Binary)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		u := helmrclient.DeploymentUpload{Manifest: b.Manifest, Binary: f}
		if sources != nil {
			u.Sources = bytes.NewReader(sources)
		}
		_, err = c.Deployments.Upload(ctx, u)
		return err
	}
	if err := upload(nil); !errors.Is(err, helmrtype.CodeSourcesInvalid) {
		t.Fatalf("an upload without the sources its Copy steps need: %v, want sources_invalid", err)
	}
	var evil bytes.Buffer
	tw := tar.NewWriter(&evil)
	tw.WriteHeader(&tar.Header{Name: "data", Typeflag: tar.TypeSymlink, Linkname: "/etc", Mode: 0o777})
	tw.Close()
	if err := upload(evil.Bytes()); !errors.Is(err, helmrtype.CodeSourcesInvalid) {
		t.Fatalf("an upload with a symlink in its sources: %v, want sources_invalid", err)
	}
	if after := dirNames(t, deps); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a refused archive changed the deployments directory: %v, before %v", after, before)
	}
	var partial bytes.Buffer
	if err := deploy.PackSources(pkg, []string{"data"}, &partial); err != nil {
		t.Fatal(err)
	}
	if err := upload(partial.Bytes()); !errors.Is(err, helmrtype.CodeSourcesInvalid) || !strings.Contains(err.Error(), "greeting.txt") {
		t.Fatalf("an upload whose sources lack greeting.txt: %v, want sources_invalid", err)
	}
	cur, err := c.Deployments.Get(ctx, helmrclient.CurrentDeployment)
	if err != nil || cur.ID != d3.ID {
		t.Fatalf("current deployment after refused uploads: %+v, %v; want %s", cur, err, d3.ID)
	}
	t.Logf("checked: Copy steps from helmr deploy built once (%d roots), reused on an unchanged deploy, rebuilt on a changed source; bad uploads refused", len(roots))
}

// On several nodes sharing PostgreSQL, a node that did not receive the
// upload fetches the sources archive from the database, unpacks it and
// builds the image with it.
func TestCopySourcesReachAnotherNode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two helmr servers")
	}
	db := pgtest.URL(t)
	c := startNodes(t, db, 2)
	d := deployCLI(t, c.srv[0], "testdata/copyagent")
	if d.SourcesDigest == "" {
		t.Fatalf("no sources: %+v", d)
	}
	// Only node 1 is left: it must fetch what node 0 received.
	c.srv[0].kill()
	local := deploy.SourcesDir(filepath.Join(c.dirs[1], "deployments"), d.SourcesDigest)
	if _, err := os.Stat(local); err == nil {
		t.Fatal("node 1 has the sources before it needed them")
	}
	if got, _ := readInComputer(t, c.srv[1], "/srv/data/notes.txt"); got != "first notes\n" {
		t.Fatalf("notes.txt on node 1 = %q", got)
	}
	if _, err := os.Stat(filepath.Join(local, "greeting.txt")); err != nil {
		t.Fatalf("node 1 did not unpack the sources it fetched: %v", err)
	}
}

// helmr dev packs the Copy sources the way helmr deploy does, and
// redeploys when one of them changes.
func TestHelmrDevCopiesSources(t *testing.T) {
	needSandbox(t) // the Computer sees its image as its root only in the sandbox
	if testing.Short() {
		t.Skip("runs helmr dev")
	}
	pkg := copyPackage(t)
	s := startServer(t, t.TempDir(), "dev", pkg)
	if got, _ := readInComputer(t, s, "/etc/greeting.txt"); got != "hello from the package\n" {
		t.Fatalf("/etc/greeting.txt under helmr dev = %q", got)
	}
	if err := os.WriteFile(filepath.Join(pkg, "greeting.txt"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitForWithin(t, "a redeploy after a Copy source changed", 2*time.Minute, func() bool {
		return strings.Count(s.output(), "deployed ") >= 2
	})
	if got, _ := readInComputer(t, s, "/etc/greeting.txt"); got != "changed\n" {
		t.Fatalf("/etc/greeting.txt after the change = %q", got)
	}
}

// dirNames lists the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names
}
