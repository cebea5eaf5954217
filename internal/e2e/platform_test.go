package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

// cleanCopy copies the repository's tracked files (as they are in the
// working tree) into a new directory, as a fresh clone would hold them.
func cleanCopy(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("no git checkout to copy: %v", err)
	}
	dst := t.TempDir()
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue // deleted in the working tree
		}
		st, _ := os.Lstat(filepath.Join(root, f))
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// pathWithout returns a PATH of one directory holding symlinks to every
// program on this PATH except those named in drop.
func pathWithout(t *testing.T, drop ...string) string {
	t.Helper()
	bin := t.TempDir()
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			name := e.Name()
			skip := false
			for _, x := range drop {
				skip = skip || name == x
			}
			if skip {
				continue
			}
			if _, err := os.Lstat(filepath.Join(bin, name)); err == nil {
				continue // an earlier PATH entry wins
			}
			os.Symlink(filepath.Join(d, name), filepath.Join(bin, name))
		}
	}
	return bin
}

// TestHelmrDevWithoutBubblewrap runs the README's first command, helmr dev
// examples/quickstart, from a clean copy on a host without bubblewrap (a
// PATH without bwrap): it runs the agent processes unsandboxed, says so
// loudly with what is missing and how to install it, and the quickstart's
// Turn completes. helmr server on the same host keeps refusing.
func TestHelmrDevWithoutBubblewrap(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the quickstart")
	}
	helmr := helmrBinary(t)
	repo := cleanCopy(t)
	path := pathWithout(t, "bwrap")
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go on PATH")
	}
	env := append(os.Environ(), "PATH="+path)
	// helmr server refuses such a host without --unsafe-no-sandbox.
	srv := exec.Command(helmr, "server", "--addr", freeAddr(t), "--data-dir", t.TempDir())
	srv.Env = env
	if b, err := srv.CombinedOutput(); err == nil || !strings.Contains(string(b), "cannot run bubblewrap sandboxes") ||
		!strings.Contains(string(b), "--unsafe-no-sandbox") {
		t.Fatalf("helmr server without bwrap: %v: %s", err, b)
	}

	addr := freeAddr(t)
	cmd := exec.Command(helmr, "dev", "--addr", addr, "examples/quickstart")
	cmd.Dir, cmd.Env = repo, env
	var errOut bytes.Buffer
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	defer func() { cmd.Process.Signal(syscall.SIGTERM); <-done }()
	deployed := make(chan []string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if strings.HasPrefix(sc.Text(), "deployed ") {
				deployed <- lines
				break
			}
		}
		io.Copy(io.Discard, stdout)
		cmd.Wait()
	}()
	select {
	case <-deployed:
	case <-done:
		t.Fatalf("helmr dev exited: %s", errOut.String())
	case <-time.After(3 * time.Minute):
		t.Fatalf("helmr dev did not deploy: %s", errOut.String())
	}
	warn := errOut.String()
	for _, want := range []string{"WARNING: agent processes are NOT sandboxed", "bubblewrap (bwrap) is not installed", "apt-get install bubblewrap"} {
		if !strings.Contains(warn, want) {
			t.Fatalf("helmr dev's warning lacks %q:\n%s", want, warn)
		}
	}
	t.Logf("helmr dev warned:\n%s", warn)
	key, err := os.ReadFile(filepath.Join(repo, ".helmr", "api-key"))
	if err != nil {
		t.Fatal(err)
	}
	s := &server{url: "http://" + addr, key: strings.TrimSpace(string(key))}
	out, cerr, code := s.cli(t, "session", "create", "--agent", "reviewer", "--input-json", `{"issue": 42}`, "--wait", "--json")
	if code != 0 {
		t.Fatalf("create: exit %d: %s %s", code, out, cerr)
	}
	var rec struct {
		Outcome helmrtype.TurnOutcome `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatalf("create --json: %v: %s", err, out)
	}
	var result struct{ Reviewed bool }
	json.Unmarshal(rec.Outcome.Result, &result)
	if rec.Outcome.Status != "completed" || !result.Reviewed {
		t.Fatalf("outcome %+v", rec.Outcome)
	}
}
