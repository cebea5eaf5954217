//go:build linux

package checkpoint_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/helmr-go/helmr/internal/checkpoint"
	"github.com/helmr-go/helmr/internal/computer"
	"github.com/helmr-go/helmr/internal/computer/local"
)

// BenchmarkPark parks and restores a Go and a Node counter in the local
// provider's sandbox, one fresh sandbox per iteration, and reports the
// dump and restore times of CRIU, the images' size and the process's RSS
// before the dump (means as metrics; p50 and max in the log). Run it
// with -benchtime=5x; HELMR_BENCH_NOMEM=1 leaves out the memory limit
// (membership of a cgroup v1 memory group makes the dump slower).
func BenchmarkPark(b *testing.B) {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	script := filepath.Join(b.TempDir(), "agent.mjs")
	os.WriteFile(script, []byte(counterJS), 0o644)
	b.Run("go", func(b *testing.B) {
		benchPark(b, []computer.Bind{{Src: self, Dst: "/.helmr/agent"}}, []string{"/.helmr/agent"}, []string{envCounter + "=1"})
	})
	b.Run("node", func(b *testing.B) {
		if _, err := exec.LookPath("node"); err != nil {
			b.Skip("needs node")
		}
		benchPark(b, []computer.Bind{{Src: script, Dst: "/.helmr/agent.mjs"}}, []string{"node", "/.helmr/agent.mjs"}, nil)
	})
}

func benchPark(b *testing.B, binds []computer.Bind, argv, env []string) {
	c, err := checkpoint.Probe(context.Background(), "", nil)
	if err != nil {
		b.Skip(err)
	}
	ctx := context.Background()
	p, err := local.New(local.Options{Dir: filepath.Join(b.TempDir(), "computers"), CgroupName: "helmr-cp-bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Cleanup()
	var dumps, restores, sizes, rsss []float64
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		spec := computer.Spec{ID: fmt.Sprintf("c%d", i), Image: computer.Image{Host: true}}
		if os.Getenv("HELMR_BENCH_NOMEM") == "" {
			spec.Resources.Memory = "1GiB"
		}
		if err := p.Create(ctx, spec); err != nil {
			b.Fatal(err)
		}
		logPath := filepath.Join(dir, "process.log")
		logf, _ := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		pr, err := p.Start(ctx, spec, computer.ProcessSpec{Argv: argv, Env: env, Binds: binds, Stdout: logf, Stderr: logf, Restorable: true})
		logf.Close()
		if err != nil {
			b.Fatal(err)
		}
		pid := pr.(restorable).InitPID()
		for n := 0; n < 5; n, _, _ = lastLineB(logPath) {
			time.Sleep(5 * time.Millisecond)
		}
		rsss = append(rsss, float64(rssKiB(pid))/1024)
		cp, err := c.Dump(ctx, pid, filepath.Join(dir, "images"), checkpoint.DumpOptions{})
		if err != nil {
			b.Fatal(err)
		}
		<-pr.Done()
		nDumped, _, _ := lastLineB(logPath)
		r, err := c.Restore(ctx, filepath.Join(dir, "images"), checkpoint.RestoreOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for n, _, _ := lastLineB(logPath); n <= nDumped; n, _, _ = lastLineB(logPath) {
			time.Sleep(2 * time.Millisecond)
		}
		syscall.Kill(-r.PID, syscall.SIGKILL)
		r.Wait()
		p.Delete(ctx, spec.ID)
		dumps = append(dumps, ms(cp.Took))
		restores = append(restores, ms(r.Took))
		sizes = append(sizes, float64(cp.Bytes)/(1<<20))
	}
	b.ReportMetric(mean(dumps), "dump-ms")
	b.ReportMetric(mean(restores), "restore-ms")
	b.ReportMetric(mean(sizes), "image-MiB")
	b.ReportMetric(mean(rsss), "rss-MiB")
	b.Logf("n=%d dump ms p50 %.0f max %.0f; restore ms p50 %.0f max %.0f; image MiB p50 %.1f max %.1f; RSS MiB p50 %.1f max %.1f",
		b.N, p50(dumps), slices.Max(dumps), p50(restores), slices.Max(restores), p50(sizes), slices.Max(sizes), p50(rsss), slices.Max(rsss))
}

func lastLineB(path string) (int, string, string) {
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

func rssKiB(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func p50(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
