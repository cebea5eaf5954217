package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// floors measures what this machine's kernel and disk cost for the work a
// Turn and a cold start cannot avoid, so that figures taken on different
// machines (or in different hours: the speed of a shared VM moves) can be
// read against their floor: an fsync after a small write in the data
// directory (a durable commit makes one), and the rate at which processes
// and sandboxes can be created, alone and by 4 callers at once (a cold
// start creates a bubblewrap sandbox and the agent process in it).
func floors(dir string) error {
	f, err := os.CreateTemp(dir, "fsync-probe-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	page := make([]byte, 4096)
	// Preallocate, so that the writes below change no file size.
	if _, err := f.WriteAt(make([]byte, len(page)*200), 0); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	var ds []time.Duration
	for i := range 500 {
		if _, err := f.WriteAt(page, int64(i%200)*int64(len(page))); err != nil {
			return err
		}
		t := time.Now()
		if err := f.Sync(); err != nil {
			return err
		}
		ds = append(ds, time.Since(t))
	}
	slices.Sort(ds)
	fmt.Printf("floor: fsync after a 4 KiB write in the data directory: p50 %s  p99 %s\n",
		ds[len(ds)/2].Round(time.Microsecond), ds[len(ds)*99/100].Round(time.Microsecond))

	truePath, err := exec.LookPath("true")
	if err != nil {
		return nil
	}
	fmt.Printf("floor: processes started and waited for (%s): %s\n", truePath, spawnRates(truePath))
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		fmt.Println("floor: no bwrap on PATH: no sandbox figure")
		return nil
	}
	// The namespaces of a Computer's sandbox (internal/computer/local),
	// around the same trivial program.
	probe := exec.Command(bwrap, sandboxArgs(truePath)...)
	if err := probe.Run(); err != nil {
		fmt.Printf("floor: bwrap cannot run here (%v): no sandbox figure\n", err)
		return nil
	}
	fmt.Printf("floor: bubblewrap sandboxes started and waited for: %s\n", spawnRates(bwrap, sandboxArgs(truePath)...))
	return nil
}

// sandboxArgs are bwrap's arguments for a sandbox with a Computer's
// namespaces that runs prog.
func sandboxArgs(prog string) []string {
	return []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--unshare-net", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", filepath.Clean(prog)}
}

// spawnRates runs the command to completion 100 times by one caller, then
// by 4 callers at once, and reports the rates.
func spawnRates(name string, args ...string) string {
	rate := func(callers int) float64 {
		const n = 100
		var wg sync.WaitGroup
		t0 := time.Now()
		for range callers {
			wg.Go(func() {
				for range n / callers {
					exec.Command(name, args...).Run()
				}
			})
		}
		wg.Wait()
		return n / time.Since(t0).Seconds()
	}
	return fmt.Sprintf("%.0f/s by 1 caller, %.0f/s by 4", rate(1), rate(4))
}
