package e2e

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
)

// processesByComputer counts the live processes on this host of each of
// the Computers, by the HELMR_COMPUTER_ID their launcher sets (a session
// process and anything it started; readable by root).
func processesByComputer(computers map[string]bool) map[string][]int {
	out := map[string][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || isZombie(pid) {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if id, ok := strings.CutPrefix(kv, "HELMR_COMPUTER_ID="); ok && computers[id] {
				out[id] = append(out[id], pid)
			}
		}
	}
	return out
}

// Two nodes on one PostgreSQL database sharing their Computers, under
// load: node 0 is killed (SIGKILL) and started again. Sampled from /proc
// all along, no Session ever has two live processes; after both nodes
// stop with --stop-sessions none is left.
func TestNoSessionHasTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two control planes")
	}
	if os.Geteuid() != 0 {
		t.Skip("reads other processes' environments: needs root")
	}
	db := pgtest.URL(t)
	dir := t.TempDir()
	computersDir := filepath.Join(dir, "computers")
	args := []string{"server", "--database", db, "--lease-ttl", "2s", "--reconnect-window", "2s",
		"--computers-dir", computersDir, "--stop-sessions"}
	n0 := startServer(t, filepath.Join(dir, "node0"), args...)
	n1 := startServer(t, filepath.Join(dir, "node1"), args...)
	cl := &nodes{t: t, srv: []*server{n0, n1}, dirs: []string{filepath.Join(dir, "node0"), filepath.Join(dir, "node1")}, key: n0.key, dead: make([]atomic.Bool, 2)}
	cl.deploy(0)

	const sessions = 8
	var ids []string
	computers := map[string]bool{}
	var mu sync.Mutex
	for i := range sessions {
		var rec helmrtype.SessionCreateReceipt
		cl.must(i%2, "POST", "/v1/sessions", map[string]any{"agent": "echo", "input": text("sleep 1500ms"),
			"idempotency_key": fmt.Sprintf("one-%d", i)}, &rec)
		ids = append(ids, rec.Session.ID)
		for k := range 2 {
			cl.must((i+k+1)%2, "POST", "/v1/sessions/"+rec.Session.ID+"/turns", map[string]any{"input": text("sleep 300ms"),
				"idempotency_key": fmt.Sprintf("one-%d-%d", i, k)}, nil)
		}
	}
	waitFor(t, "every Session's Computer", func() bool {
		for _, id := range ids {
			var s helmrtype.Session
			cl.must(1, "GET", "/v1/sessions/"+id, nil, &s)
			if s.ComputerID == nil {
				return false
			}
			mu.Lock()
			computers[*s.ComputerID] = true
			mu.Unlock()
		}
		return true
	})

	// The sampler: every 20 ms until stopped.
	stop := make(chan struct{})
	sampled := make(chan string, 1)
	go func() {
		worst, samples := "", 0
		for {
			select {
			case <-stop:
				sampled <- fmt.Sprintf("%d samples; %s", samples, worst)
				return
			case <-time.After(20 * time.Millisecond):
			}
			mu.Lock()
			byComputer := processesByComputer(computers)
			mu.Unlock()
			samples++
			for id, pids := range byComputer {
				if len(pids) > 1 && worst == "" {
					worst = fmt.Sprintf("computer %s had processes %v at %s", id, pids, time.Now().Format(time.RFC3339Nano))
				}
			}
		}
	}()

	time.Sleep(500 * time.Millisecond)
	n0.kill()
	cl.dead[0].Store(true)
	time.Sleep(time.Second)
	n0 = startServer(t, cl.dirs[0], args...)
	cl.srv[0] = n0
	cl.dead[0].Store(false)

	// Every Turn ends (those lost with node 0 leave a recovery_gap hold,
	// resumed here).
	deadline := time.Now().Add(90 * time.Second)
	for _, id := range ids {
		for {
			var page helmrtype.TurnPage
			cl.must(1, "GET", "/v1/sessions/"+id+"/turns", nil, &page)
			open := 0
			for _, tr := range page.Turns {
				if !helmrtype.TurnTerminal(tr.Status) {
					open++
				}
			}
			if open == 0 {
				break
			}
			var s helmrtype.Session
			cl.must(1, "GET", "/v1/sessions/"+id, nil, &s)
			for _, h := range s.Holds {
				if h.ID != nil {
					cl.call(1, "POST", "/v1/sessions/"+id+"/resume", map[string]any{"hold_id": *h.ID}, nil)
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("session %s did not settle: %+v", id, page.Turns)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	close(stop)
	if s := <-sampled; strings.Contains(s, "had processes") {
		t.Errorf("a Session had two live processes: %s", s)
	} else {
		t.Logf("sampled /proc: %s", s)
	}

	// Both stop with --stop-sessions: no session process is left.
	for _, s := range []*server{n0, n1} {
		s.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, s := range []*server{n0, n1} {
		select {
		case <-s.done:
		case <-time.After(time.Minute):
			t.Fatalf("a node did not stop: %s", s.output())
		}
	}
	waitForWithin(t, "no session process left", 10*time.Second, func() bool {
		return len(processesByComputer(computers)) == 0
	})
	if left := processesByComputer(computers); len(left) > 0 {
		t.Fatalf("session processes left after both nodes stopped: %v", slices.Collect(maps.Keys(left)))
	}
}
