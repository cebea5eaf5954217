//go:build linux

package checkpoint_test

import (
	"context"
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

	"github.com/helmr-go/helmr/internal/checkpoint"
	"github.com/helmr-go/helmr/internal/computer"
	"github.com/helmr-go/helmr/internal/computer/local"
)

// TestNetworkAndDiskComputers parks a Computer with Network and one
// with a disk limit (its files on an ext4 image of its own), doing by
// hand what the provider must do for them (decision 0024): stop pasta
// before the dump and attach a new one after the restore; mount the disk
// image again and name /workspace and /tmp's sources. It runs with
// HELMR_CHECKPOINT_SPIKE=1 only: the provider does these itself now
// (internal/computer/local TestParkNetwork and TestParkDiskLimited).
func TestNetworkAndDiskComputers(t *testing.T) {
	if os.Getenv("HELMR_CHECKPOINT_SPIKE") == "" {
		t.Skip("set HELMR_CHECKPOINT_SPIKE=1 to run the hand-made version; the provider's own parking is tested by internal/computer/local's TestParkNetwork and TestParkDiskLimited")
	}
	c := probe(t)
	self, _ := os.Executable()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		spec computer.Spec
	}{
		{"network", computer.Spec{ID: "net", Image: computer.Image{Host: true}, Network: true}},
		{"disk", computer.Spec{ID: "disk", Image: computer.Image{Host: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p, err := local.New(local.Options{Dir: filepath.Join(dir, "computers"), CgroupName: "helmr-cp-spike", Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Cleanup()
			spec := tc.spec
			if tc.name == "disk" {
				spec.Resources.Disk = "64MiB"
			}
			if err := p.Create(ctx, spec); err != nil {
				t.Fatal(err)
			}
			defer p.Delete(context.Background(), spec.ID)
			logPath := filepath.Join(dir, "process.log")
			logf, _ := os.Create(logPath)
			pr, err := p.Start(ctx, spec, computer.ProcessSpec{Argv: []string{"/.helmr/agent"}, Env: []string{envCounter + "=1"},
				Binds: []computer.Bind{{Src: self, Dst: "/.helmr/agent"}}, Stdout: logf, Stderr: logf, Restorable: true})
			logf.Close()
			if err != nil {
				t.Fatal(err)
			}
			defer func() { pr.Signal(syscall.SIGKILL); pr.Wait() }()
			waitFor(t, "counter", func() bool { n, _, _ := lastLine(t, logPath); return n >= 3 })
			pid := pr.(restorable).InitPID()
			opts := checkpoint.DumpOptions{}
			if tc.spec.Network {
				// pasta's tap goes with pasta: the namespace keeps lo and its firewall.
				out := killPasta(fmt.Sprintf("/proc/%d/ns/net", pid))
				time.Sleep(50 * time.Millisecond)
				dev, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/dev", pid))
				t.Logf("pasta killed %s; net/dev:\n%s", out, dev)
			}
			if tc.name == "disk" {
				opts.Mounts = []string{"/workspace", "/tmp"}
			}
			cp, err := c.Dump(ctx, pid, filepath.Join(dir, "images"), opts)
			if err != nil {
				t.Fatalf("DUMP: %v", err)
			}
			<-pr.Done()
			t.Logf("dumped %+v", cp.Mounts)
			ro := checkpoint.RestoreOptions{}
			if tc.name == "disk" {
				// The provider unmounted its own mount of the image once
				// the sandbox had its own; a restore mounts it again.
				fs := filepath.Join(dir, "fs")
				os.MkdirAll(fs, 0o755)
				if out, err := exec.Command("mount", "-o", "loop", filepath.Join(dir, "computers", spec.ID, "disk.img"), fs).CombinedOutput(); err != nil {
					t.Fatalf("mount the Computer's disk image: %v %s", err, out)
				}
				defer exec.Command("umount", "-l", fs).Run()
				ro.Mounts = map[string]string{"/workspace": filepath.Join(fs, "workspace"), "/tmp": filepath.Join(fs, "tmp")}
			}
			r, err := c.Restore(ctx, filepath.Join(dir, "images"), ro)
			if err != nil {
				t.Fatalf("RESTORE: %v", err)
			}
			if tc.spec.Network {
				ns := fmt.Sprintf("/proc/%d/ns/", r.PID)
				out, err := exec.Command("pasta", "--runas", "0:0", "--config-net", "--quiet", "--no-map-gw", "--tcp-ports", "none", "--udp-ports", "none", "--tcp-ns", "none", "--udp-ns", "none",
					"--netns", ns+"net", "--userns", ns+"user").CombinedOutput()
				if err != nil {
					t.Fatalf("pasta: %v %s", err, out)
				}
				defer killPasta(ns + "net")
				nft, err := exec.Command("nsenter", "--net="+ns+"net", "nft", "list", "ruleset").CombinedOutput()
				if !strings.Contains(string(nft), "table inet helmr") {
					t.Fatalf("the firewall did not come back: %v\n%s", err, nft)
				}
			}
			n0, _, _ := lastLine(t, logPath)
			time.Sleep(300 * time.Millisecond)
			n1, _, _ := lastLine(t, logPath)
			t.Logf("restored %d: counter %d -> %d", r.PID, n0, n1)
			if n1 <= n0 {
				t.Fatalf("the restored counter does not move: %d, then %d", n0, n1)
			}
			if tc.spec.Network {
				dev, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/dev", r.PID))
				if !strings.Contains(string(dev), "eth0") {
					t.Fatalf("no interface from pasta after the restore:\n%s", dev)
				}
			}
			syscall.Kill(-r.PID, syscall.SIGKILL)
			r.Wait()
		})
	}
}

// killPasta kills the pasta process serving the network namespace ns
// (started by the provider for this test's sandbox, found by its
// command line's --netns) and names its PID.
func killPasta(ns string) string {
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
				if pid, err := strconv.Atoi(e.Name()); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
					return e.Name()
				}
			}
		}
	}
	return ""
}

func itoa(n int) string { return fmt.Sprint(n) }
