package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	var errOut syncBuffer // written by cmd while the test reads it
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

// ordinaryUser runs helmr as uid and gid 65534 (nobody) through setpriv
// when the tests run as root, and as the test's own user otherwise: it
// returns the argv prefix and a directory that user can read and write,
// holding a copy of the helmr binary.
func ordinaryUser(t *testing.T) (prefix []string, dir string) {
	t.Helper()
	d, err := os.MkdirTemp("", "helmr-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	os.Chmod(d, 0o755)
	b, err := os.ReadFile(helmrBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "helmr"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() != 0 {
		return nil, d
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("the tests run as root and there is no setpriv to become an ordinary user")
	}
	if err := os.Chown(d, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return []string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"}, d
}

// userServer is helmr server started as an ordinary user (argv prefix,
// possibly through a shell that first moves itself into a cgroup).
func userServer(t *testing.T, argv []string, dir string, extra ...string) (*server, func() string) {
	t.Helper()
	addr := freeAddr(t)
	data := filepath.Join(dir, "data")
	args := append(argv, filepath.Join(dir, "helmr"), "server", "--addr", addr, "--data-dir", data,
		"--api-key-file", filepath.Join(dir, "key"), "--unsafe-no-sandbox", "--stop-sessions")
	cmd := exec.Command(args[0], append(args[1:], extra...)...)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); <-done })
	deadline := time.After(time.Minute)
	for !strings.Contains(out.String(), "listening on") {
		select {
		case <-done:
			t.Fatalf("helmr server as an ordinary user exited: %s", out.String())
		case <-deadline:
			t.Fatalf("helmr server as an ordinary user did not start: %s", out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	key, err := os.ReadFile(filepath.Join(dir, "key"))
	if err != nil {
		t.Fatal(err)
	}
	stop := func() string {
		cmd.Process.Signal(syscall.SIGTERM)
		<-done
		return out.String()
	}
	return &server{url: "http://" + addr, key: strings.TrimSpace(string(key))}, stop
}

// syncBuffer is a bytes.Buffer safe for one writer and readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}
func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// runReviewer runs the quickstart's reviewer once on s and returns its
// Computer as the API shows it.
func runReviewer(t *testing.T, s *server) helmrtype.ComputerState {
	t.Helper()
	out, cerr, code := s.cli(t, "session", "create", "--agent", "reviewer", "--input-json", `{"issue": 7}`, "--wait", "--json")
	if code != 0 {
		t.Fatalf("create: exit %d: %s %s", code, out, cerr)
	}
	var rec struct {
		Session helmrtype.Session     `json:"session"`
		Outcome helmrtype.TurnOutcome `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec.Outcome.Status != "completed" {
		t.Fatalf("create: %v: %s", err, out)
	}
	var sess helmrtype.Session
	if err := apiCall(s.url, s.key, "GET", "/v1/sessions/"+rec.Session.ID, nil, &sess); err != nil || sess.ComputerID == nil {
		t.Fatalf("session: %v: %+v", err, sess)
	}
	var c helmrtype.ComputerState
	if err := apiCall(s.url, s.key, "GET", "/v1/computers/"+*sess.ComputerID, nil, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestLimitsAsOrdinaryUser runs helmr server as an ordinary user. Without
// a delegated cgroup the host cannot enforce the quickstart Template's cpu
// and memory limits: its Deployment is refused, naming --allow-unlimited;
// with --allow-unlimited it runs and its Computer says limits_off.
func TestLimitsAsOrdinaryUser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the quickstart")
	}
	argv, dir := ordinaryUser(t)
	s, stop := userServer(t, argv, dir)
	deploy := func() (string, int) {
		out, errOut, code := s.cli(t, "deploy", "../../examples/quickstart")
		return out + errOut, code
	}
	out, code := deploy()
	startup := stop()
	if !strings.Contains(startup, "resource limits are off") {
		t.Skipf("this user's helmr server enforces limits here (a delegated cgroup): %s", startup)
	}
	if code == 0 || !strings.Contains(out, "--allow-unlimited") || !strings.Contains(out, "cpu, memory") {
		t.Fatalf("deploy of a Template with limits on a host without them: exit %d: %s", code, out)
	}
	s, stop = userServer(t, argv, dir, "--allow-unlimited")
	if out, code := deploy(); code != 0 {
		t.Fatalf("deploy with --allow-unlimited: exit %d: %s", code, out)
	}
	if c := runReviewer(t, s); c.LimitsOff == "" {
		t.Fatalf("the Computer does not say its limits are off: %+v", c)
	}
	stop()
}

// TestLimitsInADelegatedCgroup runs helmr server as an ordinary user in a
// cgroup v2 group delegated to it (as systemd's Delegate=yes gives one):
// the quickstart's limits are enforced there, without --allow-unlimited.
func TestLimitsInADelegatedCgroup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the quickstart")
	}
	if os.Getuid() != 0 {
		t.Skip("delegating a cgroup to an ordinary user needs root")
	}
	ctrl, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
	if err != nil || !strings.Contains(string(ctrl), "memory") || !strings.Contains(string(ctrl), "cpu") || !strings.Contains(string(ctrl), "pids") {
		t.Skipf("no cgroup v2 hierarchy with the memory, cpu and pids controllers at /sys/fs/cgroup (%q, %v): nothing to delegate", ctrl, err)
	}
	argv, dir := ordinaryUser(t)
	group := filepath.Join("/sys/fs/cgroup", "helmr-e2e-delegated-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(group, 0o755); err != nil {
		t.Skipf("cannot make a cgroup to delegate: %v", err)
	}
	t.Cleanup(func() { removeCgroup(group) })
	if err := os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte("+memory +cpu +pids"), 0); err != nil {
		t.Skipf("cannot enable the controllers for the delegated group: %v", err)
	}
	for _, f := range []string{"", "cgroup.procs", "cgroup.subtree_control", "cgroup.threads"} {
		if err := os.Chown(filepath.Join(group, f), 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	// As systemd starts a delegated unit: root puts the process in the
	// group, then it becomes the user.
	shell := []string{"/bin/sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, group}
	s, stop := userServer(t, append(shell, argv...), dir)
	if out, errOut, code := s.cli(t, "deploy", "../../examples/quickstart"); code != 0 {
		t.Fatalf("deploy in a delegated cgroup: exit %d: %s %s", code, out, errOut)
	}
	c := runReviewer(t, s)
	if out := stop(); c.LimitsOff != "" || strings.Contains(out, "resource limits are off") {
		t.Fatalf("limits off in a delegated cgroup: %+v\n%s", c, out)
	}
}

// removeCgroup removes a cgroup v2 group and its descendants (deepest
// first; they must hold no process).
func removeCgroup(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeCgroup(filepath.Join(dir, e.Name()))
		}
	}
	syscall.Rmdir(dir)
}
