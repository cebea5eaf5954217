//go:build linux

package local_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/computer"
	"github.com/helmr-go/helmr/internal/computer/local"
	"golang.org/x/sys/unix"
)

// The escape suite: what a Command or agent code in a Computer would try
// to reach the host, each attempt printed with what it found. Run it alone
// with
//
//	go test ./internal/computer/local -run 'TestEscape|TestNetwork' -v
//
// It needs bubblewrap (and, for the network cases, pasta, nft and unshare).

// canaryEnv is set in the test process before the provider starts: no
// Computer may see it.
const (
	canaryEnv   = "HELMR_ESCAPE_CANARY"
	canaryValue = "host-secret-6f1c2d"
)

// escapeProvider makes a sandboxing provider after the test process got a
// canary variable and an inherited descriptor (not close-on-exec), as a
// control plane started as `exec 7>>/tmp/x.log; helmr server` has. It
// returns the provider, the descriptor's number and the file behind it.
func escapeProvider(t *testing.T) (*local.Provider, int, string) {
	t.Helper()
	t.Setenv(canaryEnv, canaryValue)
	leak := filepath.Join(t.TempDir(), "inherited.log")
	fd, err := syscall.Open(leak, syscall.O_CREAT|syscall.O_WRONLY|syscall.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	p, err := local.New(local.Options{Dir: t.TempDir(), CgroupName: "helmr-test"})
	if errors.Is(err, local.ErrNoSandbox) {
		t.Skipf("needs the bubblewrap sandbox: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Cleanup)
	return p, fd, leak
}

func newComputer(t *testing.T, p *local.Provider, id string, mod func(*computer.Spec)) computer.Spec {
	t.Helper()
	s := computer.Spec{ID: id, Image: computer.Image{Host: true}}
	if mod != nil {
		mod(&s)
	}
	if err := p.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), id) })
	return s
}

// try runs a bash script in the Computer, prints what it tried and found,
// and returns its exit code and output.
func try(t *testing.T, p *local.Provider, s computer.Spec, what, script string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	pr, err := p.Start(context.Background(), s, computer.ProcessSpec{Argv: []string{"/bin/bash", "-c", script}, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatalf("%s: start: %v (the sandbox said %q)", what, err, out.String())
	}
	select {
	case <-pr.Done():
	case <-time.After(60 * time.Second):
		pr.Signal(syscall.SIGKILL)
		t.Fatalf("%s: did not end", what)
	}
	code, err := pr.Wait()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Logf("tried: %s\n  $ %s\n  exit %d: %s", what, script, code, strings.TrimSpace(out.String()))
	return code, out.String()
}

// escapeHelperEnv makes the test binary a probe inside a Computer.
const escapeHelperEnv = "HELMR_ESCAPE_HELPER"

// escapeHelper runs a probe when the binary was started as one.
func escapeHelper() {
	switch os.Getenv(escapeHelperEnv) {
	case "":
		return
	case "fork":
		// Start 100 sleepers (one task each) and say how many the
		// process limit let through.
		started, refused := 0, 0
		var procs []*os.Process
		for range 100 {
			pr, err := os.StartProcess("/bin/sleep", []string{"sleep", "20"}, &os.ProcAttr{})
			if err != nil {
				refused++
				continue
			}
			started++
			procs = append(procs, pr)
		}
		fmt.Printf("started %d refused %d\n", started, refused)
		for _, pr := range procs {
			pr.Kill()
			pr.Wait()
		}
		os.Exit(0)
	case "loopback":
		// Listen on the Computer's own loopback and connect to it.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.Write([]byte("ok"))
				c.Close()
			}
		}()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		b, _ := io.ReadAll(c)
		fmt.Println("own loopback " + string(b))
		os.Exit(0)
	}
	os.Exit(2)
}

func TestEscape(t *testing.T) {
	p, fd, leak := escapeProvider(t)
	s := newComputer(t, p, "escape-1", nil)

	t.Run("EnvironmentOfEveryProcess", func(t *testing.T) {
		_, out := try(t, p, s, "read the environment of PID 1 and of every visible process",
			`for e in /proc/[0-9]*/environ; do echo "== $e"; tr '\0' '\n' < $e; done`)
		if strings.Contains(out, canaryValue) || strings.Contains(out, canaryEnv) {
			t.Fatalf("a Computer read the control plane's environment:\n%s", out)
		}
		if !strings.Contains(out, "/proc/1/environ") {
			t.Fatalf("PID 1's environment was not tried: %q", out)
		}
	})

	t.Run("InheritedDescriptors", func(t *testing.T) {
		code, out := try(t, p, s, fmt.Sprintf("write to the control plane's inherited descriptor %d", fd),
			fmt.Sprintf(`ls -l /proc/self/fd /proc/1/fd; echo escaped >&%d && echo wrote`, fd))
		if b, _ := os.ReadFile(leak); len(b) > 0 || (code == 0 && strings.Contains(out, "wrote")) {
			t.Fatalf("a Computer wrote to an inherited host descriptor (%q): %s", b, out)
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, leak) {
				t.Fatalf("a Computer holds the inherited descriptor: %s", l)
			}
		}
	})

	t.Run("HostFilesOutsideTheAllowlist", func(t *testing.T) {
		secret := filepath.Join(t.TempDir(), "secret")
		os.WriteFile(secret, []byte("host secret"), 0o600)
		for _, f := range []string{secret, "/etc/hostname", "/etc/shadow", "/etc/sudoers", "/etc/machine-id", "/etc/ssh", "/etc/postgresql", "/etc/default",
			"/root", "/home", "/var", "/srv", "/opt", "/mnt", "/run", "/boot", "/sys/fs/cgroup", "/etc/ssl/private"} {
			if _, err := os.Stat(f); err != nil {
				continue // nothing to leak on this host
			}
			code, out := try(t, p, s, "read host path "+f, `ls -A `+f+` 2>&1 | head -5; head -c 200 `+f+` 2>&1`)
			if code == 0 && !strings.Contains(out, "No such file") || strings.Contains(out, "host secret") {
				t.Fatalf("%s is visible in a Computer: %s", f, out)
			}
		}
		// passwd shows the sandbox's accounts, not the host's.
		_, out := try(t, p, s, "list the accounts", `cat /etc/passwd`)
		if !strings.HasPrefix(out, "root:x:0:0:") || strings.Count(out, "\n") > 2 {
			t.Fatalf("/etc/passwd is not the sandbox's: %q", out)
		}
		// What programs need is there.
		for _, f := range []string{"/usr/bin/env", "/etc/resolv.conf", "/etc/ld.so.cache", "/etc/ssl/certs"} {
			if _, err := os.Stat(f); err != nil {
				continue
			}
			if code, out := try(t, p, s, "find "+f, `test -e `+f); code != 0 {
				t.Fatalf("%s is missing in a host image: %s", f, out)
			}
		}
	})

	t.Run("HostLoopback", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		port := ln.Addr().(*net.TCPAddr).Port
		for _, network := range []bool{false, true} {
			s := newComputer(t, p, "escape-net-"+strconv.FormatBool(network), func(s *computer.Spec) { s.Network = network })
			code, out := try(t, p, s, fmt.Sprintf("connect to the host's 127.0.0.1:%d (network %v)", port, network),
				fmt.Sprintf(`timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d' && echo connected`, port))
			if code == 0 || strings.Contains(out, "connected") {
				t.Fatalf("reached the host's loopback (network %v): %s", network, out)
			}
		}
	})

	t.Run("OtherComputers", func(t *testing.T) {
		other := newComputer(t, p, "escape-other", nil)
		var out bytes.Buffer
		pr, err := p.Start(context.Background(), other, computer.ProcessSpec{
			Argv: []string{"/bin/bash", "-c", "echo other-secret > /workspace/mine; exec sleep 30"}, Stdout: &out})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { pr.Signal(syscall.SIGKILL); pr.Wait() }()
		time.Sleep(200 * time.Millisecond)
		_, got := try(t, p, s, "look for another Computer's files and processes",
			`cat /workspace/mine 2>&1; grep -l "other-$(echo secret)" -r / --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr 2>/dev/null | head; cat /proc/[0-9]*/comm`)
		if strings.Contains(got, "other-secret") || strings.Contains(got, "sleep") || strings.Contains(got, "escape-other") {
			t.Fatalf("a Computer sees another's files or processes: %s", got)
		}
	})

	t.Run("MountsPtraceAndPrivileges", func(t *testing.T) {
		code, out := try(t, p, s, "mount a filesystem, remount the root writable", `mount -t tmpfs none /mnt 2>&1 || mount -o remount,rw / 2>&1 || exit 7`)
		if code != 7 {
			t.Fatalf("mount succeeded: %s", out)
		}
		code, out = try(t, p, s, "write to the read-only system", `echo x > /usr/escape 2>&1 || exit 7`)
		if code != 7 {
			t.Fatalf("wrote under /usr: %s", out)
		}
		_, out = try(t, p, s, "read capabilities and no_new_privs", `grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status`)
		if !strings.Contains(out, "CapEff:\t0000000000000000") || !strings.Contains(out, "NoNewPrivs:\t1") {
			t.Fatalf("a Computer has capabilities or may gain privileges: %s", out)
		}
		// The test process is a host process: invisible, so it cannot be
		// traced or signalled.
		host := os.Getpid()
		code, out = try(t, p, s, fmt.Sprintf("find, signal and trace host process %d", host),
			fmt.Sprintf(`ls /proc/%d/root 2>&1; kill -0 %d 2>&1 && exit 0; exit 7`, host, host))
		if code != 7 {
			t.Fatalf("a Computer reached a host process: %s", out)
		}
		// setuid binaries give nothing: no_new_privs.
		if _, err := os.Stat("/usr/bin/su"); err == nil {
			code, out = try(t, p, s, "gain privileges through a setuid binary", `su -c id nobody 2>&1; exit 7`)
			if strings.Contains(out, "uid=65534") {
				t.Fatalf("setuid worked: %s", out)
			}
		}
	})

	t.Run("HostSysctls", func(t *testing.T) {
		// Host root mapped (a control plane running as root), a sandbox's
		// user passes the permission check of the global sysctls, which
		// ask for no capability: kernel.core_pattern names a program the
		// kernel runs as host root on a crash. The value written back is
		// the one read, so nothing changes even where the write works.
		for _, f := range []string{"/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe", "/proc/sysrq-trigger"} {
			if _, err := os.Stat(f); err != nil {
				continue
			}
			code, out := try(t, p, s, "write "+f,
				`test -e `+f+` || exit 7; v=$(cat `+f+` 2>/dev/null); (printf '%s\n' "$v" > `+f+`) 2>&1 || exit 7; echo wrote`)
			if code != 7 || strings.Contains(out, "wrote") {
				t.Fatalf("a Computer wrote the host's %s: %s", f, out)
			}
		}
	})

	t.Run("OptionsInjectedThroughNUL", func(t *testing.T) {
		// bubblewrap reads its options from a pipe, NUL-separated: a NUL
		// in a working directory or an environment value (from an image's
		// config, a Template or a Command) would start an option of its
		// own, such as a bind of the host's root.
		secret := filepath.Join(t.TempDir(), "nul-secret")
		os.WriteFile(secret, []byte("host secret behind a NUL"), 0o600)
		inject := "\x00--ro-bind\x00" + filepath.Dir(secret) + "\x00/tmp/injected"
		for _, ps := range []computer.ProcessSpec{
			{Dir: "/workspace" + inject},
			{Env: []string{"X=x" + inject}},
		} {
			var out bytes.Buffer
			ps.Argv = []string{"/bin/bash", "-c", "cat /tmp/injected/nul-secret 2>&1"}
			ps.Stdout, ps.Stderr = &out, &out
			pr, err := p.Start(context.Background(), s, ps)
			if err != nil {
				t.Logf("tried: options after a NUL (dir %q, env %q): refused: %v", ps.Dir, ps.Env, err)
				continue
			}
			pr.Wait()
			t.Logf("tried: options after a NUL (dir %q, env %q): %s", ps.Dir, ps.Env, out.String())
			if strings.Contains(out.String(), "host secret") {
				t.Fatalf("a NUL in a process's options bound a host directory: %s", out.String())
			}
		}
		img := computer.Image{Host: true, Env: []string{"Y=y" + inject}}
		ns := newComputer(t, p, "escape-nul", func(s *computer.Spec) { s.Image = img })
		var out bytes.Buffer
		if pr, err := p.Start(context.Background(), ns, computer.ProcessSpec{Argv: []string{"/bin/cat", "/tmp/injected/nul-secret"}, Stdout: &out, Stderr: &out}); err == nil {
			pr.Wait()
			if strings.Contains(out.String(), "host secret") {
				t.Fatalf("a NUL in an image's environment bound a host directory: %s", out.String())
			}
		}
	})

	t.Run("OptionValueDashDash", func(t *testing.T) {
		// An environment value "--" is a value, not the end of
		// bubblewrap's options: the process runs, and the variables after
		// it stay off bubblewrap's command line.
		var out bytes.Buffer
		pr, err := p.Start(context.Background(), s, computer.ProcessSpec{Argv: []string{"/bin/bash", "-c", "echo A=$A SECRET=$SECRET"},
			Env: []string{"A=--", "SECRET=s3cret"}, Stdout: &out, Stderr: &out})
		if err != nil {
			t.Fatal(err)
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pr.PID()))
		code, _ := pr.Wait()
		t.Logf("tried: an environment value \"--\": exit %d, %s; bubblewrap's command line %q", code, strings.TrimSpace(out.String()), cmdline)
		if code != 0 || !strings.Contains(out.String(), "A=-- SECRET=s3cret") || bytes.Contains(cmdline, []byte("s3cret")) {
			t.Fatalf("an environment value \"--\": exit %d, %q, command line %q", code, out.String(), cmdline)
		}
	})

	t.Run("WriteOutsideTheWorkspace", func(t *testing.T) {
		// The sandbox's root and /dev are tmpfs mounts (in memory, up to
		// half the host's RAM each, outside any disk limit): neither may be
		// written. /dev/shm is, up to its bound.
		for _, f := range []string{"/escape", "/dev/escape", "/etc/escape"} {
			code, out := try(t, p, s, "write "+f, `echo x > `+f+` 2>&1 || exit 7`)
			if code != 7 {
				t.Fatalf("wrote %s: %s", f, out)
			}
		}
		code, out := try(t, p, s, "write 1 MiB, then 100 MiB, to /dev/shm",
			`head -c 1048576 /dev/zero > /dev/shm/small || exit 3; head -c 104857600 /dev/zero > /dev/shm/big 2>&1; echo size=$(stat -c %s /dev/shm/big)`)
		if code == 3 || !strings.Contains(out, "size=") || strings.Contains(out, "size=104857600") {
			t.Fatalf("/dev/shm is not writable up to its bound: %s", out)
		}
	})

	t.Run("SymlinksOutOfTheWorkspace", func(t *testing.T) {
		secret := filepath.Join(t.TempDir(), "outside")
		os.WriteFile(secret, []byte("outside-secret"), 0o600)
		_, out := try(t, p, s, "follow symlinks out of /workspace",
			`ln -sf `+secret+` /workspace/l1; ln -sf /proc/1/root/../../etc/hostname /workspace/l2; ln -sfn / /workspace/root; cat /workspace/l1 /workspace/l2 2>&1; ls /workspace/root/ 2>&1`)
		if strings.Contains(out, "outside-secret") {
			t.Fatalf("a symlink reached a host file: %s", out)
		}
	})

	t.Run("ProcessLimit", func(t *testing.T) {
		s := newComputer(t, p, "escape-pids", func(s *computer.Spec) { s.Resources = helmrtype.ResourcesManifest{Processes: 32} })
		if p.Limits() == "" {
			t.Skip("this host cannot enforce resource limits")
		}
		// A bounded loop: 100 children, at most 32 tasks (threads
		// included) allowed.
		self, _ := os.Executable()
		var out bytes.Buffer
		pr, err := p.Start(context.Background(), s, computer.ProcessSpec{Argv: []string{"/.helmr-test/escape"},
			Env: []string{escapeHelperEnv + "=fork"}, Binds: []computer.Bind{{Src: self, Dst: "/.helmr-test/escape"}}, Stdout: &out, Stderr: &out})
		if err != nil {
			t.Fatal(err)
		}
		pr.Wait()
		t.Logf("tried: start 100 processes under a limit of 32: %s", strings.TrimSpace(out.String()))
		var started, refused int
		fmt.Sscanf(out.String(), "started %d refused %d", &started, &refused)
		if started == 0 || started > 32 || refused == 0 || started+refused != 100 {
			t.Fatalf("processes under a limit of 32: %q", out.String())
		}
		// The host is untouched: it still starts processes.
		if err := exec.Command("true").Run(); err != nil {
			t.Fatalf("the host cannot start a process: %v", err)
		}
	})

	t.Run("BuildStepLimits", func(t *testing.T) {
		if p.Limits() == "" {
			t.Skip("this host cannot enforce resource limits")
		}
		busybox, err := exec.LookPath("busybox")
		if err != nil {
			t.Skip("no busybox to make a root of")
		}
		root := t.TempDir()
		os.MkdirAll(filepath.Join(root, "bin"), 0o755)
		if b, err := exec.Command("cp", busybox, filepath.Join(root, "bin", "busybox")).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		done := make(chan error, 1)
		go func() {
			done <- p.RunStep(context.Background(), root, []string{"/bin/busybox", "sleep", "2"}, nil, "/", "")
		}()
		// Its group, seen from the host while it runs (inside, its own
		// cgroup namespace shows it as the root).
		var found string
		for deadline := time.Now().Add(2 * time.Second); found == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			for _, pat := range []string{"/sys/fs/cgroup/pids/helmr-test/build-*", "/sys/fs/cgroup/helmr-test/build-*"} {
				dirs, _ := filepath.Glob(pat)
				for _, d := range dirs {
					procs, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
					max, _ := os.ReadFile(filepath.Join(d, "pids.max"))
					if len(strings.TrimSpace(string(procs))) > 0 {
						found = fmt.Sprintf("%s: processes %q, pids.max %s", d, strings.Fields(string(procs)), strings.TrimSpace(string(max)))
					}
				}
			}
		}
		err = <-done
		t.Logf("tried: an image build step's cgroup: %v, %s", err, found)
		if err != nil || !strings.Contains(found, "pids.max 1024") {
			t.Fatalf("an image build step runs outside a process limit: %v %q", err, found)
		}
	})
}

// ttyEnv marks the test binary re-run as the leader of a session whose
// controlling terminal is a pseudo-terminal of the test's own.
const ttyEnv = "HELMR_TEST_TTY"

// TestEscapeTerminal: a control plane started from a shell (helmr dev,
// helmr server in a terminal) has a controlling terminal; no Computer may
// open it (/dev/tty) and type into the user's shell with TIOCSTI.
func TestEscapeTerminal(t *testing.T) {
	if os.Getenv(ttyEnv) == "" {
		needSandbox(t)
		ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
		if err != nil {
			t.Skipf("no pseudo-terminal: %v", err)
		}
		defer ptmx.Close()
		if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
			t.Fatal(err)
		}
		n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
		if err != nil {
			t.Fatal(err)
		}
		pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run", "^TestEscapeTerminal$", "-test.v")
		cmd.Env = append(os.Environ(), ttyEnv+"=1")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pts.Close()
		var out bytes.Buffer
		read := make(chan struct{})
		go func() { io.Copy(&out, ptmx); close(read) }()
		err = cmd.Wait()
		select {
		case <-read:
		case <-time.After(5 * time.Second):
		}
		t.Logf("with a controlling terminal:\n%s", out.String())
		if err != nil || !strings.Contains(out.String(), "--- PASS: TestEscapeTerminal") {
			t.Fatalf("%v", err)
		}
		return
	}
	if f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0); err != nil {
		t.Fatalf("the test has no controlling terminal: %v", err)
	} else {
		f.Close()
	}
	p, _, _ := escapeProvider(t)
	s := newComputer(t, p, "escape-tty", nil)
	// TIOCSTI (0x5412) pushes a byte into the terminal's input, as if the
	// user typed it: the shell that started the control plane reads it.
	_, out := try(t, p, s, "open the control plane's terminal and type into it",
		`exec 3</dev/tty && echo opened-tty; perl -e 'open(T, "+<", "/dev/tty") or die "open: $!\n"; my $c = "#"; ioctl(T, 0x5412, $c) or die "TIOCSTI: $!\n"; print "typed\n"' 2>&1`)
	if strings.Contains(out, "opened-tty") || strings.Contains(out, "typed") {
		t.Fatalf("a Computer reached the control plane's terminal: %s", out)
	}
}
