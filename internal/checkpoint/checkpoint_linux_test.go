//go:build linux

package checkpoint_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/helmr-go/helmr/internal/checkpoint"
	"github.com/helmr-go/helmr/internal/computer"
	"github.com/helmr-go/helmr/internal/computer/local"
)

// envCounter makes the test binary the counter program (counterMain).
const envCounter = "HELMR_CHECKPOINT_COUNTER"

func TestMain(m *testing.M) {
	if os.Getenv(envCounter) != "" {
		counterMain()
	}
	os.Exit(m.Run())
}

// counterMain keeps a counter and a random secret in memory, with some
// state, and prints both every 20 ms; it writes the counter to
// /workspace/count and the secret to /workspace/secret once.
func counterMain() {
	var b [8]byte
	rand.Read(b[:])
	secret := hex.EncodeToString(b[:])
	state := make([]byte, 16<<20)
	for i := range state {
		state[i] = byte(i % 251)
	}
	os.WriteFile("/workspace/secret", []byte(secret), 0o644)
	for n := 1; ; n++ {
		var sum int
		for i := 0; i < len(state); i += 4093 {
			sum += int(state[i])
		}
		fmt.Printf("n=%d secret=%s sum=%d\n", n, secret, sum)
		os.WriteFile("/workspace/count", []byte(strconv.Itoa(n)), 0o644)
		time.Sleep(20 * time.Millisecond)
	}
}

// counterJS is counterMain in JavaScript.
const counterJS = `import fs from 'node:fs';
import crypto from 'node:crypto';
const secret = crypto.randomBytes(8).toString('hex');
const state = [];
for (let i = 0; i < 100000; i++) state.push({ i, s: 'x' + i });
fs.writeFileSync('/workspace/secret', secret);
let n = 0;
setInterval(() => {
  n++;
  process.stdout.write('n=' + n + ' secret=' + secret + ' sum=' + state.length + '\n');
  fs.writeFileSync('/workspace/count', String(n));
}, 20);
`

// probe returns CRIU, or skips the test saying why the host cannot
// checkpoint.
func probe(t *testing.T) *checkpoint.CRIU {
	t.Helper()
	c, err := checkpoint.Probe(context.Background(), "", nil)
	if errors.Is(err, checkpoint.CodeUnsupported) {
		t.Skipf("needs CRIU: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// restorable is a process of the local provider that can be dumped.
type restorable interface {
	computer.Process
	InitPID() int
}

var line = regexp.MustCompile(`n=(\d+) secret=([0-9a-f]+) sum=(\d+)`)

// lastLine returns the counter and secret of the last complete line of
// the log at path.
func lastLine(t *testing.T, path string) (int, string, string) {
	t.Helper()
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if m := line.FindStringSubmatch(lines[i]); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n, m[2], m[3]
		}
	}
	return 0, "", ""
}

// waitFor waits up to 10 s for ok.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestGoProgramParkedAndRestored(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	parkAndRestore(t, "helmr-cp-go", []computer.Bind{{Src: self, Dst: "/.helmr/agent"}},
		[]string{"/.helmr/agent"}, []string{envCounter + "=1"}, true)
}

func TestNodeProgramParkedAndRestored(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("needs node (Node 20 or newer)")
	}
	script := filepath.Join(t.TempDir(), "agent.mjs")
	if err := os.WriteFile(script, []byte(counterJS), 0o644); err != nil {
		t.Fatal(err)
	}
	parkAndRestore(t, "helmr-cp-node", []computer.Bind{{Src: script, Dst: "/.helmr/agent.mjs"}},
		[]string{"node", "/.helmr/agent.mjs"}, nil, false)
}

// parkAndRestore runs argv as a session process is run (the local
// provider's sandbox with a memory limit, its output to a host log file,
// a credential pipe as descriptor 3), dumps it, checks that it is gone,
// restores it, and checks its memory, its files and its cgroups. With
// explicit, /workspace and /tmp are named to Dump and Restore (as the
// supervisor does for a Computer whose files may move); without, CRIU
// finds them again at the same host paths.
func parkAndRestore(t *testing.T, cgroup string, binds []computer.Bind, argv, env []string, explicit bool) {
	c := probe(t)
	ctx := context.Background()
	dir := t.TempDir()
	p, err := local.New(local.Options{Dir: filepath.Join(dir, "computers"), CgroupName: cgroup})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Cleanup)
	if why := p.Unsandboxed(); why != "" {
		t.Skipf("needs the bubblewrap sandbox: %s", why)
	}
	spec := computer.Spec{ID: "c1", Image: computer.Image{Host: true}}
	spec.Resources.Memory = "1GiB"
	if err := p.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), spec.ID) })
	logPath := filepath.Join(dir, "process.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	tokenR, tokenW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	tokenW.WriteString("credential")
	tokenW.Close()
	pr, err := p.Start(ctx, spec, computer.ProcessSpec{Argv: argv, Env: env, Binds: binds,
		Files: []*os.File{tokenR}, Stdout: logf, Stderr: logf, Restorable: true})
	tokenR.Close()
	logf.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Signal(syscall.SIGKILL); pr.Wait() })
	rp, ok := pr.(restorable)
	if !ok || rp.InitPID() <= 0 {
		t.Fatalf("the provider's process (%T) names no sandbox PID 1", pr)
	}
	pid := rp.InitPID()
	waitFor(t, "the counter", func() bool { n, _, _ := lastLine(t, logPath); return n >= 5 })
	cgroupsBefore, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}

	images := filepath.Join(dir, "images")
	var dopts checkpoint.DumpOptions
	var ropts checkpoint.RestoreOptions
	if explicit {
		cdir := filepath.Join(dir, "computers", spec.ID)
		dopts.Mounts = []string{computer.Workspace, computer.Tmp}
		ropts.Mounts = map[string]string{computer.Workspace: filepath.Join(cdir, "workspace"), computer.Tmp: filepath.Join(cdir, "tmp")}
	}
	cp, err := c.Dump(ctx, pid, images, dopts)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-pr.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the sandbox runs on after the dump")
	}
	nDumped, secret, sum := lastLine(t, logPath)
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); !os.IsNotExist(err) {
		t.Fatalf("process %d is still there after the dump: %v", pid, err)
	}
	time.Sleep(100 * time.Millisecond)
	if n, _, _ := lastLine(t, logPath); n != nDumped {
		t.Fatalf("the counter went on after the dump: %d, then %d", nDumped, n)
	}
	t.Logf("dumped at n=%d in %s: %d bytes, %d host files (%v)", nDumped, cp.Took, cp.Bytes, len(cp.Files), cp.Files)
	checkPrivate(t, images)

	// Back into the groups it had, as the provider does with its own.
	ropts.Place = func(pids []int) error { return joinCgroups(pids, cgroupsBefore) }
	r, err := c.Restore(ctx, images, ropts)
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { r.Wait(); close(exited) }()
	t.Cleanup(func() { syscall.Kill(-r.PID, syscall.SIGKILL); <-exited })
	waitFor(t, "the restored counter", func() bool { n, _, _ := lastLine(t, logPath); return n > nDumped+3 })
	n, s, sum2 := lastLine(t, logPath)
	if s != secret || sum2 != sum {
		t.Fatalf("restored memory differs: secret %s sum %s, then %s %s", secret, sum, s, sum2)
	}
	if first := firstAfter(t, logPath, nDumped); first != nDumped+1 {
		t.Fatalf("the restored counter went on from %d, not %d", first, nDumped+1)
	}
	ws := filepath.Join(dir, "computers", spec.ID, "workspace")
	if b, _ := os.ReadFile(filepath.Join(ws, "secret")); string(b) != secret {
		t.Fatalf("/workspace/secret is %q, not %q", b, secret)
	}
	waitFor(t, "/workspace/count to move on", func() bool {
		b, _ := os.ReadFile(filepath.Join(ws, "count"))
		c, _ := strconv.Atoi(string(b))
		return c > n
	})
	cgroupsAfter, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", r.PID))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cgroupsBefore, cgroupsAfter) {
		t.Fatalf("the restored process's cgroups differ:\n%s\nbefore:\n%s", cgroupsAfter, cgroupsBefore)
	}
	if !strings.Contains(string(cgroupsAfter), "/"+cgroup+"/"+spec.ID) {
		t.Logf("not in a cgroup of the Computer (no limits on this host?):\n%s", cgroupsAfter)
	}
	t.Logf("restored as %d in %s, at n=%d", r.PID, r.Took, n)
}

// firstAfter returns the counter of the line after the one of n.
func firstAfter(t *testing.T, path string, n int) int {
	t.Helper()
	b, _ := os.ReadFile(path)
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if m := line.FindStringSubmatch(l); m != nil && m[1] == strconv.Itoa(n) && i+1 < len(lines) {
			if m := line.FindStringSubmatch(lines[i+1]); m != nil {
				next, _ := strconv.Atoi(m[1])
				return next
			}
		}
	}
	return -1
}

// checkPrivate checks that dir is 0700 and its files 0600.
func checkPrivate(t *testing.T, dir string) {
	t.Helper()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("%s is %v, not 0700", dir, fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v, not 0600", e.Name(), fi.Mode().Perm())
		}
	}
}

func TestProbeOff(t *testing.T) {
	t.Parallel()
	if _, err := checkpoint.Probe(context.Background(), "off", nil); !errors.Is(err, checkpoint.CodeUnsupported) {
		t.Fatalf("off: %v", err)
	}
	if _, err := checkpoint.Probe(context.Background(), "/no/such/criu", nil); !errors.Is(err, checkpoint.CodeUnsupported) {
		t.Fatalf("missing binary: %v", err)
	}
}

func TestDumpRefusesAProcessOutsideASandbox(t *testing.T) {
	t.Parallel()
	c := probe(t)
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	_, err := c.Dump(context.Background(), cmd.Process.Pid, filepath.Join(t.TempDir(), "images"), checkpoint.DumpOptions{})
	if !errors.Is(err, checkpoint.CodeDumpFailed) {
		t.Fatalf("dump of a process outside a sandbox: %v", err)
	}
}

// A session process that did not close its connection to the control
// plane (a Unix socket whose peer is outside) cannot be parked: the dump
// fails, quotes CRIU's log, and the process runs on.
func TestDumpFailureQuotesTheLog(t *testing.T) {
	t.Parallel()
	c := probe(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	inside, outside := os.NewFile(uintptr(fds[0]), "inside"), os.NewFile(uintptr(fds[1]), "outside")
	defer outside.Close()
	dir := t.TempDir()
	p, err := local.New(local.Options{Dir: filepath.Join(dir, "computers"), CgroupName: "helmr-cp-fail"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Cleanup)
	if why := p.Unsandboxed(); why != "" {
		t.Skipf("needs the bubblewrap sandbox: %s", why)
	}
	spec := computer.Spec{ID: "c1", Image: computer.Image{Host: true}}
	if err := p.Create(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), spec.ID) })
	logPath := filepath.Join(dir, "process.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := p.Start(context.Background(), spec, computer.ProcessSpec{Argv: []string{"/.helmr/agent"}, Env: []string{envCounter + "=1"},
		Binds: []computer.Bind{{Src: self, Dst: "/.helmr/agent"}}, Files: []*os.File{inside}, Stdout: logf, Stderr: logf, Restorable: true})
	inside.Close()
	logf.Close()
	if err != nil {
		t.Fatal(err)
	}
	init := pr.(restorable).InitPID()
	defer func() {
		pr.Signal(syscall.SIGKILL)
		pr.Wait()
		// Gone before its Computer's cgroups are removed.
		waitFor(t, "the sandbox to end", func() bool {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", init))
			return err != nil || strings.Contains(string(b), ") Z ")
		})
	}()
	waitFor(t, "the counter", func() bool { n, _, _ := lastLine(t, logPath); return n >= 2 })
	_, err = c.Dump(context.Background(), init, filepath.Join(dir, "images"), checkpoint.DumpOptions{})
	if !errors.Is(err, checkpoint.CodeDumpFailed) {
		t.Fatalf("dump of a process connected to the outside: %v", err)
	}
	if !strings.Contains(err.Error(), "Error (") {
		t.Fatalf("the error does not quote CRIU's log: %v", err)
	}
	t.Logf("%v", err)
	n, _, _ := lastLine(t, logPath)
	waitFor(t, "the counter to go on after the failed dump", func() bool { m, _, _ := lastLine(t, logPath); return m > n+2 })
}

// joinCgroups moves pids into the cgroups that a /proc/PID/cgroup listing
// names (v1 hierarchies by their controllers' directory, v2 the unified).
func joinCgroups(pids []int, listing []byte) error {
	for _, line := range strings.Split(strings.TrimSpace(string(listing)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		dir := "/sys/fs/cgroup"
		switch {
		case f[1] == "":
			// the unified hierarchy: /sys/fs/cgroup itself on v2, or
			// /sys/fs/cgroup/unified beside v1 ones
			if _, err := os.Stat(filepath.Join(dir, "unified")); err == nil {
				dir = filepath.Join(dir, "unified")
			}
		case strings.HasPrefix(f[1], "name="):
			dir = filepath.Join(dir, strings.TrimPrefix(f[1], "name="))
		default:
			dir = filepath.Join(dir, f[1])
		}
		procs := filepath.Join(dir, f[2], "cgroup.procs")
		if _, err := os.Stat(procs); err != nil {
			continue // a hierarchy not mounted here
		}
		for _, pid := range pids {
			if err := os.WriteFile(procs, []byte(strconv.Itoa(pid)), 0); err != nil {
				return fmt.Errorf("%s: %w", procs, err)
			}
		}
	}
	return nil
}
