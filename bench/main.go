// Command bench measures the control plane end to end: a real `helmr
// server` process, a real agent program in session processes, and HTTP
// load from this process. It prints warm-Turn latency, throughput for one
// and for many Sessions, server RSS after the run, and store bytes per Turn.
//
//	go run ./bench [-agent go|ts] [-turns 10000] [-sessions 100] [-callers 20] [-trace]
//	go run ./bench -concurrent-cold 20s [-cold-callers 50]   # adds the concurrent cold-start phase
//	go run ./bench -idle-sessions 1000000                     # adds the idle-Sessions phase (minutes)
//	go run ./bench -park-sessions 10000                       # parking phase with 10,000 parked Sessions (-park=false skips it)
//
// -trace runs the server with tracing on, exporting OTLP/HTTP to a sink in
// this process that counts the spans (docs/observability.md).
//
// -agent ts runs the same echo Agent written in TypeScript (bench/ts-agent,
// bundled by @helmr/sdk and run by Node); it needs a built sdk/typescript.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cputime"
	"github.com/helmr-go/helmr/internal/deploy"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
)

var cpuProfile, storeKind, agentKind string
var pgTCP, tracing bool

// oneRequest makes a Turn one request (POST …/turns?wait=) instead of an
// enqueue and a GET …/wait.
var oneRequest bool

// coldFor and coldCallers shape the concurrent cold-start phase (skipped
// when coldFor is 0); nIdle is the idle-Sessions phase's count (0 skips);
// measureFloors runs floors before the server starts.
var (
	coldFor       time.Duration
	coldCallers   int
	nIdle         int
	measureFloors bool
)

func main() {
	turns := flag.Int("turns", 10000, "Turns in the throughput phase over many Sessions")
	sessions := flag.Int("sessions", 100, "Sessions in the many-Session phase")
	callers := flag.Int("callers", 20, "concurrent callers")
	warm := flag.Int("warm", 2000, "sequential warm Turns for the latency phase")
	flag.IntVar(&nFires, "fires", 10, "cron fires in the cron phase (a trigger every second; 0 skips it)")
	cold := flag.Int("cold", 50, "sequential cold starts (a new Session on a new Computer) for the cold-start phase")
	syncMode := flag.String("sqlite-synchronous", "FULL", "SQLite synchronous mode of the server")
	keep := flag.Bool("keep", false, "keep the temporary directory")
	flag.StringVar(&storeKind, "store", "sqlite", "the server's store: sqlite, or postgres (a temporary PostgreSQL server is started)")
	flag.BoolVar(&pgTCP, "pg-tcp", false, "connect to PostgreSQL over loopback TCP instead of its Unix socket")
	flag.StringVar(&agentKind, "agent", "go", "the agent program: go (bench/agent) or ts (bench/ts-agent: @helmr/sdk under Node)")
	flag.StringVar(&cpuProfile, "server-cpu-profile", "", "write the server's CPU profile to this file")
	flag.BoolVar(&tracing, "trace", false, "run the server with tracing on, exporting to an OTLP/HTTP sink in this process")
	flag.BoolVar(&oneRequest, "one-request", true, "enqueue and wait in one request (POST …/turns?wait=30s); false: POST …/turns, then GET …/wait")
	flag.DurationVar(&coldFor, "concurrent-cold", 0, "run the concurrent cold-start phase this long (0 skips it; the issue's figure is 20s)")
	flag.IntVar(&coldCallers, "cold-callers", 50, "callers of the concurrent cold-start phase, each creating a new Session with input and waiting for its first Turn")
	flag.BoolVar(&measureFloors, "floors", true, "first measure the machine's floors: an fsync, and processes and sandboxes started per second")
	flag.IntVar(&nIdle, "idle-sessions", 0, "create this many idle Sessions (no input), then measure RSS, a warm Turn, and a restart to ready (0 skips it)")
	flag.BoolVar(&parkOn, "park", true, "run the parking phase: park and restore latency, checkpoint images, parked Sessions at once (skipped, saying so, where the server cannot checkpoint)")
	flag.IntVar(&parkSamples, "park-samples", 20, "park-and-restore samples of the parking phase (over 5 Sessions, each parked several times)")
	flag.IntVar(&parkSessions, "park-sessions", 200, "Sessions the parking phase parks at once (density; 0 skips that part)")
	flag.IntVar(&parkWindow, "park-window", 16, "at most this many of the density Sessions are started and not yet parked at a time")
	flag.StringVar(&parkCRIU, "criu", "auto", "the server's --criu: auto, a path to criu, or off (parking off: the parking phase is skipped)")
	flag.Parse()
	if err := run(*turns, *sessions, *callers, *warm, *cold, *syncMode, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type client struct {
	url, key string
	hc       *http.Client
}

// nFires is the number of cron fires the cron phase waits for.
var nFires int

// cronPhase deploys bench/cronagent (a trigger every second) and measures,
// for n fires, how long after its occurrence (a whole second) each
// Session was admitted, and when its first Turn settled.
func cronPhase(c *client, dir string, n int) error {
	b, err := deploy.BuildDir(context.Background(), "./bench/cronagent", dir)
	if err != nil {
		return err
	}
	if err := upload(c, b); err != nil {
		return err
	}
	var admit, settle []time.Duration
	deadline := time.Now().Add(time.Duration(n)*time.Second + time.Minute)
	seen := map[string]bool{}
	for len(settle) < n && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		var page helmrtype.SessionPage
		if err := c.do("GET", "/v1/sessions?agent=ticker&limit=100", nil, &page); err != nil {
			return err
		}
		for _, s := range page.Sessions {
			if seen[s.ID] || s.InitialTurn == nil {
				continue
			}
			var ts helmrtype.TurnState
			if err := c.do("GET", "/v1/sessions/"+s.ID+"/turns/"+s.InitialTurn.ID, nil, &ts); err != nil {
				return err
			}
			if ts.TerminalAt == nil {
				continue
			}
			seen[s.ID] = true
			occurrence := s.CreatedAt.Truncate(time.Second)
			admit = append(admit, s.CreatedAt.Sub(occurrence))
			settle = append(settle, ts.TerminalAt.Sub(occurrence))
		}
	}
	if len(settle) == 0 {
		return fmt.Errorf("cron phase: no fire within %s", time.Duration(n)*time.Second+time.Minute)
	}
	slices.Sort(admit)
	slices.Sort(settle)
	fmt.Printf("cron fire (occurrence → Session admitted, %d fires of a trigger every second): p50 %s  max %s; → first Turn settled: p50 %s  max %s\n",
		len(admit), admit[len(admit)/2].Round(time.Microsecond), admit[len(admit)-1].Round(time.Microsecond),
		settle[len(settle)/2].Round(time.Microsecond), settle[len(settle)-1].Round(time.Microsecond))
	return nil
}

func (c *client) do(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// admitWait is the query of an admission that also waits for its Turn.
func admitWait() string {
	if oneRequest {
		return "?wait=30s"
	}
	return ""
}

// turn enqueues one Turn and waits until it settles.
func (c *client) turn(sessionID, text string) error {
	var ts helmrtype.TurnState
	in, _ := json.Marshal(helmrtype.Text(text))
	if err := c.do("POST", "/v1/sessions/"+sessionID+"/turns"+admitWait(), helmrtype.EnqueueRequest{Input: in}, &ts); err != nil {
		return err
	}
	return c.finished(&ts)
}

// finished waits for the Turn ts to complete, unless ts shows it settled.
func (c *client) finished(ts *helmrtype.TurnState) error {
	if helmrtype.TurnTerminal(ts.Status) {
		if ts.Status != helmrtype.TurnCompleted {
			return fmt.Errorf("turn %s: %s %+v", ts.ID, ts.Status, ts.Error)
		}
		return nil
	}
	return c.settled(ts.SessionID, ts.ID)
}

// coldStart creates a Session with input (a new Computer from the cached
// Template, a sandboxed process, init, the first Turn) and waits for its
// first Turn to settle; it then cancels the Session.
func (c *client) coldStart() (time.Duration, error) {
	in, _ := json.Marshal(helmrtype.Text("cold"))
	t0 := time.Now()
	var rec helmrtype.SessionCreateReceipt
	if err := c.do("POST", "/v1/sessions"+admitWait(), helmrtype.SessionCreateRequest{Agent: "echo", Input: in}, &rec); err != nil {
		return 0, err
	}
	if rec.Turn.SessionID == "" {
		rec.Turn.SessionID = rec.Session.ID
	}
	if err := c.finished(rec.Turn); err != nil {
		return 0, err
	}
	d := time.Since(t0)
	return d, c.do("POST", "/v1/sessions/"+rec.Session.ID+"/cancel", struct{}{}, nil)
}

// settled waits for a Turn to complete.
func (c *client) settled(sessionID, turnID string) error {
	ts := helmrtype.TurnState{ID: turnID}
	for {
		var w helmrtype.TimedTurnWaitResult
		if err := c.do("GET", "/v1/sessions/"+sessionID+"/turns/"+ts.ID+"/wait?timeout=30s", nil, &w); err != nil {
			return err
		}
		if w.Status == helmrtype.WaitSettled {
			if w.Outcome.Status != helmrtype.TurnCompleted {
				return fmt.Errorf("turn %s: %s %+v", ts.ID, w.Outcome.Status, w.Outcome.Error)
			}
			return nil
		}
	}
}

func run(nTurns, nSessions, nCallers, nWarm, nCold int, syncMode string, keep bool) error {
	dir, err := os.MkdirTemp("", "helmr-bench-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	pkg := map[string]string{"go": "./bench/agent", "ts": "./bench/ts-agent"}[agentKind]
	if pkg == "" {
		return fmt.Errorf("-agent %q: want go or ts", agentKind)
	}
	fmt.Printf("building helmr and the bench agent (%s) in %s\n", pkg, dir)
	helmrBin := filepath.Join(dir, "helmr")
	cmd := exec.Command("go", "build", "-o", helmrBin, "./cmd/helmr")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/helmr: %w", err)
	}
	agent, err := deploy.BuildDir(context.Background(), pkg, filepath.Join(dir, "artifacts"))
	if err != nil {
		return err
	}
	fmt.Printf("agent: %s (sdk %s, runtime %q)\n", agentKind, agent.Manifest.SDK, agent.Manifest.Runtime)
	if measureFloors {
		if err := floors(dir); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	data := filepath.Join(dir, "data")
	keyFile := filepath.Join(dir, "api-key")
	args := []string{"server", "--addr", addr, "--data-dir", data, "--api-key-file", keyFile, "--log-level", "warn", "--stop-sessions", "--sqlite-synchronous", syncMode, "--criu", parkCRIU}
	if cpuProfile != "" {
		abs, _ := filepath.Abs(cpuProfile)
		args = append(args, "--cpu-profile", abs)
	}
	var pgPID int // the PostgreSQL server's postmaster
	switch storeKind {
	case "sqlite":
	case "postgres":
		pg, err := pgtest.Start()
		if err != nil {
			return fmt.Errorf("start PostgreSQL: %w", err)
		}
		defer pg.Stop()
		pgPID = pg.PID()
		name, err := pg.CreateDatabase(context.Background())
		if err != nil {
			return err
		}
		if pgTCP {
			args = append(args, "--database", pg.DatabaseURL(name))
			fmt.Printf("store: PostgreSQL on port %d (fsync off, as in tests)\n", pg.Port())
		} else {
			args = append(args, "--database", pg.SocketURL(name))
			fmt.Printf("store: PostgreSQL on a Unix socket (fsync off, as in tests)\n")
		}
	default:
		return fmt.Errorf("-store %q: want sqlite or postgres", storeKind)
	}
	var env []string
	if tracing {
		sink, err := startSink()
		if err != nil {
			return err
		}
		defer sink.report()
		env = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + sink.url, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"}
		fmt.Printf("tracing: on, OTLP/HTTP to a sink at %s\n", sink.url)
	}
	srv, _, err := startServer(helmrBin, args, env)
	if err != nil {
		return err
	}
	defer func() {
		srv.Process.Signal(os.Interrupt)
		srv.Wait()
	}()
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return err
	}
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}
	c := &client{url: "http://" + addr, key: strings.TrimSpace(string(key)), hc: &http.Client{Transport: tr}}
	if err := upload(c, agent); err != nil {
		return err
	}

	// Warm-Turn latency: one Session, one caller, sequential Turns.
	var rec helmrtype.SessionCreateReceipt
	if err := c.do("POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "echo"}, &rec); err != nil {
		return err
	}
	for i := 0; i < 20; i++ { // start and warm the process
		if err := c.turn(rec.Session.ID, "warm"); err != nil {
			return err
		}
	}
	lat := make([]time.Duration, 0, nWarm)
	for i := 0; i < nWarm; i++ {
		t0 := time.Now()
		if err := c.turn(rec.Session.ID, "x"); err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("warm turn round trip (enqueue → settled, %d sequential): p50 %s  p99 %s\n", nWarm,
		lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond))

	// Cold starts: a new Session on a new Computer each, one at a time.
	colds := make([]time.Duration, 0, nCold)
	for i := 0; i < nCold; i++ {
		d, err := c.coldStart()
		if err != nil {
			return err
		}
		colds = append(colds, d)
	}
	if len(colds) > 0 {
		sort.Slice(colds, func(i, j int) bool { return colds[i] < colds[j] })
		fmt.Printf("cold start (create → new Computer → sandboxed process → init → first Turn settled, %d sequential): p50 %s  p99 %s\n",
			nCold, colds[len(colds)/2].Round(time.Microsecond), colds[len(colds)*99/100].Round(time.Microsecond))
	}

	// Throughput over one Session.
	one := nTurns / 5
	tps, err := load(c, []string{rec.Session.ID}, one, nCallers)
	if err != nil {
		return err
	}
	fmt.Printf("throughput, 1 session, %d callers: %.0f turns/s (%d turns)\n", nCallers, tps, one)

	// Throughput over many Sessions.
	ids := make([]string, nSessions)
	for i := range ids {
		var r helmrtype.SessionCreateReceipt
		if err := c.do("POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "echo"}, &r); err != nil {
			return err
		}
		ids[i] = r.Session.ID
	}
	if _, err := load(c, ids, nSessions, nCallers); err != nil { // start every process
		return err
	}
	srvCPU0, selfCPU0, agentCPU0, pgCPU0 := cpuTime(srv.Process.Pid), selfCPU(), descendantsCPU(srv.Process.Pid), pgCPU(pgPID)
	t0 := time.Now()
	tps, err = load(c, ids, nTurns, nCallers)
	if err != nil {
		return err
	}
	wall := time.Since(t0).Seconds()
	fmt.Printf("throughput, %d sessions, %d callers: %.0f turns/s (%d turns)\n", nSessions, nCallers, tps, nTurns)
	perTurn := func(sec float64) string {
		return fmt.Sprintf("%.0f%% of a core, %.0f µs per Turn", 100*sec/wall, sec/float64(nTurns)*1e6)
	}
	fmt.Printf("  CPU during that phase: server %s; agent processes %s; load generator %s",
		perTurn(cpuTime(srv.Process.Pid)-srvCPU0), perTurn(descendantsCPU(srv.Process.Pid)-agentCPU0), perTurn(selfCPU()-selfCPU0))
	if storeKind == "postgres" {
		fmt.Printf("; PostgreSQL %s", perTurn(pgCPU(pgPID)-pgCPU0))
	}
	fmt.Println()

	total := 20 + nWarm + nCold + one + nSessions + nTurns
	fmt.Printf("server CPU over the whole run: %.0f µs per turn\n", cpuTime(srv.Process.Pid)/float64(total)*1e6)
	fmt.Printf("server RSS after %d turns: %.1f MB\n", total, float64(rss(srv.Process.Pid))/(1<<20))
	if coldFor > 0 {
		if err := coldPhase(c, srv.Process.Pid, coldFor, coldCallers); err != nil {
			return err
		}
	}
	if nFires > 0 {
		if err := cronPhase(c, filepath.Join(dir, "cron-artifacts"), nFires); err != nil {
			return err
		}
	}
	srv.Process.Signal(os.Interrupt)
	srv.Wait()
	if storeKind == "sqlite" { // the store's size is measured for SQLite's file only
		var size int64
		for _, f := range []string{"helmr.db", "helmr.db-wal"} {
			if st, err := os.Stat(filepath.Join(data, f)); err == nil {
				size += st.Size()
			}
		}
		fmt.Printf("store bytes per turn: %.0f (%d bytes for %d turns, after checkpoint)\n", float64(size)/float64(total), size, total)
	}
	if nIdle > 0 && storeKind == "sqlite" {
		if err := idlePhase(c, helmrBin, args, &srv, rec.Session.ID, nIdle, nCallers); err != nil {
			return err
		}
		srv.Process.Signal(os.Interrupt)
		srv.Wait()
	}
	if parkOn {
		return parkPhase(c, helmrBin, args, &srv, data)
	}
	return nil
}

// startServer starts helmr with args and returns once it listens, with
// how long that took.
func startServer(bin string, args, env []string) (*exec.Cmd, time.Duration, error) {
	srv := exec.Command(bin, args...)
	srv.Env = append(os.Environ(), env...)
	srv.Stderr = os.Stderr
	stdout, _ := srv.StdoutPipe()
	t0 := time.Now()
	if err := srv.Start(); err != nil {
		return nil, 0, err
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "listening") {
			break
		}
	}
	d := time.Since(t0)
	go io.Copy(io.Discard, stdout)
	return srv, d, nil
}

// warmP50 runs n sequential Turns on a Session (after 20 to start and
// warm its process) and returns their median round trip.
func warmP50(c *client, sessionID string, n int) (time.Duration, error) {
	for i := 0; i < 20; i++ {
		if err := c.turn(sessionID, "warm"); err != nil {
			return 0, err
		}
	}
	lat := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := c.turn(sessionID, "x"); err != nil {
			return 0, err
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	return lat[len(lat)/2], nil
}

// idlePhase starts the server again on the run's data, creates n idle
// Sessions (no input) with callers concurrent callers, and measures the
// server's RSS and a warm Turn on the Session busy, then stops and starts
// the server on that store: start-up to listening and to /readyz, RSS,
// and the warm Turn again.
func idlePhase(c *client, bin string, args []string, srv **exec.Cmd, busy string, n, callers int) error {
	s, _, err := startServer(bin, args, nil)
	if err != nil {
		return err
	}
	*srv = s
	t0 := time.Now()
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < callers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := c.do("POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "echo"}, nil); err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	took := time.Since(t0)
	fmt.Printf("idle sessions: created %d (no input) in %s, %.0f/s, %d callers\n", n, took.Round(time.Second), float64(n)/took.Seconds(), callers)
	p50, err := warmP50(c, busy, 1000)
	if err != nil {
		return err
	}
	fmt.Printf("  with them: server RSS %.1f MB; warm turn p50 %s on another Session\n", float64(rss(s.Process.Pid))/(1<<20), p50.Round(time.Microsecond))
	s.Process.Signal(os.Interrupt)
	s.Wait()
	t0 = time.Now()
	s, listening, err := startServer(bin, args, nil)
	if err != nil {
		return err
	}
	*srv = s
	for {
		resp, err := c.hc.Get(c.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	ready := time.Since(t0)
	rssStart := rss(s.Process.Pid)
	p50, err = warmP50(c, busy, 1000)
	if err != nil {
		return err
	}
	fmt.Printf("  restart on them: start-up to listening %s, to ready %s; server RSS %.1f MB after start, %.1f MB after 1,020 Turns; warm turn p50 %s\n",
		listening.Round(time.Millisecond), ready.Round(time.Millisecond), float64(rssStart)/(1<<20), float64(rss(s.Process.Pid))/(1<<20), p50.Round(time.Microsecond))
	return nil
}

// coldPhase runs callers concurrent callers for d, each creating a new
// Session with input (a new Computer, a sandboxed process, init, the
// first Turn) and waiting for its first Turn, then cancelling it; it
// prints Sessions/s and the latency of create → first Turn settled.
func coldPhase(c *client, srvPID int, d time.Duration, callers int) error {
	srv0, _ := readStat(srvPID)
	machine0 := machineCPU()
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < callers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(t0) < d {
				l, err := c.coldStart()
				mu.Lock()
				if err != nil {
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					return
				}
				lat = append(lat, l)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	wall := time.Since(t0)
	if firstErr != nil {
		return firstErr
	}
	slices.Sort(lat)
	fmt.Printf("concurrent cold starts (%d callers for %s, each a new Session with input → first Turn settled): %.1f sessions/s (%d); p50 %s  p99 %s\n",
		callers, d, float64(len(lat))/wall.Seconds(), len(lat), lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*99/100].Round(time.Millisecond))
	// Sandboxes and agent processes end within the phase (each Session is
	// cancelled): the server reaps each bubblewrap process, whose CPU
	// includes what it reaped itself. An agent killed with its sandbox is
	// reaped by the host's init instead, so its CPU counts in the rest of
	// the machine, with the load generator's and the kernel threads'.
	per := func(sec float64) string {
		return fmt.Sprintf("%.1f ms per cold start (%.0f%% of a core)", sec/float64(len(lat))*1e3, 100*sec/wall.Seconds())
	}
	srv1, _ := readStat(srvPID)
	own, reaped := srv1.cpu-srv0.cpu, srv1.children-srv0.children
	fmt.Printf("  CPU during that phase: server %s; the sandboxes it reaped %s; the rest of the machine (agents, load generator, kernel) %s\n",
		per(own), per(reaped), per(machineCPU()-machine0-own-reaped))
	return nil
}

// machineCPU is the CPU seconds every core of the machine has spent busy
// (user, nice, system, irq and softirq time; not idle, iowait, or time
// the hypervisor gave to others), from /proc/stat.
func machineCPU() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var busy float64
	for i := 1; i < len(f) && i <= 7; i++ {
		if i == 4 || i == 5 {
			continue
		}
		n, _ := strconv.ParseFloat(f[i], 64)
		busy += n
	}
	return busy / 100 // USER_HZ is 100 on Linux
}

// load runs n Turns spread over sessions by callers concurrent callers; a
// Session takes one Turn at a time, so callers pick Sessions round-robin.
func load(c *client, sessions []string, n, callers int) (float64, error) {
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < callers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if err := c.turn(sessions[int(i)%len(sessions)], "t"); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(t0).Seconds(), firstErr
}

// upload publishes the built agent program, with its manifest (whose
// runtime tells the server how to run the artifact).
func upload(c *client, b *deploy.Built) error {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mf, _ := mw.CreateFormField("manifest")
	if err := json.NewEncoder(mf).Encode(b.Manifest); err != nil {
		return err
	}
	fw, _ := mw.CreateFormFile("binary", "agent")
	f, err := os.Open(b.Binary)
	if err != nil {
		return err
	}
	io.Copy(fw, f)
	f.Close()
	mw.Close()
	req, _ := http.NewRequest("POST", c.url+"/v1/deployments", &body)
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 201 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("deploy: %d %s", resp.StatusCode, b)
	}
	return nil
}

// procStat is what the benchmark reads of /proc/PID/stat: the parent,
// the user+system CPU seconds of the process, and those of its children
// that it reaped.
type procStat struct {
	pid, ppid     int
	cpu, children float64
}

// readStat reads /proc/PID/stat; false when the process is gone.
func readStat(pid int) (procStat, bool) {
	st, ok := cputime.Read(pid)
	return procStat{pid: pid, ppid: st.PPID, cpu: st.CPU.Seconds(), children: st.Children.Seconds()}, ok
}

// cpuTime is a process's user+system CPU seconds.
func cpuTime(pid int) float64 {
	st, _ := readStat(pid)
	return st.cpu
}

// processes reads every live process's stat line.
func processes() []procStat {
	entries, _ := os.ReadDir("/proc")
	var out []procStat
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			if st, ok := readStat(pid); ok {
				out = append(out, st)
			}
		}
	}
	return out
}

// descendantsCPU is the CPU seconds of the live descendants of a process
// (agent processes run in sandboxes: grandchildren of the server).
func descendantsCPU(root int) float64 {
	procs := processes()
	in := map[int]bool{root: true}
	var sum float64
	for changed := true; changed; {
		changed = false
		for _, p := range procs {
			if in[p.ppid] && !in[p.pid] {
				in[p.pid], changed = true, true
				sum += p.cpu
			}
		}
	}
	return sum
}

// pgCPU is the CPU seconds of a PostgreSQL server: its postmaster, the
// backends and workers it reaped, and its live descendants (0 without a
// server).
func pgCPU(pid int) float64 {
	st, ok := readStat(pid)
	if !ok {
		return 0
	}
	return st.cpu + st.children + descendantsCPU(pid)
}

// selfCPU is this process's CPU seconds.
func selfCPU() float64 { return cpuTime(os.Getpid()) }

// rss reads a process's resident set size from /proc.
func rss(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
