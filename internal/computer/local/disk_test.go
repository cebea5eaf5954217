//go:build linux

package local_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/computer"
	"github.com/helmr-go/helmr/internal/computer/local"
)

// imagesHere says whether this host gives Computers with a disk limit a
// filesystem of their own (root, loop devices, mkfs.ext4), as the
// provider decides.
func imagesHere() bool {
	if os.Geteuid() != 0 {
		return false
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return false
	}
	for _, p := range []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	_, err := exec.LookPath("mkfs.ext4")
	return err == nil
}

// hostBytes is what the files under dir take of the host's disk.
func hostBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := e.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// mountsUnder lists the host's mounts under dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], dir) {
			out = append(out, f[4])
		}
	}
	return out
}

// loopsOf lists the loop devices whose backing file is under dir.
func loopsOf(dir string) []string {
	var out []string
	matches, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, m := range matches {
		if b, err := os.ReadFile(m); err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), dir) {
			out = append(out, m)
		}
	}
	return out
}

// waitNoLoops waits until no loop device is bound to a file under dir (a
// loop device clears itself once its filesystem's last mount went).
func waitNoLoops(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(loopsOf(dir)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if l := loopsOf(dir); len(l) > 0 {
		t.Fatalf("loop devices left after the Computer's processes ended: %q", l)
	}
}

// start starts a bash script and returns the process and its output.
func start(t *testing.T, p *local.Provider, s computer.Spec, script string) (computer.Process, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	pr, err := p.Start(context.Background(), s, computer.ProcessSpec{Argv: []string{"/bin/bash", "-c", script}, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatalf("start %q: %v", script, err)
	}
	return pr, &out
}

// waitEnd waits for pr and returns its exit code and error.
func waitEnd(t *testing.T, pr computer.Process) (int, error) {
	t.Helper()
	select {
	case <-pr.Done():
	case <-time.After(60 * time.Second):
		pr.Signal(syscall.SIGKILL)
		t.Fatal("the process did not end within 60 s")
	}
	return pr.Wait()
}

// TestEscapeDisk: a Computer with a disk limit cannot take more of the
// host's disk than a little past it, however it writes (many files, one
// file, fallocate), and its processes are stopped with limit_exceeded once
// past it. On a host that can, the Computer's files are on a filesystem of
// its own that stays mounted on the host only while a process starts.
func TestEscapeDisk(t *testing.T) {
	dir := t.TempDir()
	p, err := local.New(local.Options{Dir: dir, CgroupName: "helmr-test"})
	if errors.Is(err, local.ErrNoSandbox) {
		t.Skipf("needs the bubblewrap sandbox: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Cleanup)
	images := imagesHere()
	limited := func(s *computer.Spec) { s.Resources = helmrtype.ResourcesManifest{Disk: "8MiB"} }
	const limit = 8 << 20

	t.Run("ManyFiles", func(t *testing.T) {
		s := newComputer(t, p, "disk-many", limited)
		pr, out := start(t, p, s, "for i in $(seq 64); do head -c 1048576 /dev/zero > /workspace/f$i; sleep 0.1; done; echo finished")
		code, err := waitEnd(t, pr)
		t.Logf("tried: write 64 files of 1 MiB under a disk limit of 8MiB: exit %d, %v, %q", code, err, out.String())
		if helmrtype.CodeOf(err) != helmrtype.CodeLimitExceeded || strings.Contains(out.String(), "finished") {
			t.Fatalf("want a limit_exceeded error, got exit %d, %v", code, err)
		}
		// A new process is refused until files are removed.
		if _, err := p.Start(context.Background(), s, computer.ProcessSpec{Argv: []string{"/bin/true"}}); helmrtype.CodeOf(err) != helmrtype.CodeLimitExceeded {
			t.Fatalf("a process started on a Computer past its disk limit: %v", err)
		}
	})

	t.Run("OneFile", func(t *testing.T) {
		s := newComputer(t, p, "disk-one", limited)
		_, out := try(t, p, s, "write one 64 MiB file under a disk limit of 8MiB", `head -c 67108864 /dev/zero > /workspace/big; echo exit=$?; stat -c size=%s /workspace/big`)
		if !strings.Contains(out, "size=") || strings.Contains(out, "size=67108864") {
			t.Fatalf("one file under a disk limit of 8MiB: %q", out)
		}
	})

	t.Run("Fallocate", func(t *testing.T) {
		if !images {
			t.Skip("plain directories: fallocate passes the limit between two measurements on this host")
		}
		s := newComputer(t, p, "disk-fallocate", limited)
		// Blocks reserved at once, each file under the file size limit,
		// and 16 writers in parallel: the ways to pass a measured limit
		// before it is measured.
		pr, out := start(t, p, s, `for i in $(seq 64); do fallocate -l 7M /workspace/f$i || break; done; echo reserved=$i
for i in $(seq 16); do head -c 7340032 /dev/zero > /tmp/w$i & done; wait; sleep 5; echo finished`)
		code, err := waitEnd(t, pr)
		// What the image takes once written back: its loop device goes
		// (and flushes) with the Computer's last process.
		cdir := filepath.Join(dir, s.ID)
		waitNoLoops(t, cdir)
		used := hostBytes(cdir)
		fi, serr := os.Stat(filepath.Join(cdir, "disk.img"))
		if serr != nil || fi.Size() > 3*limit {
			t.Fatalf("the image of a Computer with a disk limit of 8MiB: %v %v", fi, serr)
		}
		t.Logf("tried: fallocate 64 files of 7 MiB, then 16 writers of 7 MiB at once, under a disk limit of 8MiB: exit %d, %v, %q; the Computer takes %d bytes of the host's disk",
			code, err, out.String(), used)
		if helmrtype.CodeOf(err) != helmrtype.CodeLimitExceeded || strings.Contains(out.String(), "finished") {
			t.Fatalf("want a limit_exceeded error, got exit %d, %v", code, err)
		}
		// The image's size bounds it: the limit, 8 MiB of room past it,
		// and ext4's own.
		if used > 3*limit {
			t.Fatalf("a Computer with a disk limit of 8MiB takes %d bytes of the host's disk", used)
		}
	})

	t.Run("Lifecycle", func(t *testing.T) {
		if !images {
			t.Skip("plain directories on this host")
		}
		s := newComputer(t, p, "disk-life", limited)
		cdir := filepath.Join(dir, s.ID)
		if _, err := os.Stat(filepath.Join(cdir, "disk.img")); err != nil {
			t.Fatalf("a Computer with a disk limit has no image: %v", err)
		}
		if m := mountsUnder(t, dir); len(m) > 0 {
			t.Fatalf("mounted on the host after Create: %q", m)
		}
		// A process runs with its files; the host sees no mount of them
		// meanwhile.
		pr, out := start(t, p, s, "echo kept > /workspace/kept; echo tmp > /tmp/kept; sleep 30")
		time.Sleep(200 * time.Millisecond)
		if m := mountsUnder(t, dir); len(m) > 0 {
			t.Fatalf("mounted on the host while a process runs: %q", m)
		}
		// A second control plane on the same directory (a restart while
		// the session process survives) uses the same loop device: two
		// over one file would corrupt it.
		p2, err := local.New(local.Options{Dir: dir, CgroupName: "helmr-test"})
		if err != nil {
			t.Fatal(err)
		}
		_, got := try(t, p2, s, "read a running Computer's files after a restart", "cat /workspace/kept /tmp/kept; echo again >> /workspace/kept")
		if got != "kept\ntmp\n" {
			t.Fatalf("after a restart: %q", got)
		}
		if l := loopsOf(cdir); len(l) != 1 {
			t.Fatalf("loop devices over one image: %q", l)
		}
		pr.Signal(syscall.SIGKILL)
		waitEnd(t, pr)
		t.Logf("the first process: %q", out.String())
		// Once its processes ended, nothing of it is mounted or bound.
		waitNoLoops(t, cdir)
		// Its files stay for the next process.
		if _, got := try(t, p, s, "read the files again", "cat /workspace/kept"); got != "kept\nagain\n" {
			t.Fatalf("the files after the processes ended: %q", got)
		}
		if err := p.Delete(context.Background(), s.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(cdir); !os.IsNotExist(err) {
			t.Fatalf("a deleted Computer's directory: %v", err)
		}
		if m := mountsUnder(t, dir); len(m) > 0 {
			t.Fatalf("mounted on the host after Delete: %q", m)
		}
	})

	t.Run("NoLimit", func(t *testing.T) {
		// Without a disk limit a Computer has plain directories.
		s := newComputer(t, p, "disk-none", nil)
		if _, err := os.Stat(filepath.Join(dir, s.ID, "disk.img")); err == nil {
			t.Fatal("a Computer without a disk limit has an image")
		}
		if _, got := try(t, p, s, "write without a disk limit", "head -c 16777216 /dev/zero > /workspace/f && stat -c %s /workspace/f"); got != "16777216\n" {
			t.Fatalf("without a disk limit: %q", got)
		}
	})
}
