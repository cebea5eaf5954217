//go:build linux

package local_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/checkpoint"
	"github.com/helmr-go/helmr/internal/computer"
	"github.com/helmr-go/helmr/internal/computer/local"
)

// parkCounterEnv makes the test binary the counter that is parked: it
// keeps a counter and a random secret in memory (with 8 MiB of state)
// and, on each SIGUSR1, adds one and appends "n secret" to
// /workspace/count and to its stdout. It appends its secret to
// /workspace/started once, when it starts.
const parkCounterEnv = "HELMR_PARK_COUNTER"

func parkCounter() {
	if os.Getenv(parkCounterEnv) == "" {
		return
	}
	var b [8]byte
	rand.Read(b[:])
	secret := hex.EncodeToString(b[:])
	state := make([]byte, 8<<20)
	for i := range state {
		state[i] = byte(i % 251)
	}
	tick := make(chan os.Signal, 1)
	signal.Notify(tick, syscall.SIGUSR1)
	appendLine := func(path, line string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		f.WriteString(line + "\n")
		f.Close()
	}
	appendLine("/workspace/started", secret)
	for n := 1; ; n++ {
		<-tick
		sum := 0
		for i := 0; i < len(state); i += 4093 {
			sum += int(state[i])
		}
		line := fmt.Sprintf("%d %s %d", n, secret, sum)
		appendLine("/workspace/count", line)
		fmt.Println(line)
	}
}

// parkProvider returns a provider that can park, or skips the test
// saying why this host cannot.
func parkProvider(t *testing.T, cgroup string) (*local.Provider, string) {
	t.Helper()
	needSandbox(t)
	dir := t.TempDir()
	p, err := local.New(local.Options{Dir: dir, CgroupName: cgroup, CRIU: "auto"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Cleanup)
	if why := p.CheckpointOff(); why != "" {
		t.Skipf("this host cannot park processes: %s", why)
	}
	return p, dir
}

// needNetwork skips a test of a Computer with Network where the
// provider refuses them.
func needNetwork(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"pasta", "nft", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: Computers with Network need pasta (passt), nft (nftables) and nsenter", tool)
		}
	}
}

// counter is a started or restored counter process.
type counter struct {
	t      *testing.T
	pr     computer.Process
	secret string
	n      int
}

func (c *counter) init() int { return c.pr.(interface{ InitPID() int }).InitPID() }

// root is the counter's /workspace, seen from the host through its
// process (a disk image is not mounted on the host).
func (c *counter) workspace(file string) string {
	return fmt.Sprintf("/proc/%d/root/workspace/%s", c.init(), file)
}

// tick makes the counter count once and checks the line it wrote.
func (c *counter) tick() {
	c.t.Helper()
	c.n++
	if err := syscall.Kill(c.init(), syscall.SIGUSR1); err != nil {
		c.t.Fatalf("tick %d: %v", c.n, err)
	}
	want := fmt.Sprintf("%d %s ", c.n, c.secret)
	waitUntil(c.t, "count "+strconv.Itoa(c.n), func() bool {
		b, _ := os.ReadFile(c.workspace("count"))
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		return len(lines) == c.n && strings.HasPrefix(lines[c.n-1], want)
	})
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startCounter starts the counter Restorable in spec, its output to
// logPath, with files as descriptors 3, ….
func startCounter(t *testing.T, p *local.Provider, spec computer.Spec, logPath string, files ...*os.File) *counter {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	pr, err := p.Start(context.Background(), spec, computer.ProcessSpec{Argv: []string{"/.helmr/agent"}, Env: []string{parkCounterEnv + "=1"},
		Binds: []computer.Bind{{Src: self, Dst: "/.helmr/agent"}}, Files: files, Stdout: logf, Stderr: logf, Restorable: true})
	if err != nil {
		t.Fatal(err)
	}
	c := &counter{t: t, pr: pr}
	t.Cleanup(func() { c.pr.Signal(syscall.SIGKILL); c.pr.Wait() })
	waitUntil(t, "the counter to start", func() bool {
		b, _ := os.ReadFile(c.workspace("started"))
		c.secret = strings.TrimSpace(string(b))
		return c.secret != ""
	})
	return c
}

// computerCgroups returns the host directories of the cgroups of
// Computer id that process pid is in.
func computerCgroups(t *testing.T, pid int, cgroup, id string) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 || !strings.HasSuffix(f[2], "/"+cgroup+"/"+id) {
			continue
		}
		d := filepath.Join("/sys/fs/cgroup", f[1], f[2])
		if f[1] == "" {
			d = filepath.Join("/sys/fs/cgroup", f[2])
		}
		if _, err := os.Stat(d); err == nil {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// memoryLimit reads the memory limit of the cgroup directories dirs.
func memoryLimit(dirs []string) string {
	for _, d := range dirs {
		for _, f := range []string{"memory.limit_in_bytes", "memory.max"} {
			if b, err := os.ReadFile(filepath.Join(d, f)); err == nil {
				return strings.TrimSpace(string(b))
			}
		}
	}
	return ""
}

// checkParked checks what a park leaves: the process gone and reported
// as ended without error, and private images.
func checkParked(t *testing.T, p *local.Provider, c *counter, spec computer.Spec, name, images string, st computer.ParkStats) {
	t.Helper()
	init := c.init()
	select {
	case <-c.pr.Done():
	default:
		t.Fatal("Park returned, and the process's Done is not closed")
	}
	if code, err := c.pr.Wait(); code != 0 || err != nil {
		t.Fatalf("a parked process reports exit %d, %v (not 0, nil)", code, err)
	}
	// The sandbox's PID 1 and its leader (bubblewrap's outer process, or
	// the restored root itself) are gone and reaped.
	for _, pid := range []int{init, c.pr.PID()} {
		waitUntil(t, "the parked process to be gone", func() bool {
			_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
			return os.IsNotExist(err)
		})
	}
	if !p.Parked(spec.ID, name) {
		t.Fatal("Parked is false after a park")
	}
	if st.Bytes <= 0 || st.Took <= 0 {
		t.Fatalf("ParkStats %+v", st)
	}
	for _, d := range []string{filepath.Dir(images), images} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v, not 0700", d, fi.Mode(), err)
		}
	}
	entries, _ := os.ReadDir(images)
	if len(entries) < 5 {
		t.Fatalf("%d files in %s", len(entries), images)
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, not a file of mode 0600", e.Name(), fi.Mode(), err)
		}
	}
}

// unpark restores the counter with its log reopened and checks that it
// went on where it was.
func unpark(t *testing.T, p *local.Provider, c *counter, spec computer.Spec, name, logPath string) time.Duration {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	pr, err := p.Unpark(context.Background(), spec, name, computer.ProcessSpec{Stdout: logf, Stderr: logf,
		Binds: []computer.Bind{{Src: self, Dst: "/.helmr/agent"}}})
	took := time.Since(start)
	logf.Close()
	if err != nil {
		t.Fatal(err)
	}
	c.pr = pr
	init := c.init()
	if init <= 0 || init != pr.PID() {
		t.Fatalf("the restored process's InitPID %d, PID %d", init, pr.PID())
	}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", init))
	if !strings.Contains(string(status), "\nNSpid:\t"+strconv.Itoa(init)+"\t1\n") {
		t.Fatalf("the restored process %d is not its sandbox's PID 1:\n%s", init, status)
	}
	c.tick()
	c.tick()
	if b, _ := os.ReadFile(c.workspace("started")); strings.TrimSpace(string(b)) != c.secret {
		t.Fatalf("/workspace/started is %q: the counter was started again, not restored", b)
	}
	// The counter writes its log after /workspace/count (tick waited for
	// that): the log catches up.
	want := fmt.Sprintf("%d %s ", c.n, c.secret)
	waitUntil(t, fmt.Sprintf("the log to have %q", want), func() bool {
		log, _ := os.ReadFile(logPath)
		return strings.Contains(string(log), want)
	})
	return took
}

// parkTwice starts the counter in a Computer that mod makes, parks it
// and restores it twice, and drops its images.
func parkTwice(t *testing.T, cgroup string, mod func(*computer.Spec)) {
	p, pdir := parkProvider(t, cgroup)
	ctx := context.Background()
	spec := computer.Spec{ID: "c1", Image: computer.Image{Host: true}}
	spec.Resources.Memory = "256MiB"
	if mod != nil {
		mod(&spec)
	}
	if err := p.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), spec.ID) })
	dir := t.TempDir()
	logPath := filepath.Join(dir, "process.log")
	c := startCounter(t, p, spec, logPath)
	c.tick()
	c.tick()
	c.tick()
	cgroupsBefore, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", c.init()))
	groups := computerCgroups(t, c.init(), cgroup, spec.ID)
	limitBefore := memoryLimit(groups)
	if len(groups) == 0 || limitBefore != strconv.Itoa(256<<20) {
		t.Logf("no memory limit to check (cgroups %v, limit %q)", groups, limitBefore)
	}
	computerDir := filepath.Join(pdir, spec.ID)
	const name = "session-1"
	for round := 1; round <= 2; round++ {
		oldInit := c.init()
		st, err := p.Park(ctx, spec, name, c.pr)
		if err != nil {
			t.Fatalf("park %d: %v", round, err)
		}
		images := filepath.Join(computerDir, "checkpoints", name)
		checkParked(t, p, c, spec, name, images, st)
		if spec.Network {
			if pid := pastaOf(oldInit); pid != "" {
				t.Fatalf("pasta %s still serves the parked process's namespace", pid)
			}
		}
		for _, g := range groups {
			if _, err := os.Stat(g); err != nil {
				t.Fatalf("the parked Computer's cgroup %s went: %v", g, err)
			}
		}
		if round == 1 {
			// As a control plane's Cleanup at its stop does: Unpark
			// makes them again with their limits.
			for _, g := range groups {
				if err := syscall.Rmdir(g); err != nil {
					t.Fatalf("remove %s: %v", g, err)
				}
			}
		}
		took := unpark(t, p, c, spec, name, logPath)
		t.Logf("round %d: parked at n=%d in %s (%d bytes of images), restored in %s", round, c.n-2, st.Took.Round(time.Millisecond), st.Bytes, took.Round(time.Millisecond))
		cgroupsAfter, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", c.init()))
		if string(cgroupsAfter) != string(cgroupsBefore) {
			t.Fatalf("the restored process's cgroups:\n%s\nbefore:\n%s", cgroupsAfter, cgroupsBefore)
		}
		if l := memoryLimit(groups); l != limitBefore {
			t.Fatalf("the memory limit after the restore is %q, before %q", l, limitBefore)
		}
		if spec.Network {
			checkNetwork(t, c.init())
		}
	}
	last := c.init()
	c.pr.Signal(syscall.SIGKILL)
	if code, err := c.pr.Wait(); code != 128+int(syscall.SIGKILL) || err != nil {
		t.Fatalf("the restored process killed: exit %d, %v", code, err)
	}
	if spec.Network {
		waitUntil(t, "its pasta to end", func() bool { return pastaOf(last) == "" })
	}
	if !p.Parked(spec.ID, name) {
		t.Fatal("the images went before DropParked")
	}
	if err := p.DropParked(spec.ID, name); err != nil {
		t.Fatal(err)
	}
	if p.Parked(spec.ID, name) {
		t.Fatal("Parked after DropParked")
	}
	if _, err := os.Stat(filepath.Join(computerDir, "checkpoints")); !os.IsNotExist(err) {
		t.Fatalf("the checkpoints directory is still there: %v", err)
	}
	if err := p.DropParked(spec.ID, name); err != nil {
		t.Fatalf("DropParked without images: %v", err)
	}
}

// pastaOf returns the PID of a pasta serving the network namespace of
// process pid, "" when none does.
func pastaOf(pid int) string {
	ns := fmt.Sprintf("/proc/%d/ns/net", pid)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if filepath.Base(args[0]) != "pasta" {
			continue
		}
		for i, a := range args {
			if a == "--netns" && i+1 < len(args) && args[i+1] == ns {
				return e.Name()
			}
		}
	}
	return ""
}

// checkNetwork checks that the network of a restored process is up: an
// interface and a default route (from a new pasta), and its firewall
// once, written again.
func checkNetwork(t *testing.T, pid int) {
	t.Helper()
	route, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/route", pid))
	def := false
	for _, l := range strings.Split(string(route), "\n")[1:] {
		if f := strings.Fields(l); len(f) > 1 && f[1] == "00000000" && f[0] != "lo" {
			def = true
		}
	}
	if !def {
		dev, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/dev", pid))
		t.Fatalf("no default route after the restore:\n%s\n%s", route, dev)
	}
	if pastaOf(pid) == "" {
		t.Fatal("no pasta serves the restored process")
	}
	out, err := exec.Command("nsenter", "--net="+fmt.Sprintf("/proc/%d/ns/net", pid), "nft", "list", "ruleset").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list ruleset: %v %s", err, out)
	}
	if n := strings.Count(string(out), "table inet helmr"); n != 1 {
		t.Fatalf("%d firewall tables after the restore:\n%s", n, out)
	}
	if n := strings.Count(string(out), `oifname "lo" accept`); n != 1 {
		t.Fatalf("the firewall's rules are there %d times after the restore:\n%s", n, out)
	}
}

func TestParkAndUnpark(t *testing.T) {
	t.Parallel()
	parkTwice(t, "helmr-test-park", nil)
}

func TestParkDiskLimited(t *testing.T) {
	t.Parallel()
	if !imagesHere() {
		t.Skip("this host gives no Computer a disk image of its own (needs root, loop devices and mkfs.ext4)")
	}
	parkTwice(t, "helmr-test-park-disk", func(s *computer.Spec) { s.Resources.Disk = "64MiB" })
}

func TestParkNetwork(t *testing.T) {
	t.Parallel()
	needNetwork(t)
	parkTwice(t, "helmr-test-park-net", func(s *computer.Spec) { s.Network = true })
}

// A process connected to the outside (a Unix socket whose peer is the
// host) cannot be parked: Park fails, the process runs on (with its
// network given back), and no images are left.
func TestParkFails(t *testing.T) {
	t.Parallel()
	for _, network := range []bool{false, true} {
		t.Run(fmt.Sprintf("network=%v", network), func(t *testing.T) {
			if network {
				needNetwork(t)
			}
			p, pdir := parkProvider(t, fmt.Sprintf("helmr-test-park-fail-%v", network))
			spec := computer.Spec{ID: "c1", Image: computer.Image{Host: true}, Network: network}
			if err := p.Create(context.Background(), spec); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Delete(context.Background(), spec.ID) })
			fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			inside, outside := os.NewFile(uintptr(fds[0]), "inside"), os.NewFile(uintptr(fds[1]), "outside")
			defer outside.Close()
			c := startCounter(t, p, spec, filepath.Join(t.TempDir(), "process.log"), inside)
			inside.Close()
			c.tick()
			_, err = p.Park(context.Background(), spec, "s1", c.pr)
			if !errors.Is(err, checkpoint.CodeDumpFailed) || !strings.Contains(err.Error(), "Error (") {
				t.Fatalf("park of a process connected to the outside: %v", err)
			}
			t.Logf("%v", err)
			if p.Parked(spec.ID, "s1") {
				t.Fatal("Parked after a failed park")
			}
			select {
			case <-c.pr.Done():
				t.Fatal("the process ended with a failed park")
			default:
			}
			c.tick()
			c.tick()
			if network {
				checkNetwork(t, c.init())
			}
			images, _ := filepath.Glob(filepath.Join(pdir, spec.ID, "checkpoints", "s1", "*"))
			for _, f := range images {
				if filepath.Base(f) != checkpoint.DumpLog {
					t.Errorf("a failed park left %s", f)
				}
			}
		})
	}
}

// Without CRIU the provider says why, and Park refuses with
// checkpoint_unsupported.
func TestCheckpointOff(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	p, err := local.New(local.Options{Dir: t.TempDir(), CgroupName: "helmr-test-park-off"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Cleanup)
	if why := p.CheckpointOff(); !strings.Contains(why, "turned off") {
		t.Fatalf("CheckpointOff without Options.CRIU: %q", why)
	}
	spec := computer.Spec{ID: "c1", Image: computer.Image{Host: true}}
	if err := p.Create(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), spec.ID) })
	pr, err := p.Start(context.Background(), spec, computer.ProcessSpec{Argv: []string{"sleep", "60"}, Restorable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { pr.Signal(syscall.SIGKILL); pr.Wait() }()
	if _, err := p.Park(context.Background(), spec, "s1", pr); !errors.Is(err, checkpoint.CodeUnsupported) {
		t.Fatalf("Park without CRIU: %v", err)
	}
	if _, err := p.Unpark(context.Background(), spec, "s1", computer.ProcessSpec{}); !errors.Is(err, checkpoint.CodeUnsupported) {
		t.Fatalf("Unpark without CRIU: %v", err)
	}
	q, err := local.New(local.Options{Dir: t.TempDir(), CgroupName: "helmr-test-park-nocriu", CRIU: "/no/such/criu"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Cleanup)
	if why := q.CheckpointOff(); os.Geteuid() == 0 && !strings.Contains(why, "make setup") {
		t.Fatalf("CheckpointOff with a missing criu: %q", why)
	}
	t.Logf("%s", q.CheckpointOff())
}

// Park refuses a name that is not an ID and a process that is not
// Restorable.
func TestParkRefuses(t *testing.T) {
	t.Parallel()
	p, _ := parkProvider(t, "helmr-test-park-refuse")
	spec := computer.Spec{ID: "c1", Image: computer.Image{Host: true}}
	if err := p.Create(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), spec.ID) })
	pr, err := p.Start(context.Background(), spec, computer.ProcessSpec{Argv: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { pr.Signal(syscall.SIGKILL); pr.Wait() }()
	if _, err := p.Park(context.Background(), spec, "s1", pr); !errors.Is(err, helmrtype.CodeInvalidRequest) {
		t.Fatalf("Park of a process that is not Restorable: %v", err)
	}
	if _, err := p.Park(context.Background(), spec, "../x", pr); !errors.Is(err, helmrtype.CodeInvalidRequest) {
		t.Fatalf("Park under a bad name: %v", err)
	}
	if _, err := p.Unpark(context.Background(), spec, "s1", computer.ProcessSpec{}); !errors.Is(err, helmrtype.CodeNotFound) {
		t.Fatalf("Unpark of nothing: %v", err)
	}
	select {
	case <-pr.Done():
		t.Fatal("a refused park ended the process")
	default:
	}
}
