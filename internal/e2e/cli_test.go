package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	_ "github.com/helmr-go/helmr/internal/store/sqlitestore" // the sqlite driver
)

var (
	helmrOnce sync.Once
	helmrBin  string
	helmrErr  error
)

// helmrBinary builds cmd/helmr once per test binary.
func helmrBinary(t *testing.T) string {
	t.Helper()
	agentBinary(t) // creates binDir
	helmrOnce.Do(func() {
		helmrBin = filepath.Join(binDir, "helmr")
		out, err := exec.Command("go", "build", "-o", helmrBin, "../../cmd/helmr").CombinedOutput()
		if err != nil {
			helmrErr = &buildError{string(out)}
		}
	})
	if helmrErr != nil {
		t.Fatal(helmrErr)
	}
	return helmrBin
}

// serverFlags adds to helmr server's args what this host needs (it runs
// agents unsandboxed where bubblewrap cannot run, and without limits
// where cgroups cannot enforce them); the tests whose point is the
// sandbox or the limits skip there (needSandbox, needLimits).
func serverFlags(args []string) []string {
	if unsandboxed() && !slices.Contains(args, "--unsafe-no-sandbox") {
		args = append(args, "--unsafe-no-sandbox")
	}
	if unlimited() && !slices.Contains(args, "--allow-unlimited") {
		args = append(args, "--allow-unlimited")
	}
	return args
}

type buildError struct{ out string }

func (e *buildError) Error() string { return "go build cmd/helmr: " + e.out }

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// server is a helmr server or helmr dev process.
type server struct {
	cmd  *exec.Cmd
	url  string
	key  string
	out  *strings.Builder
	mu   sync.Mutex
	done chan struct{}
}

// startServer runs `helmr <args>` and waits until it listens.
func startServer(t *testing.T, dataDir string, args ...string) *server {
	t.Helper()
	return startServerWith(t, dataDir, nil, nil, args...)
}

// startServerWith is startServer with extra environment variables and
// inherited files (descriptors 3, 4, …).
func startServerWith(t *testing.T, dataDir string, env []string, files []*os.File, args ...string) *server {
	t.Helper()
	addr := freeAddr(t)
	keyFile := filepath.Join(dataDir, "api-key") // helmr dev keeps it there
	if args[0] == "server" {
		keyFile = dataDir + ".key"
		args = append(args, "--api-key-file", keyFile)
		args = serverFlags(args)
	}
	cmd := exec.Command(helmrBinary(t), append(args, "--addr", addr, "--data-dir", dataDir)...)
	cmd.Env, cmd.ExtraFiles = append(os.Environ(), env...), files
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = cmd.Stdout
	s := &server{cmd: cmd, url: "http://" + addr, out: &strings.Builder{}, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			s.mu.Lock()
			s.out.WriteString(sc.Text() + "\n")
			text := s.out.String()
			s.mu.Unlock()
			if strings.Contains(text, "listening on") || strings.Contains(text, "deployed ") {
				once.Do(func() { close(ready) })
			}
		}
		cmd.Wait()
	}()
	select {
	case <-ready:
	case <-s.done:
		t.Fatalf("helmr %v exited: %s", args, s.output())
	case <-time.After(2 * time.Minute):
		t.Fatalf("helmr %v did not start: %s", args, s.output())
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	s.key = strings.TrimSpace(string(key))
	t.Cleanup(func() {
		s.kill()
		// Session processes outlive a killed control plane: end them.
		for _, pid := range agentPIDs(filepath.Join(dataDir, "deployments")) {
			if n, err := strconv.Atoi(pid); err == nil {
				syscall.Kill(-n, syscall.SIGKILL)
				syscall.Kill(n, syscall.SIGKILL)
			}
		}
	})
	return s
}

func (s *server) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

func (s *server) kill() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// cli runs the helmr CLI against s and returns stdout, stderr and the exit code.
func (s *server) cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmrBinary(t), args...)
	cmd.Env = append(os.Environ(), "HELMR_API_URL="+s.url, "HELMR_API_KEY="+s.key)
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

func TestHelmrDevQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the quickstart")
	}
	data := t.TempDir()
	s := startServer(t, data, "dev", "../../examples/quickstart")
	for !strings.Contains(s.output(), "deployed ") {
		select {
		case <-s.done:
			t.Fatalf("helmr dev exited: %s", s.output())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if !strings.Contains(s.output(), "API key: hlmr_sk_") {
		t.Fatalf("dev output lacks the API key: %s", s.output())
	}
	devConsoleLogin(t, s.output())
	out, errOut, code := s.cli(t, "session", "create", "--agent", "reviewer", "--input-json", `{"issue": 42}`, "--wait", "--json")
	if code != 0 {
		t.Fatalf("create: exit %d: %s %s", code, out, errOut)
	}
	var rec struct {
		Session helmrtype.Session     `json:"session"`
		Outcome helmrtype.TurnOutcome `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatalf("create --json: %v: %s", err, out)
	}
	var result map[string]any
	json.Unmarshal(rec.Outcome.Result, &result)
	if rec.Outcome.Status != "completed" || len(result) != 1 || result["reviewed"] != true {
		t.Fatalf("outcome %+v", rec.Outcome)
	}
	out, _, code = s.cli(t, "session", "events", rec.Session.ID, "--jsonl")
	if code != 0 || strings.Count(out, "\n") != 4 || !strings.Contains(out, "Review of issue 42 started") {
		t.Fatalf("events: %d %s", code, out)
	}
	// At dev's default level each Turn transition has one line, with its
	// IDs, and the other info lines (requests) stay off.
	if rec.Session.InitialTurn == nil {
		t.Fatalf("no initial turn: %+v", rec.Session)
	}
	for _, msg := range []string{"turn queued", "turn running", "turn completed"} {
		want := `msg="` + msg + `" session_id=` + rec.Session.ID + " turn_id=" + rec.Session.InitialTurn.ID
		if strings.Count(s.output(), want) != 1 {
			t.Errorf("dev output has not one %q line: %s", want, s.output())
		}
	}
	if strings.Contains(s.output(), `msg=request`) {
		t.Errorf("dev logs requests at its default level: %s", s.output())
	}
	if _, _, code := s.cli(t, "session", "get", "00000000-0000-7000-8000-000000000000"); code != 3 {
		t.Fatalf("get missing: exit %d, want 3", code)
	}
	if _, _, code := s.cli(t, "session", "create", "--agent", "echo"); code != 0 {
		t.Fatalf("create without input: exit %d", code)
	}
	// helmr dev refuses a non-loopback address.
	cmd := exec.Command(helmrBinary(t), "dev", "--addr", "0.0.0.0:0", "--data-dir", t.TempDir(), "../../examples/quickstart")
	if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "loopback") {
		t.Fatalf("dev on 0.0.0.0: %v %s", err, b)
	}
}

func TestServerKilledWhileTurnsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs helmr server")
	}
	data := t.TempDir()
	s := startServer(t, data, "server", "--log-level", "warn")
	if out, errOut, code := s.cli(t, "deploy", "testdata/agents"); code != 0 {
		t.Fatalf("deploy: %d %s %s", code, out, errOut)
	}
	out, errOut, code := s.cli(t, "session", "create", "--agent", "echo", "--text", "sleep 4s", "--json")
	if code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	var rec helmrtype.SessionCreateReceipt
	json.Unmarshal([]byte(out), &rec)
	sid := rec.Session.ID
	var queued []string
	for _, in := range []string{"one", "two"} {
		out, _, code := s.cli(t, "session", "enqueue", sid, "--text", in, "--json")
		if code != 0 {
			t.Fatalf("enqueue: %d", code)
		}
		var ts helmrtype.TurnState
		json.Unmarshal([]byte(out), &ts)
		queued = append(queued, ts.ID)
	}
	// Wait until the first Turn runs, then kill the control plane.
	for {
		out, _, _ := s.cli(t, "session", "turn", "get", sid, rec.Turn.ID, "--json")
		var ts helmrtype.TurnState
		json.Unmarshal([]byte(out), &ts)
		if ts.Status == "running" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	deployments := filepath.Join(data, "deployments")
	before := agentPIDs(deployments)
	if len(before) != 1 {
		t.Fatalf("session processes before the kill: %v", before)
	}
	s.kill()

	s2 := startServer(t, data, "server", "--log-level", "warn")
	// The running Turn goes on in the same process and completes; the
	// queued Turns follow in order.
	for _, id := range append([]string{rec.Turn.ID}, queued...) {
		out, _, code := s2.cli(t, "session", "turn", "wait", sid, id, "--timeout", "60s", "--json")
		var res helmrtype.TimedTurnWaitResult
		json.Unmarshal([]byte(out), &res)
		if code != 0 || res.Outcome == nil || res.Outcome.Status != "completed" {
			t.Fatalf("turn %s after kill -9 and restart: exit %d %s", id, code, out)
		}
	}
	if after := agentPIDs(deployments); !slices.Equal(after, before) {
		t.Fatalf("session processes after the restart: %v, before %v", after, before)
	}
	t.Logf("checked: after kill -9 of the control plane the running turn completed in process %v, then %d queued turns", before, len(queued))
}

func agentPIDs(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	parents := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		f := strings.Fields(string(b))
		if err != nil || len(f) < 4 || f[2] == "Z" {
			continue
		}
		parents[e.Name()] = f[3]
		// Unsandboxed, the binary's path is argv[0]; in a sandbox, its
		// bind mount's source is in the process's mountinfo (bubblewrap's
		// command line holds no path: its arguments come by a pipe).
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		mounts, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "mountinfo"))
		if strings.Contains("\x00"+string(cmdline), "\x00"+dir+"/") || strings.Contains(string(mounts), " "+dir+"/") {
			found = append(found, e.Name())
		}
	}
	// One per session process: the sandbox's leader (bubblewrap, outside
	// the sandbox, whose process group is the tree), not its inner
	// processes.
	set := map[string]bool{}
	for _, pid := range found {
		for {
			pp := parents[pid]
			comm, _ := os.ReadFile(filepath.Join("/proc", pp, "comm"))
			if pp == "" || pp == "0" || (!slices.Contains(found, pp) && strings.TrimSpace(string(comm)) != "bwrap") {
				break
			}
			pid = pp
		}
		set[pid] = true
	}
	out := make([]string, 0, len(set))
	for pid := range set {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

func TestHelmrDevRedeploysOnChange(t *testing.T) {
	if testing.Short() {
		t.Skip("builds twice")
	}
	// A copy of the test agents inside the module, so it builds against it.
	src, err := os.MkdirTemp("testdata", "devwatch-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(src) })
	files, err := filepath.Glob("testdata/agents/*.go")
	if err != nil || len(files) == 0 {
		t.Fatal("test agent sources", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || os.WriteFile(filepath.Join(src, filepath.Base(f)), b, 0o644) != nil {
			t.Fatal("copy", f, err)
		}
	}
	s := startServer(t, t.TempDir(), "dev", src)
	rec := createEcho(t, s, "before")
	// Change the program: the echo prefix.
	code, err := os.ReadFile("testdata/agents/main.go")
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(code), `"echo: "`, `"echo v2: "`, 1)
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for strings.Count(s.output(), "deployed ") < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no redeploy: %s", s.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	rec2 := createEcho(t, s, "after")
	if rec2.Session.DeploymentID == rec.Session.DeploymentID {
		t.Fatal("the new session did not pin the new deployment")
	}
	// The old Session keeps its Deployment and its code.
	out, _, code2 := s.cli(t, "session", "enqueue", rec.Session.ID, "--text", "again", "--json")
	var ts helmrtype.TurnState
	json.Unmarshal([]byte(out), &ts)
	if code2 != 0 {
		t.Fatalf("enqueue: %d", code2)
	}
	s.cli(t, "session", "turn", "wait", rec.Session.ID, ts.ID)
	events, _, _ := s.cli(t, "session", "events", rec.Session.ID, "--jsonl")
	if !strings.Contains(events, `echo: `) || strings.Contains(events, "echo v2") {
		t.Fatalf("old session's events: %s", events)
	}
	events, _, _ = s.cli(t, "session", "events", rec2.Session.ID, "--jsonl")
	if !strings.Contains(events, "echo v2: ") {
		t.Fatalf("new session's events: %s", events)
	}
}

func createEcho(t *testing.T, s *server, text string) helmrtype.SessionCreateReceipt {
	t.Helper()
	out, errOut, code := s.cli(t, "session", "create", "--agent", "echo", "--text", text, "--wait", "--json")
	if code != 0 {
		t.Fatalf("create: %d %s %s", code, out, errOut)
	}
	var rec helmrtype.SessionCreateReceipt
	if err := json.Unmarshal([]byte(out), &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestServerPrintsItsFirstKeyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs helmr server")
	}
	data := t.TempDir()
	addr := freeAddr(t)
	run := func() string {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cmd := exec.CommandContext(ctx, helmrBinary(t), serverFlags([]string{"server", "--addr", addr, "--data-dir", data})...)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if strings.Contains(sc.Text(), "listening on") {
				break
			}
		}
		// Give a key line the chance to follow the listening line.
		cmd.Process.Signal(syscall.SIGTERM)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		cmd.Wait()
		return strings.Join(lines, "\n")
	}
	first := run()
	if !strings.Contains(first, "API key (shown once") {
		t.Fatalf("first start: %s", first)
	}
	if second := run(); strings.Contains(second, "hlmr_sk_") {
		t.Fatalf("second start printed a key: %s", second)
	}
	if _, err := os.Stat(filepath.Join(data, "api-key")); !os.IsNotExist(err) {
		t.Fatalf("the server kept a plaintext key in its data directory: %v", err)
	}
}

func TestMigrateAndRefuseANewerSchema(t *testing.T) {
	if testing.Short() {
		t.Skip("runs helmr")
	}
	data := t.TempDir()
	out, err := exec.Command(helmrBinary(t), "server", "migrate", "--data-dir", data).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "migrations applied") {
		t.Fatalf("migrate: %v %s", err, out)
	}
	db, err := sql.Open("sqlite", filepath.Join(data, "helmr.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO schema_migrations(version, name) VALUES (9999, 'from_the_future')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	cmd := exec.Command(helmrBinary(t), "server", "--data-dir", data, "--addr", freeAddr(t))
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "newer than this helmr") {
		t.Fatalf("a server on a newer schema: %v %s", err, out)
	}
}

func TestHelmrDevWithRelativePaths(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the quickstart")
	}
	// As in the README: run from a directory, with a relative data
	// directory and a relative package path.
	quickstart, err := filepath.Abs("../../examples/quickstart")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	rel, err := filepath.Rel(work, quickstart)
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cmd := exec.Command(helmrBinary(t), "dev", "--addr", addr, "--data-dir", ".helmr", rel)
	cmd.Dir = work
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.HasPrefix(sc.Text(), "deployed ") {
			break
		}
	}
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], "deployed ") {
		t.Fatalf("helmr dev did not deploy: %q", lines)
	}
	go io.Copy(io.Discard, stdout)
	key, err := os.ReadFile(filepath.Join(work, ".helmr", "api-key"))
	if err != nil {
		t.Fatal(err)
	}
	s := &server{url: "http://" + addr, key: strings.TrimSpace(string(key))}
	out, errOut, code := s.cli(t, "session", "create", "--agent", "echo", "--text", "hi", "--wait")
	if code != 0 || !strings.Contains(out, "hi") {
		t.Fatalf("create: %d %s %s", code, out, errOut)
	}
}

// devConsoleLogin finds the console's one-time login link in helmr dev's
// output and checks that it logs in once, without the key in it.
func devConsoleLogin(t *testing.T, output string) {
	t.Helper()
	m := regexp.MustCompile(`(http://\S+)/console/login\?token=([0-9a-f]+)`).FindStringSubmatch(output)
	if m == nil || !strings.Contains(output, "Console: "+m[1]+"/console/") {
		t.Fatalf("dev output lacks the console's login link: %s", output)
	}
	link := m[0]
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i, want := range []int{http.StatusSeeOther, http.StatusUnauthorized} {
		res, err := c.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Fatalf("console login link, use %d: %d, want %d", i+1, res.StatusCode, want)
		}
	}
}
