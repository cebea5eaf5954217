package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

// needNode skips a test when node is not on PATH.
func needNode(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH: the Node agent tests need Node 20 or newer")
	}
}

// copyDir copies the regular files of src (not recursively) into dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(src, "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("files of %s: %v", src, err)
	}
	for _, f := range files {
		if fi, err := os.Stat(f); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil || os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644) != nil {
			t.Fatal("copy", f, err)
		}
	}
}

// rawNodePackage is a copy of testdata/node-raw that depends on the
// stand-in SDK (testdata/node-raw/standin-sdk, whose bundler copies
// agent.mjs), without node_modules: helmr dev and helmr deploy install it.
func rawNodePackage(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not on PATH")
	}
	dir := t.TempDir()
	copyDir(t, "testdata/node-raw", dir)
	standin, err := filepath.Abs("testdata/node-raw/standin-sdk")
	if err != nil {
		t.Fatal(err)
	}
	pkg := `{"name": "helmr-e2e-node-raw-copy", "private": true, "type": "module", "dependencies": {"@helmr/sdk": "file:` + standin + `"}}`
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(pkg), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// createText creates a Session of agent with text input and waits for its
// first Turn, through the CLI.
func createText(t *testing.T, s *server, agent, text string) (helmrtype.Session, helmrtype.TurnOutcome) {
	t.Helper()
	out, errOut, code := s.cli(t, "session", "create", "--agent", agent, "--text", text, "--wait", "--json")
	if code != 0 {
		t.Fatalf("create %s: exit %d: %s %s", agent, code, out, errOut)
	}
	var rec struct {
		Session helmrtype.Session     `json:"session"`
		Outcome helmrtype.TurnOutcome `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatalf("create --json: %v: %s", err, out)
	}
	return rec.Session, rec.Outcome
}

// TestNodeBundleDevDeployAndLaunch runs a Node agent program (written
// against the protocol, bundled by a stand-in of the SDK's bundler) through
// helmr dev: deployed with runtime "node", launched as node in the sandbox
// (and as a host process with --unsafe-no-sandbox), redeployed on change,
// and uploaded by helmr deploy, whose manifest the server reads with node.
func TestNodeBundleDevDeployAndLaunch(t *testing.T) {
	if testing.Short() {
		t.Skip("runs helmr dev on a Node package")
	}
	needNode(t)
	for _, mode := range []string{"sandbox", "unsafe"} {
		t.Run(mode, func(t *testing.T) {
			dir := rawNodePackage(t)
			args := []string{"dev", dir}
			if mode == "unsafe" {
				args = append(args, "--unsafe-no-sandbox")
			}
			s := startServer(t, t.TempDir(), args...)
			if !strings.Contains(s.output(), "running npm install") {
				t.Fatalf("helmr dev did not say it installs the dependencies: %s", s.output())
			}
			sess, outcome := createText(t, s, "raw-echo", "hi")
			var result map[string]string
			json.Unmarshal(outcome.Result, &result)
			if outcome.Status != helmrtype.TurnCompleted || result["echo"] != "hi" || result["runtime"] != "node" {
				t.Fatalf("outcome %+v (%s)", outcome, s.output())
			}
			events, _, _ := s.cli(t, "session", "events", sess.ID, "--jsonl")
			if !strings.Contains(events, "node says: hi") {
				t.Fatalf("events: %s", events)
			}
			var dep helmrtype.Deployment
			if err := apiCall(s.url, s.key, "GET", "/v1/deployments/"+sess.DeploymentID, nil, &dep); err != nil ||
				dep.Manifest.Runtime != helmrtype.RuntimeNode || dep.Manifest.SDK != "raw-node" {
				t.Fatalf("deployment: %v %+v", err, dep.Manifest)
			}
			if mode == "unsafe" {
				return
			}
			// helmr deploy of the same package is the same Deployment: the
			// server ran node on the upload to read its manifest.
			out, errOut, code := s.cli(t, "deploy", dir, "--json")
			var up helmrtype.Deployment
			if code != 0 || json.Unmarshal([]byte(out), &up) != nil || up.ID != sess.DeploymentID || up.Manifest.Runtime != helmrtype.RuntimeNode {
				t.Fatalf("helmr deploy: exit %d: %s %s", code, out, errOut)
			}
			// npm install wrote package-lock.json before the fingerprint:
			// nothing changed since, so nothing was redeployed.
			time.Sleep(1500 * time.Millisecond)
			if n := strings.Count(s.output(), "deployed "); n != 1 {
				t.Fatalf("%d deployments before any change: %s", n, s.output())
			}
			// A change redeploys; the new Session runs the new bundle.
			src, _ := os.ReadFile(filepath.Join(dir, "agent.mjs"))
			changed := strings.Replace(string(src), `"node says: "`, `"node v2 says: "`, 1)
			if err := os.WriteFile(filepath.Join(dir, "agent.mjs"), []byte(changed), 0o644); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(time.Minute)
			for strings.Count(s.output(), "deployed ") < 2 {
				if time.Now().After(deadline) {
					t.Fatalf("no redeploy: %s", s.output())
				}
				time.Sleep(50 * time.Millisecond)
			}
			sess2, outcome2 := createText(t, s, "raw-echo", "again")
			events, _, _ = s.cli(t, "session", "events", sess2.ID, "--jsonl")
			if sess2.DeploymentID == sess.DeploymentID || outcome2.Status != helmrtype.TurnCompleted || !strings.Contains(events, "node v2 says: again") {
				t.Fatalf("after the change: %+v %s", outcome2, events)
			}
			// node_modules is not part of the fingerprint.
			os.WriteFile(filepath.Join(dir, "node_modules", "touched.js"), []byte("//"), 0o644)
			time.Sleep(2500 * time.Millisecond)
			if n := strings.Count(s.output(), "deployed "); n != 2 {
				t.Fatalf("a change in node_modules redeployed (%d deployments): %s", n, s.output())
			}
		})
	}
}

// TestNodePackageWithoutSDK: helmr deploy installs the dependencies of a
// package without node_modules (saying so) and names the missing SDK.
func TestNodePackageWithoutSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("runs npm")
	}
	needNode(t)
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not on PATH")
	}
	dir := t.TempDir()
	copyDir(t, "testdata/node-raw", dir)
	s := startServer(t, t.TempDir(), "server")
	out, errOut, code := s.cli(t, "deploy", dir)
	if code == 0 || !strings.Contains(errOut, "running npm install") || !strings.Contains(errOut, "depend on @helmr/sdk") {
		t.Fatalf("deploy without the SDK: exit %d: %s %s", code, out, errOut)
	}
}

// TestUploadOfABundleNamesItsRuntime: POST /v1/deployments runs the
// artifact as its manifest part's runtime says; a bundle sent without one
// is run as a native binary and refused with a hint.
func TestUploadOfABundleNamesItsRuntime(t *testing.T) {
	if testing.Short() {
		t.Skip("runs helmr server")
	}
	needNode(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not on PATH")
	}
	bundle := filepath.Join(t.TempDir(), "agent.mjs")
	// As the SDK's bundler writes it: executable, with a node shebang.
	src, err := os.ReadFile("testdata/node-raw/agent.mjs")
	if err != nil || os.WriteFile(bundle, append([]byte("#!/usr/bin/env node\n"), src...), 0o755) != nil {
		t.Fatal("write the bundle", err)
	}
	s := startServer(t, t.TempDir(), "server")
	upload := func(manifest string) (int, string) {
		args := []string{"-sS", "-o", "-", "-w", "\n%{http_code}", "-H", "Authorization: Bearer " + s.key, "-F", "binary=@" + bundle}
		if manifest != "" {
			args = append(args, "-F", "manifest="+manifest+";type=application/json")
		}
		out, err := exec.Command("curl", append(args, s.url+"/v1/deployments")...).Output()
		if err != nil {
			t.Fatalf("curl: %v", err)
		}
		i := strings.LastIndex(string(out), "\n") // curl -w puts the status last
		n := 0
		fmt.Sscan(string(out[i+1:]), &n)
		return n, string(out[:max(i, 0)])
	}
	code, body := upload("")
	if code != 400 || !strings.Contains(body, "invalid_request") || !strings.Contains(body, `says runtime \"node\"`) {
		t.Fatalf("a bundle without its runtime: %d %s", code, body)
	}
	m, err := exec.Command("node", bundle, "--helmr-manifest").Output()
	if err != nil {
		t.Fatal(err)
	}
	code, body = upload(string(m))
	var d helmrtype.Deployment
	if code != 201 || json.Unmarshal([]byte(body), &d) != nil || d.Manifest.Runtime != helmrtype.RuntimeNode || len(d.Agents) != 1 || d.Agents[0] != "raw-echo" {
		t.Fatalf("a bundle with its manifest: %d %s", code, body)
	}
}
