package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

// helmrIn runs the helmr binary in dir with the environment minus
// HELMR_API_URL and HELMR_API_KEY (so that the saved profiles decide) plus
// env, and returns stdout, stderr and the exit code.
func helmrIn(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmrBinary(t), args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HELMR_API_URL=") && !strings.HasPrefix(kv, "HELMR_API_KEY=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// TestHelmrInitThenTestAndDev: helmr init writes an agent module outside
// the repository whose go.mod finds the SDK through a replace of this
// checkout; its go mod tidy may fetch from the module proxy what a test of
// the checkout does not need (the go.mod files of its dependencies' own
// test dependencies, on a fresh machine), and then go test ./... passes
// there with no module download (GOPROXY off); helmr dev runs it,
// saves the "dev" profile, and a Session created with the API completes
// its Turn, which the CLI, using only that profile, shows with its output.
// helmr login and helmr profile list|use manage the profiles and never
// print a key in full.
func TestHelmrInitThenTestAndDev(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a new agent module")
	}
	configDir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", configDir) // the helmr processes inherit it
	dir := filepath.Join(t.TempDir(), "my-agent")
	out, errOut, code := helmrIn(t, t.TempDir(), []string{"GOFLAGS=-mod=mod"}, "init", dir)
	if code != 0 {
		t.Fatalf("helmr init: %d %s %s", code, out, errOut)
	}
	repo, _ := filepath.Abs("../..")
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil || !strings.Contains(string(gomod), "module example.com/my-agent") ||
		!strings.Contains(string(gomod), "require github.com/helmr-go/helmr v") ||
		!strings.Contains(string(gomod), "replace github.com/helmr-go/helmr => "+repo) {
		t.Fatalf("go.mod (%v):\n%s", err, gomod)
	}
	for _, f := range []string{"main.go", "main_test.go", "README.md", "go.sum"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	if main, _ := os.ReadFile(filepath.Join(dir, "main.go")); !strings.Contains(string(main), "ac.InitResult") {
		t.Fatalf("main.go does not read the init state:\n%s", main)
	}
	if _, _, code := helmrIn(t, t.TempDir(), nil, "init", dir); code != 2 {
		t.Fatalf("helmr init into a non-empty directory: exit %d, want 2", code)
	}

	gotest := exec.Command("go", "test", "./...")
	gotest.Dir = dir
	gotest.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off")
	if b, err := gotest.CombinedOutput(); err != nil {
		t.Fatalf("go test ./... in the new module: %v\n%s", err, b)
	}

	data := filepath.Join(t.TempDir(), "data")
	s := startServerWith(t, data, []string{"GOFLAGS=-mod=mod", "GOPROXY=off"}, nil, "dev", dir)
	if !strings.Contains(s.output(), `Saved profile "dev"; it is current`) {
		t.Fatalf("helmr dev did not save the dev profile: %s", s.output())
	}
	var rec helmrtype.SessionCreateReceipt
	if err := apiCall(s.url, s.key, "POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "greeter", Input: json.RawMessage(`{"name":"Ada"}`)}, &rec); err != nil {
		t.Fatal(err)
	}
	// The CLI finds the control plane through the dev profile alone.
	out, errOut, code = helmrIn(t, dir, nil, "session", "turn", "wait", rec.Session.ID, rec.Turn.ID)
	if code != 0 || !strings.Contains(out, "Output:\nGreeting Ada\n") || !strings.Contains(out, "completed\nHello, Ada!") || !strings.Contains(out, `"turns": 1`) {
		t.Fatalf("turn wait through the dev profile: %d %s %s", code, out, errOut)
	}

	// Profiles.
	out, _, code = helmrIn(t, dir, nil, "profile", "list")
	if code != 0 || !strings.Contains(out, "dev") || !strings.Contains(out, s.url) || strings.Contains(out, s.key) || !strings.Contains(out, s.key[:12]+"…") {
		t.Fatalf("profile list: %d %s", code, out)
	}
	if out, errOut, code := helmrIn(t, dir, nil, "login", "--url", s.url, "--api-key", "hlmr_sk_wrongwrongwrongwrong", "--profile", "bad"); code == 0 {
		t.Fatalf("login with a wrong key: %d %s %s", code, out, errOut)
	}
	out, errOut, code = helmrIn(t, dir, nil, "login", "--url", s.url, "--api-key", s.key, "--profile", "second")
	if code != 0 || strings.Contains(out, s.key) {
		t.Fatalf("login: %d %s %s", code, out, errOut)
	}
	out, _, _ = helmrIn(t, dir, nil, "profile", "list", "--json")
	var list struct {
		Profiles []struct {
			Name    string `json:"name"`
			Current bool   `json:"current"`
		} `json:"profiles"`
	}
	if json.Unmarshal([]byte(out), &list) != nil || len(list.Profiles) != 2 || list.Profiles[0].Name != "dev" || list.Profiles[0].Current || !list.Profiles[1].Current || strings.Contains(out, s.key) {
		t.Fatalf("profile list --json after login: %s", out)
	}
	if _, _, code := helmrIn(t, dir, nil, "profile", "use", "nope"); code != 3 {
		t.Fatalf("profile use of an unknown profile: exit %d, want 3", code)
	}
	if out, _, code := helmrIn(t, dir, nil, "profile", "use", "dev"); code != 0 || !strings.Contains(out, "dev") {
		t.Fatalf("profile use dev: %d %s", code, out)
	}
	cfg := filepath.Join(configDir, "helmr", "config.json")
	if st, err := os.Stat(cfg); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the config file: %v %v", st.Mode(), err)
	}
	// A URL from the environment gets no key from a profile of another URL.
	if _, errOut, code := helmrIn(t, dir, []string{"HELMR_API_URL=http://127.0.0.1:1"}, "session", "get", rec.Session.ID); code != 2 || !strings.Contains(errOut, "no API key") {
		t.Fatalf("another URL with the profile's key: %d %s", code, errOut)
	}
	if out, _, code := helmrIn(t, dir, nil, "version", "--json"); code != 0 || !strings.Contains(out, `"go_version"`) {
		t.Fatalf("version --json: %d %s", code, out)
	}

	// Stop helmr dev as a person does.
	s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		t.Fatalf("helmr dev did not stop on SIGINT: %s", s.output())
	}
}
