package freezer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Become a child subreaper so that grandchildren orphaned by killing a
	// test tree are reparented to this process and can be reaped here (this
	// machine's PID 1 does not reap orphans).
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		fmt.Fprintln(os.Stderr, "prctl(PR_SET_CHILD_SUBREAPER):", errno)
	}
	goleak.VerifyTestMain(m)
}

// testRoot is the parent cgroup name the tests create and remove.
var testRoot = fmt.Sprintf("helmr-freezer-test-%d", os.Getpid())

// mechanism builds one mechanism or skips the test, and removes the test's
// root cgroup afterwards.
func mechanism(t *testing.T, kind string) Freezer {
	t.Helper()
	var (
		f   Freezer
		err error
	)
	switch kind {
	case KindSignal:
		return NewSignal()
	case KindCgroupV1:
		if os.Geteuid() != 0 {
			t.Skip("cgroup v1 freezer: not root")
		}
		mount, merr := cgroupV1FreezerMount()
		if merr != nil {
			t.Skipf("cgroup v1 freezer unavailable on this host: %v", merr)
		}
		f, err = NewCgroupV1(mount, testRoot)
	case KindCgroupV2:
		parent, perr := cgroupV2Parent()
		if perr != nil {
			t.Skipf("cgroup v2 freezer unavailable on this host: %v", perr)
		}
		f, err = NewCgroupV2(parent, testRoot)
	}
	if err != nil {
		t.Skipf("%s freezer unavailable on this host: %v", kind, err)
	}
	base := f.(*cgroupFreezer).base
	t.Cleanup(func() {
		if err := syscall.Rmdir(base); err != nil && !errors.Is(err, syscall.ENOENT) {
			t.Errorf("remove test root %s: %v", base, err)
		}
	})
	return f
}

// tree is a busy-looping sh in its own process group with a busy-looping
// subshell child (the test's grandchild).
type tree struct {
	cmd   *exec.Cmd
	stdin *os.File
	out   *bufio.Reader
	outF  *os.File
	pid   int
	gpid  int // set once the grandchild is forked
}

// startTree starts the tree. With forkFirst the grandchild is forked at once
// (before Attach); otherwise the child waits for a line on stdin (see
// forkGrandchild), so that the grandchild is forked after Attach.
func startTree(t *testing.T, forkFirst bool) *tree {
	t.Helper()
	script := `( while :; do :; done ) & echo $!; while :; do :; done`
	if !forkFirst {
		script = `read go; ` + script
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tr := &tree{cmd: cmd, stdin: stdin.(*os.File), outF: stdout.(*os.File), out: bufio.NewReader(stdout), pid: cmd.Process.Pid}
	t.Cleanup(func() { tr.kill(t) })
	if forkFirst {
		tr.readGrandchild(t)
	}
	return tr
}

func (tr *tree) forkGrandchild(t *testing.T) {
	t.Helper()
	if _, err := tr.stdin.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
	tr.readGrandchild(t)
}

func (tr *tree) readGrandchild(t *testing.T) {
	t.Helper()
	tr.outF.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := tr.out.ReadString('\n')
	if err != nil {
		t.Fatalf("read grandchild pid: %v", err)
	}
	gpid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("grandchild pid %q: %v", line, err)
	}
	tr.gpid = gpid
}

// kill SIGKILLs the group and reaps child and grandchild. Callers thaw first.
func (tr *tree) kill(t *testing.T) {
	if tr.cmd == nil {
		return
	}
	syscall.Kill(-tr.pid, syscall.SIGKILL)
	tr.cmd.Wait()
	tr.stdin.Close()
	if tr.gpid > 0 {
		// Reparented to this subreaper when its parent died.
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(tr.gpid, &ws, 0, nil)
			if err != syscall.EINTR {
				break
			}
		}
	}
	tr.cmd = nil
}

func (tr *tree) pids() []int { return []int{tr.pid, tr.gpid} }

// cpuTicks is utime+stime of pid in clock ticks, from /proc/<pid>/stat.
func cpuTicks(t *testing.T, pid int) uint64 {
	t.Helper()
	st, err := readStat(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("stat %d: %v", pid, err)
	}
	return st.utime + st.stime
}

// cpuOver returns the CPU ticks each pid used over d.
func cpuOver(t *testing.T, pids []int, d time.Duration) []uint64 {
	t.Helper()
	before := make([]uint64, len(pids))
	for i, p := range pids {
		before[i] = cpuTicks(t, p)
	}
	time.Sleep(d)
	out := make([]uint64, len(pids))
	for i, p := range pids {
		out[i] = cpuTicks(t, p) - before[i]
	}
	return out
}

// inCgroup reports whether pid's cgroup for the mechanism ends in /name.
func inCgroup(t *testing.T, kind string, pid int, name string) bool {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		v2 := parts[0] == "0" && parts[1] == ""
		v1 := false
		for _, c := range strings.Split(parts[1], ",") {
			v1 = v1 || c == "freezer"
		}
		if (kind == KindCgroupV2 && v2) || (kind == KindCgroupV1 && v1) {
			return strings.HasSuffix(parts[2], "/"+testRoot+"/"+name)
		}
	}
	return false
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

const window = time.Second

// testFreezeCPU runs the main scenario against one mechanism: a busy child
// and a grandchild forked after Attach use CPU, use none while frozen (one
// tick of tolerance), and use CPU again after Thaw; Release removes the
// cgroup.
func testFreezeCPU(t *testing.T, kind string) {
	f := mechanism(t, kind)
	if f.Kind() != kind {
		t.Fatalf("Kind() = %q, want %q", f.Kind(), kind)
	}
	ctx := ctxT(t)
	tr := startTree(t, false)
	name := "sess-cpu"
	h, err := f.Attach(ctx, name, tr.pid, tr.pid)
	if err != nil {
		t.Fatal(err)
	}
	tr.forkGrandchild(t)
	if kind != KindSignal {
		for _, p := range tr.pids() {
			if !inCgroup(t, kind, p, name) {
				t.Fatalf("process %d is not in cgroup %s", p, name)
			}
		}
	}

	running := cpuOver(t, tr.pids(), window)
	if err := h.Freeze(ctx); err != nil {
		t.Fatal(err)
	}
	if !h.Frozen() {
		t.Fatal("Frozen() = false after Freeze")
	}
	frozen := cpuOver(t, tr.pids(), window)
	if err := h.Thaw(ctx); err != nil {
		t.Fatal(err)
	}
	if h.Frozen() {
		t.Fatal("Frozen() = true after Thaw")
	}
	thawed := cpuOver(t, tr.pids(), window)
	t.Logf("%s: CPU ticks (1/100 s) per %v, [child grandchild]: running %v, frozen %v, thawed %v",
		kind, window, running, frozen, thawed)
	for i, p := range tr.pids() {
		if running[i] < 2 {
			t.Errorf("process %d used %d ticks before Freeze: not busy", p, running[i])
		}
		if frozen[i] > 1 {
			t.Errorf("process %d used %d ticks while frozen, want <= 1", p, frozen[i])
		}
		if thawed[i] < 2 {
			t.Errorf("process %d used %d ticks after Thaw, want it running again", p, thawed[i])
		}
	}

	tr.kill(t)
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if kind != KindSignal {
		dir := filepath.Join(f.(*cgroupFreezer).base, name)
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("cgroup %s still there after Release (stat: %v)", dir, err)
		}
	}
	if err := h.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if err := h.Freeze(ctx); !errors.Is(err, ErrReleased) {
		t.Fatalf("Freeze after Release = %v, want ErrReleased", err)
	}
}

func TestCgroupV2FreezeCPU(t *testing.T) { testFreezeCPU(t, KindCgroupV2) }
func TestCgroupV1FreezeCPU(t *testing.T) { testFreezeCPU(t, KindCgroupV1) }
func TestSignalFreezeCPU(t *testing.T)   { testFreezeCPU(t, KindSignal) }

var kinds = []string{KindCgroupV2, KindCgroupV1, KindSignal}

// A grandchild forked before Attach is still covered: the cgroup mechanisms
// sweep the process group, the signal fallback signals it.
func TestAttachCoversEarlyChildren(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			f := mechanism(t, kind)
			ctx := ctxT(t)
			tr := startTree(t, true)
			h, err := f.Attach(ctx, "sess-early", tr.pid, tr.pid)
			if err != nil {
				t.Fatal(err)
			}
			if kind != KindSignal {
				for _, p := range tr.pids() {
					if !inCgroup(t, kind, p, "sess-early") {
						t.Fatalf("process %d is not in the cgroup", p)
					}
				}
			}
			if err := h.Freeze(ctx); err != nil {
				t.Fatal(err)
			}
			frozen := cpuOver(t, tr.pids(), window/2)
			t.Logf("frozen CPU ticks over %v: %v", window/2, frozen)
			for i, p := range tr.pids() {
				if frozen[i] > 1 {
					t.Errorf("process %d used %d ticks while frozen", p, frozen[i])
				}
			}
			if err := h.Thaw(ctx); err != nil {
				t.Fatal(err)
			}
			tr.kill(t)
			if err := h.Release(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Release with live processes thaws them, keeps the cgroup and reports
// ErrNotEmpty; after they are killed Release succeeds. Killing a frozen tree
// and then calling Release also works, because Release thaws first.
func TestReleaseWithLiveProcesses(t *testing.T) {
	for _, kind := range []string{KindCgroupV2, KindCgroupV1} {
		t.Run(kind, func(t *testing.T) {
			f := mechanism(t, kind)
			ctx := ctxT(t)
			tr := startTree(t, true)
			h, err := f.Attach(ctx, "sess-live", tr.pid, tr.pid)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Freeze(ctx); err != nil {
				t.Fatal(err)
			}
			err = h.Release()
			if !errors.Is(err, ErrNotEmpty) {
				t.Fatalf("Release with live processes = %v, want ErrNotEmpty", err)
			}
			t.Logf("Release with live processes: %v", err)
			if h.Frozen() {
				t.Fatal("still Frozen() after Release")
			}
			if d := cpuOver(t, []int{tr.pid}, window/2); d[0] < 1 {
				t.Fatalf("not running after failed Release: %d ticks", d[0])
			}

			// Kill while frozen, then Release.
			if err := h.Freeze(ctx); err != nil {
				t.Fatal(err)
			}
			syscall.Kill(-tr.pid, syscall.SIGKILL)
			time.Sleep(100 * time.Millisecond)
			st, _ := readStat(fmt.Sprintf("/proc/%d/stat", tr.pid))
			t.Logf("%s: state of a frozen process 100 ms after SIGKILL: %c", kind, st.state)
			if err := h.Release(); err != nil {
				t.Fatalf("Release after killing the frozen tree: %v", err)
			}
			tr.kill(t)
			dir := filepath.Join(f.(*cgroupFreezer).base, "sess-live")
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("cgroup %s still there (stat: %v)", dir, err)
			}
		})
	}
}

// No mechanism attaches the caller's own process or process group.
func TestAttachRefusesOwnGroup(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			f := mechanism(t, kind)
			ctx := ctxT(t)
			if _, err := f.Attach(ctx, "self", os.Getpid(), syscall.Getpgrp()); err == nil {
				t.Fatal("attached the test process itself")
			}
			tr := startTree(t, true)
			if _, err := f.Attach(ctx, "../x", tr.pid, tr.pid); err == nil {
				t.Fatal("accepted name ../x")
			}
			if _, err := f.Attach(ctx, "wrong-group", tr.pid, tr.pid+1); err == nil {
				t.Fatal("accepted a pgid the process is not in")
			}
		})
	}
}

// New picks the first usable mechanism in the order v2, v1, signal, and logs
// its choice.
func TestNew(t *testing.T) {
	var buf bytes.Buffer
	f := New(slog.New(slog.NewTextHandler(&buf, nil)), testRoot)
	t.Logf("New picked %s; log:\n%s", f.Kind(), buf.String())
	if !strings.Contains(buf.String(), "kind="+f.Kind()) {
		t.Errorf("log does not name the chosen kind %s", f.Kind())
	}
	want := KindSignal
	if p, err := cgroupV2Parent(); err == nil {
		if _, err := os.Stat(filepath.Join(p, testRoot, "cgroup.freeze")); err == nil {
			want = KindCgroupV2
		}
	}
	if want == KindSignal {
		if m, err := cgroupV1FreezerMount(); err == nil {
			if _, err := os.Stat(filepath.Join(m, testRoot, "freezer.state")); err == nil {
				want = KindCgroupV1
			}
		}
	}
	if f.Kind() != want {
		t.Errorf("New picked %s, want %s", f.Kind(), want)
	}
	if cf, ok := f.(*cgroupFreezer); ok {
		if err := syscall.Rmdir(cf.base); err != nil {
			t.Errorf("remove %s: %v", cf.base, err)
		}
	}
}

func TestReadStat(t *testing.T) {
	st, err := readStat("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	// The session ID is 0 when the session leader lives outside this PID
	// namespace (as in some CI sandboxes), so compare with getsid(0).
	sid, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, 0, 0, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	if st.pgrp != syscall.Getpgrp() || st.session != int(sid) {
		t.Fatalf("readStat(self) = %+v, want pgrp %d and session %d", st, syscall.Getpgrp(), sid)
	}
	if got := unescapeMount(`/a\040b`); got != "/a b" {
		t.Fatalf("unescapeMount = %q", got)
	}
}

// TestCgroupV2NestUnder: a process that lives in a group under a NestUnder
// directory (a Computer's limits group) stays under that group: the
// freezer's group is made its child, freezing stops the tree, and Release
// removes only the child.
func TestCgroupV2NestUnder(t *testing.T) {
	parent, err := cgroupV2Parent()
	if err != nil {
		t.Skipf("cgroup v2 unavailable on this host: %v", err)
	}
	f, err := NewCgroupV2(parent, testRoot)
	if err != nil {
		t.Skipf("cgroup v2 freezer unavailable on this host: %v", err)
	}
	base := f.(*cgroupFreezer).base
	limits := filepath.Join(parent, testRoot+"-limits")
	computer := filepath.Join(limits, "computer-1")
	if err := os.MkdirAll(computer, 0o755); err != nil {
		t.Skipf("cannot create a cgroup v2 group: %v", err)
	}
	t.Cleanup(func() {
		for _, d := range []string{computer, limits, base} {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				t.Errorf("remove %s: %v", d, err)
			}
		}
	})
	NestUnder(f, limits)
	tr := startTree(t, true)
	if err := os.WriteFile(filepath.Join(computer, "cgroup.procs"), []byte(strconv.Itoa(tr.pid)), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(computer, "cgroup.procs"), []byte(strconv.Itoa(tr.gpid)), 0); err != nil {
		t.Fatal(err)
	}
	h, err := f.Attach(t.Context(), "session-1", tr.pid, tr.pid)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(computer, "session-1")
	for _, pid := range []int{tr.pid, tr.gpid} {
		if got, err := v2GroupOf(pid); err != nil || got != want {
			t.Errorf("process %d is in %q (%v), want %q", pid, got, err, want)
		}
	}
	frozen := func() string {
		b, _ := os.ReadFile(filepath.Join(want, "cgroup.events"))
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "frozen "); ok {
				return v
			}
		}
		return "?"
	}
	if err := h.Freeze(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := frozen(); got != "1" {
		t.Errorf("the nested group reads frozen %s after Freeze, want 1", got)
	}
	if err := h.Thaw(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := frozen(); got != "0" {
		t.Errorf("the nested group reads frozen %s after Thaw, want 0", got)
	}
	// Attached again (a restarted control plane adopting it), it stays in
	// the same group.
	if h, err = f.Attach(t.Context(), "session-1", tr.pid, tr.pid); err != nil {
		t.Fatal(err)
	}
	if got, _ := v2GroupOf(tr.pid); got != want {
		t.Errorf("after a second Attach the process is in %q, want %q", got, want)
	}
	// A process outside the NestUnder directories moves under base.
	other := startTree(t, true)
	h2, err := f.Attach(t.Context(), "session-2", other.pid, other.pid)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := v2GroupOf(other.pid); got != filepath.Join(base, "session-2") {
		t.Errorf("an unnested process is in %q", got)
	}
	tr.kill(t)
	other.kill(t)
	for _, hh := range []Handle{h, h2} {
		if err := hh.Release(); err != nil {
			t.Errorf("Release: %v", err)
		}
	}
	if _, err := os.Stat(want); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the nested group is left after Release: %v", err)
	}
	if _, err := os.Stat(computer); err != nil {
		t.Errorf("Release removed the group it was nested under: %v", err)
	}
}
