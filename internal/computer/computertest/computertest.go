// Package computertest is the conformance suite every Computer provider
// passes: create, run a process, filesystem kept across processes, resource
// limits, isolation, freeze and thaw, stop and delete.
//
// A provider's test calls Run; its TestMain must call Main first, which
// turns the test binary into the suite's helper program when the suite
// runs it inside a Computer.
package computertest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/computer"
	"github.com/helmr-go/helmr/internal/cputime"
	"github.com/helmr-go/helmr/internal/freezer"
)

// helperEnv selects what the helper program does.
const helperEnv = "HELMR_COMPUTERTEST_HELPER"

// helperPath is where the suite binds the test binary inside a Computer.
const helperPath = "/.helmr-test/helper"

// Main runs the helper program when the suite started this binary inside
// a Computer, and returns otherwise. Call it first in TestMain.
func Main() {
	switch os.Getenv(helperEnv) {
	case "":
		return
	case "hog":
		// Allocate and touch memory until killed.
		var keep [][]byte
		for {
			b := make([]byte, 8<<20)
			for i := range b {
				b[i] = 1
			}
			keep = append(keep, b)
			fmt.Println(len(keep) * 8)
		}
	case "spin":
		// Spin for 1.5 s of wall time, then print the CPU time used (ms).
		end := time.Now().Add(1500 * time.Millisecond)
		x := 0
		for time.Now().Before(end) {
			x++
		}
		fmt.Println(cputime.Process().Milliseconds(), x%2)
		os.Exit(0)
	case "count":
		// Print a counter every 10 ms until killed.
		for i := 0; ; i++ {
			fmt.Println(i)
			time.Sleep(10 * time.Millisecond)
		}
	}
	os.Exit(2)
}

// Factory makes a fresh provider for one test.
type Factory func(t *testing.T) computer.Provider

func hostImage() computer.Image { return computer.Image{Host: true} }

func spec(id string) computer.Spec {
	return computer.Spec{ID: id, Image: hostImage()}
}

// run starts argv in the Computer and returns its exit code and output.
func run(t *testing.T, p computer.Provider, s computer.Spec, ps computer.ProcessSpec) (int, string) {
	t.Helper()
	var out bytes.Buffer
	ps.Stdout, ps.Stderr = &out, &out
	pr, err := p.Start(context.Background(), s, ps)
	if err != nil {
		t.Fatalf("start %v: %v", ps.Argv, err)
	}
	select {
	case <-pr.Done():
	case <-time.After(30 * time.Second):
		pr.Signal(syscall.SIGKILL)
		t.Fatalf("%v did not end", ps.Argv)
	}
	code, err := pr.Wait()
	if err != nil {
		t.Fatalf("wait %v: %v", ps.Argv, err)
	}
	return code, out.String()
}

func sh(script string) computer.ProcessSpec {
	return computer.ProcessSpec{Argv: []string{"/bin/sh", "-c", script}}
}

func helper(mode string) computer.ProcessSpec {
	self, _ := os.Executable()
	return computer.ProcessSpec{Argv: []string{helperPath}, Env: []string{helperEnv + "=" + mode},
		Binds: []computer.Bind{{Src: self, Dst: helperPath}}}
}

func create(t *testing.T, p computer.Provider, s computer.Spec) {
	t.Helper()
	if err := p.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), s.ID) })
}

// Run runs the suite against the providers newProvider makes. isolated
// says whether the provider claims isolation (false for an unsafe one,
// whose isolation and limit tests are skipped).
func Run(t *testing.T, newProvider Factory, isolated bool) {
	t.Run("RunAndFilesystem", func(t *testing.T) {
		p := newProvider(t)
		s := spec("fs-1")
		create(t, p, s)
		want := "hello\n/workspace\n/workspace\n"
		if !isolated {
			// Unsandboxed, /workspace is a host directory: only HOME and
			// the working directory agree.
			want = "hello\n$PWD\n$HOME\n"
		}
		if code, out := run(t, p, s, sh("echo hello; pwd; echo $HOME; exit 3")); code != 3 ||
			(isolated && out != want) || (!isolated && !strings.HasPrefix(out, "hello\n")) {
			t.Fatalf("exit %d, output %q, want %q", code, out, want)
		}
		// A second process sees the first one's files.
		run(t, p, s, sh("echo kept > $HOME/note; mkdir -p $HOME/d && echo x > $HOME/d/f; echo t > $TMPDIR/t"))
		if code, out := run(t, p, s, sh("cat $HOME/note $HOME/d/f $TMPDIR/t")); code != 0 || out != "kept\nx\nt\n" {
			t.Fatalf("files across processes: %d %q", code, out)
		}
		// Another Computer does not.
		s2 := spec("fs-2")
		create(t, p, s2)
		if code, _ := run(t, p, s2, sh("test -e $HOME/note")); code == 0 {
			t.Fatal("a Computer sees another Computer's workspace")
		}
		// Environment and stdin.
		ps := sh("read line; echo \"$line $GREETING\"")
		ps.Env, ps.Stdin = []string{"GREETING=world"}, strings.NewReader("hello\n")
		if _, out := run(t, p, s, ps); out != "hello world\n" {
			t.Fatalf("env and stdin: %q", out)
		}
	})

	t.Run("StopAndDelete", func(t *testing.T) {
		p := newProvider(t)
		s := spec("stop-1")
		create(t, p, s)
		var out bytes.Buffer
		ps := helper("count")
		ps.Stdout = &out
		pr, err := p.Start(context.Background(), s, ps)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		if err := pr.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-pr.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("SIGTERM did not stop the process")
		}
		if code, _ := pr.Wait(); code != 128+int(syscall.SIGTERM) {
			t.Fatalf("exit %d after SIGTERM", code)
		}
		run(t, p, s, sh("echo x > $HOME/f"))
		if err := p.Delete(context.Background(), s.ID); err != nil {
			t.Fatal(err)
		}
		if err := p.Create(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		if code, _ := run(t, p, s, sh("test -e $HOME/f")); code == 0 {
			t.Fatal("a deleted Computer's files came back")
		}
	})

	t.Run("FreezeAndThaw", func(t *testing.T) {
		p := newProvider(t)
		s := spec("freeze-1")
		create(t, p, s)
		var out syncBuffer
		ps := helper("count")
		ps.Stdout = &out
		pr, err := p.Start(context.Background(), s, ps)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { pr.Signal(syscall.SIGKILL); pr.Wait() }()
		f := freezer.New(nil, "helmr-computertest-"+strconv.Itoa(os.Getpid()))
		ctx := context.Background()
		h, err := f.Attach(ctx, "freeze-1", pr.PID(), pr.PID())
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release()
		for deadline := time.Now().Add(5 * time.Second); out.Len() == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the process wrote nothing")
			}
		}
		if err := h.Freeze(ctx); err != nil {
			t.Fatal(err)
		}
		n := out.Len()
		time.Sleep(200 * time.Millisecond)
		if out.Len() != n {
			t.Fatalf("a frozen process kept writing (%d → %d bytes)", n, out.Len())
		}
		if err := h.Thaw(ctx); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Second); out.Len() == n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("a thawed process did not go on")
			}
		}
	})

	if !isolated {
		return
	}

	t.Run("Isolation", func(t *testing.T) {
		p := newProvider(t)
		s := spec("iso-1")
		create(t, p, s)
		secret := filepath.Join(t.TempDir(), "secret")
		if err := os.WriteFile(secret, []byte("host secret"), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, out := run(t, p, s, sh("cat "+secret)); code == 0 || strings.Contains(out, "host secret") {
			t.Fatalf("a host file outside the Computer was readable: %q", out)
		}
		for _, f := range []string{"/etc/shadow", "/root"} {
			if code, out := run(t, p, s, sh("cat "+f+" 2>/dev/null | head -c 64; ls "+f+" 2>/dev/null")); strings.Contains(out, "root:") {
				t.Fatalf("%s readable (exit %d): %q", f, code, out)
			}
		}
		// Host processes are invisible: the Computer sees only its own.
		if _, out := run(t, p, s, sh("ls /proc | grep -c '^[0-9]'")); func() bool { n, _ := strconv.Atoi(strings.TrimSpace(out)); return n > 5 }() {
			t.Fatalf("the Computer sees %s processes", strings.TrimSpace(out))
		}
		if _, out := run(t, p, s, sh("cat /proc/1/cmdline | tr '\\0' ' '")); strings.Contains(out, "init") || strings.Contains(out, "systemd") {
			t.Fatalf("pid 1 is the host's: %q", out)
		}
		// No network by default: a host listener on loopback is out of reach.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		port := ln.Addr().(*net.TCPAddr).Port
		probe := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && echo connected", port)
		if _, err := os.Stat("/bin/bash"); err != nil {
			t.Skip("no bash for the network probe")
		}
		if code, out := run(t, p, s, computer.ProcessSpec{Argv: []string{"/bin/bash", "-c", probe}}); code == 0 || strings.Contains(out, "connected") {
			t.Fatalf("reached the host's loopback without network: %q", out)
		}
		// With network it is not either: a networked Computer has a
		// network namespace of its own, not the host's loopback.
		s.Network = true
		if code, out := run(t, p, s, computer.ProcessSpec{Argv: []string{"/bin/bash", "-c", probe}}); code == 0 || strings.Contains(out, "connected") {
			t.Fatalf("reached the host's loopback with network: %q", out)
		}
	})

	t.Run("MemoryLimit", func(t *testing.T) {
		p := newProvider(t)
		if l, ok := p.(interface{ Limits() string }); ok && l.Limits() == "" {
			t.Skip("this host cannot enforce resource limits")
		}
		s := spec("mem-1")
		s.Resources = helmrtype.ResourcesManifest{Memory: "128MiB"}
		create(t, p, s)
		code, out := run(t, p, s, helper("hog"))
		lines := strings.Fields(out)
		last := 0
		if len(lines) > 0 {
			last, _ = strconv.Atoi(lines[len(lines)-1])
		}
		// Killed by the OOM killer (SIGKILL) before its heap passed the
		// limit; the race detector's shadow memory counts too, so the
		// heap reached may be well below it.
		if code != 128+int(syscall.SIGKILL) || last > 128 || last < 8 {
			t.Fatalf("a memory hog under 128MiB: exit %d after %d MiB", code, last)
		}
		t.Logf("a memory hog under 128MiB was killed after %d MiB of heap", last)
	})

	t.Run("CPULimit", func(t *testing.T) {
		p := newProvider(t)
		if l, ok := p.(interface{ Limits() string }); ok && l.Limits() == "" {
			t.Skip("this host cannot enforce resource limits")
		}
		s := spec("cpu-1")
		s.Resources = helmrtype.ResourcesManifest{CPU: 0.2}
		create(t, p, s)
		code, out := run(t, p, s, helper("spin"))
		f := strings.Fields(out)
		if code != 0 || len(f) == 0 {
			t.Fatalf("spin: %d %q", code, out)
		}
		ms, _ := strconv.Atoi(f[0])
		// 1.5 s of wall time at 0.2 CPU is about 300 ms of CPU time.
		if ms > 600 || ms < 100 {
			t.Fatalf("a busy loop limited to 0.2 CPU used %d ms of CPU in 1.5 s", ms)
		}
		t.Logf("busy loop at cpu 0.2: %d ms CPU in 1500 ms", ms)
	})
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent Len.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}
