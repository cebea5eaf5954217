package main

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

// The parking phase (issue 30, decision 0024): Sessions of the agent's
// parker ask a question with a short idle timeout, so that their process
// is checkpointed to disk and ended while it waits, and are answered, so
// that it is restored. It measures park and restore latency, the images'
// size, and N parked Sessions at once. It runs on a server started again
// on the run's data (the other phases' store figures are taken before).
var (
	parkOn       bool
	parkSamples  int
	parkSessions int
	parkWindow   int
	parkCRIU     string
)

// parkIdle is the idle timeout of the parker's question: the wait is
// eligible for parking this long after it started.
const parkIdle = 50 * time.Millisecond

// parkPause is the pause the supervisor gives a process it tells to park
// (internal/supervisor's parkPause): a restored process dials no sooner
// than this after the park, by the wall clock. The latency samples are
// answered after it, unless they measure it.
const parkPause = time.Second

// parkSession follows one parker Session's timeline.
type parkSession struct {
	id, computer, turn string
	boot               string
	// seen is the timeline read so far; scanned how much of it until
	// has looked at.
	seen    []helmrtype.SessionEvent
	scanned int
	// turns counts its completed Turns.
	turns int64
	// parkingAt is when its last park started (computer.residency
	// parking).
	parkingAt time.Time
}

// until reads the Session's timeline until a record after the last one
// it returned matches, and returns that record.
func (s *parkSession) until(c *client, timeout time.Duration, what string, match func(*helmrtype.SessionEvent) bool) (*helmrtype.SessionEvent, error) {
	deadline := time.Now().Add(timeout)
	for {
		for s.scanned < len(s.seen) {
			e := &s.seen[s.scanned]
			s.scanned++
			if match(e) {
				return e, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("session %s: no %s within %s (last record: %s)", s.id, what, timeout, s.lastKind())
		}
		var after int64
		if len(s.seen) > 0 {
			after = s.seen[len(s.seen)-1].Sequence
		}
		var page helmrtype.SessionEventPage
		if err := c.do("GET", fmt.Sprintf("/v1/sessions/%s/events?after=%d&limit=1000", s.id, after), nil, &page); err != nil {
			return nil, err
		}
		s.seen = append(s.seen, page.Records...)
		if len(page.Records) == 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func (s *parkSession) lastKind() string {
	if len(s.seen) == 0 {
		return "none"
	}
	e := s.seen[len(s.seen)-1]
	return e.Kind + " " + string(e.Data)
}

// residencyOf reads a computer.residency record ("" for another kind).
func residencyOf(e *helmrtype.SessionEvent) helmrtype.ComputerResidencyEvent {
	var r helmrtype.ComputerResidencyEvent
	if e.Kind == helmrtype.EventComputerResidency {
		json.Unmarshal(e.Data, &r)
	}
	return r
}

func (s *parkSession) ofTurn(e *helmrtype.SessionEvent) bool {
	return e.TurnID != nil && *e.TurnID == s.turn
}

// parkResult is what a parker Turn returns.
type parkResult struct {
	Count  int64  `json:"count"`
	Boot   string `json:"boot"`
	Answer string `json:"answer"`
}

// parkSample is one park and its restore.
type parkSample struct {
	park, dump                 time.Duration // eligible → parked; parking → parked
	hotRSS                     int64         // the process's RSS while it waited, before the park
	imageBytes, logBytes       int64
	gone                       bool // no process of its Computer once parked
	restored                   bool
	output, running, completed time.Duration // answer → first output, reconnected, completed
	ok                         bool          // the Turn's result shows the process's memory intact
}

// parkStart starts a Turn of s (its first: the Session is created) and
// waits until its process is parked; failed says why it was not.
func parkStart(c *client, data string, s *parkSession) (sm parkSample, failed string, err error) {
	in, _ := json.Marshal(helmrtype.Text(parkIdle.String()))
	if s.id == "" {
		var rec helmrtype.SessionCreateReceipt
		if err := c.do("POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "parker", Input: in}, &rec); err != nil {
			return sm, "", err
		}
		s.id, s.turn = rec.Session.ID, rec.Turn.ID
	} else {
		var ts helmrtype.TurnState
		if err := c.do("POST", "/v1/sessions/"+s.id+"/turns", helmrtype.EnqueueRequest{Input: in}, &ts); err != nil {
			return sm, "", err
		}
		s.turn = ts.ID
	}
	ws, err := s.until(c, time.Minute, "wait.started", func(e *helmrtype.SessionEvent) bool {
		return e.Kind == helmrtype.EventWaitStarted && s.ofTurn(e)
	})
	if err != nil {
		return sm, "", err
	}
	if s.computer == "" {
		var ss helmrtype.Session
		if err := c.do("GET", "/v1/sessions/"+s.id, nil, &ss); err != nil {
			return sm, "", err
		}
		if ss.ComputerID != nil {
			s.computer = *ss.ComputerID
		}
		if off := checkpointOff(c, s.computer); off != "" {
			return sm, "", errCheckpointOff(off)
		}
	}
	for _, pid := range computerPIDs(s.computer) {
		sm.hotRSS += rss(pid)
	}
	parking, err := s.until(c, 30*time.Second, "computer.residency parking", func(e *helmrtype.SessionEvent) bool {
		return residencyOf(e).Residency == helmrtype.ResidencyParking
	})
	if err != nil {
		return sm, "", err
	}
	s.parkingAt = parking.CreatedAt
	end, err := s.until(c, time.Minute, "computer.residency parked", func(e *helmrtype.SessionEvent) bool {
		r := residencyOf(e).Residency
		return r == helmrtype.ResidencyParked || r == helmrtype.ResidencyRunning
	})
	if err != nil {
		return sm, "", err
	}
	r := residencyOf(end)
	if r.Residency != helmrtype.ResidencyParked || r.Error != nil {
		return sm, fmt.Sprintf("%s %s", end.Kind, end.Data), nil
	}
	sm.park = end.CreatedAt.Sub(ws.CreatedAt.Add(parkIdle))
	sm.dump = end.CreatedAt.Sub(parking.CreatedAt)
	sm.gone = len(computerPIDs(s.computer)) == 0
	sm.imageBytes, sm.logBytes = imageSize(filepath.Join(data, "computers", s.computer, "checkpoints", s.id))
	return sm, "", nil
}

// parkAnswer answers the question of s's Turn and follows its restore
// until the Turn ends; the result must show s's count of Turns and its
// boot. A Turn that does not complete (its process could not be
// restored) is a failure, said in failed, and s is let go: the next
// round starts a new Session in its place.
func parkAnswer(c *client, s *parkSession, sm *parkSample) (failed string, err error) {
	count := s.turns + 1
	var asks helmrtype.AskPage
	if err := c.do("GET", "/v1/sessions/"+s.id+"/turns/"+s.turn+"/asks", nil, &asks); err != nil {
		return "", err
	}
	if len(asks.Asks) == 0 {
		return "", fmt.Errorf("session %s: no question", s.id)
	}
	answer := "answer-" + s.turn
	body, _ := json.Marshal(answer)
	t0 := time.Now()
	if err := c.do("POST", "/v1/sessions/"+s.id+"/turns/"+s.turn+"/asks/"+asks.Asks[0].ID+"/respond",
		helmrtype.AskRespond{Answer: body, ResponseID: "r-" + s.turn}, nil); err != nil {
		return "", err
	}
	var output, running *helmrtype.SessionEvent
	end, err := s.until(c, time.Minute, "end of the Turn", func(e *helmrtype.SessionEvent) bool {
		switch {
		case e.Kind == helmrtype.EventTurnOutput && s.ofTurn(e) && output == nil:
			output = e
		case residencyOf(e).Residency == helmrtype.ResidencyRunning && running == nil:
			running = e
		}
		return s.ofTurn(e) && strings.HasPrefix(e.Kind, "turn.") && helmrtype.TurnTerminal(strings.TrimPrefix(e.Kind, "turn."))
	})
	if err != nil {
		return "", err
	}
	sm.completed = end.CreatedAt.Sub(t0)
	if output != nil {
		sm.output = output.CreatedAt.Sub(t0)
	}
	var ts helmrtype.TurnState
	if err := c.do("GET", "/v1/sessions/"+s.id+"/turns/"+s.turn, nil, &ts); err != nil {
		return "", err
	}
	if ts.Status != helmrtype.TurnCompleted {
		failed = fmt.Sprintf("session %s, Turn %d (%s): %s %+v", s.id, count, s.turn, ts.Status, ts.Error)
		c.do("POST", "/v1/sessions/"+s.id+"/cancel", struct{}{}, nil)
		*s = parkSession{}
		return failed, nil
	}
	s.turns = count
	if running != nil {
		sm.running, sm.restored = running.CreatedAt.Sub(t0), true
	}
	var res parkResult
	json.Unmarshal(ts.Result, &res)
	if s.boot == "" {
		s.boot = res.Boot
	}
	sm.ok = ts.Status == helmrtype.TurnCompleted && res.Count == count && res.Boot == s.boot && res.Answer == answer
	if !sm.ok {
		fmt.Printf("  session %s, Turn %d: %s %s (want count %d, boot %s, answer %q)\n", s.id, count, ts.Status, ts.Result, count, s.boot, answer)
	}
	return "", nil
}

// parkPhase measures parking on a server started again on the run's data.
func parkPhase(c *client, bin string, args []string, srv **exec.Cmd, data string) error {
	s, _, err := startServer(bin, args, nil)
	if err != nil {
		return err
	}
	*srv = s
	waitReady(c)

	// Latency: a few Sessions, each parked and restored several times
	// (a restored process is parked again).
	nLat := min(5, parkSamples)
	rounds := max(1, parkSamples/max(nLat, 1))
	ss := make([]*parkSession, nLat)
	for i := range ss {
		ss[i] = &parkSession{}
	}
	var samples, atOnceRound []parkSample
	var failures []string
	for r := 0; r <= rounds && nLat > 0; r++ {
		// The last round answers each Session as soon as it is parked,
		// within the park's pause.
		atOnce := r == rounds
		var round []parkSample
		for i, ps := range ss {
			sm, failed, err := parkStart(c, data, ps)
			if off, ok := err.(errCheckpointOff); ok {
				fmt.Printf("parking: off (the server's Computers say checkpoint_off: %s); the parking phase is skipped\n", string(off))
				for _, ps := range ss[:i+1] {
					c.do("POST", "/v1/sessions/"+ps.id+"/cancel", struct{}{}, nil)
				}
				return nil
			}
			if err != nil {
				return err
			}
			if failed != "" {
				failures = append(failures, fmt.Sprintf("park of session %s: %s", ps.id, failed))
			}
			if atOnce {
				f, err := parkAnswer(c, ps, &sm)
				if err != nil {
					return err
				}
				if f != "" {
					failures = append(failures, "restore of "+f)
				}
			}
			round = append(round, sm)
		}
		if !atOnce {
			for i, ps := range ss {
				if d := time.Until(ps.parkingAt.Add(parkPause + 100*time.Millisecond)); d > 0 {
					time.Sleep(d)
				}
				f, err := parkAnswer(c, ps, &round[i])
				if err != nil {
					return err
				}
				if f != "" {
					failures = append(failures, "restore of "+f)
				}
			}
			samples = append(samples, round...)
		} else {
			atOnceRound = round
		}
	}
	if nLat > 0 {
		printParkSamples(samples, nLat, rounds)
		printAtOnce(atOnceRound)
	}
	for _, f := range failures {
		fmt.Println("  failed:", f)
	}
	for _, ps := range ss {
		c.do("POST", "/v1/sessions/"+ps.id+"/cancel", struct{}{}, nil)
	}
	if parkSessions > 0 {
		return parkDensity(c, s.Process.Pid, data, parkSessions)
	}
	return nil
}

// printParkSamples prints the latency samples' figures.
func printParkSamples(samples []parkSample, nLat, rounds int) {
	var park, dump, output, running, completed []time.Duration
	var images, logs, hot []int64
	var gone, ok int
	for _, sm := range samples {
		if sm.park > 0 {
			park, dump = append(park, sm.park), append(dump, sm.dump)
			images, logs = append(images, sm.imageBytes), append(logs, sm.logBytes)
			hot = append(hot, sm.hotRSS)
		}
		if sm.gone {
			gone++
		}
		if sm.ok {
			ok++
		}
		if sm.restored {
			output, running, completed = append(output, sm.output), append(running, sm.running), append(completed, sm.completed)
		}
	}
	n := len(samples)
	fmt.Printf("park (%s agent, %d Sessions × %d parks, question with idle timeout %s): wait eligible → parked p50 %s  p99 %s; of which parking → parked (close, checkpoint, end) p50 %s  p99 %s; %d/%d parked with no process left\n",
		agentKind, nLat, rounds, parkIdle, pct(park, 50), pct(park, 99), pct(dump, 50), pct(dump, 99), gone, n)
	fmt.Printf("restore (answered past the park's %s pause): answer → first output of the resumed Turn p50 %s  p99 %s; → reconnected (residency running) p50 %s  p99 %s; → Turn completed p50 %s  p99 %s; %d/%d resumed with their memory (count, boot, answer)\n",
		parkPause, pct(output, 50), pct(output, 99), pct(running, 50), pct(running, 99), pct(completed, 50), pct(completed, 99), ok, n)
	if len(images) > 0 {
		slices.Sort(images)
		slices.Sort(logs)
		slices.Sort(hot)
		fmt.Printf("checkpoint images per parked Session (file sizes, = bytes CRIU wrote per park): p50 %.1f MiB  max %.1f MiB; plus CRIU's dump.log p50 %.0f KiB; the process's RSS while it waited, before the park: p50 %.1f MiB\n",
			mib(images[len(images)/2]), mib(images[len(images)-1]), float64(logs[len(logs)/2])/1024, mib(hot[len(hot)/2]))
	}
}

// printAtOnce prints the restores answered as soon as the park ended.
func printAtOnce(round []parkSample) {
	var output []time.Duration
	ok := 0
	for _, sm := range round {
		if sm.restored {
			output = append(output, sm.output)
		}
		if sm.ok {
			ok++
		}
	}
	fmt.Printf("restore answered at the parked record (within the park's %s pause): answer → first output p50 %s  max %s; %d/%d resumed with their memory\n",
		parkPause, pct(output, 50), pct(output, 100), ok, len(round))
}

// parkDensity creates n Sessions that each ask and park, with at most
// parkWindow of them not yet parked at a time, and measures them parked.
func parkDensity(c *client, srvPID int, data string, n int) error {
	parked0, err := parkedGauge(c)
	if err != nil {
		return err
	}
	rss0 := rss(srvPID)
	in, _ := json.Marshal(helmrtype.Text(parkIdle.String()))
	type created struct{ id, turn string }
	sessions := make([]created, 0, n)
	t0 := time.Now()
	parked := 0
	for len(sessions) < n {
		for len(sessions)-parked >= parkWindow {
			time.Sleep(20 * time.Millisecond)
			g, err := parkedGauge(c)
			if err != nil {
				return err
			}
			parked = g - parked0
		}
		var rec helmrtype.SessionCreateReceipt
		if err := c.do("POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "parker", Input: in}, &rec); err != nil {
			return err
		}
		sessions = append(sessions, created{rec.Session.ID, rec.Turn.ID})
	}
	// All parked, or no progress for 10 s.
	last, lastAt := parked, time.Now()
	for parked < n && time.Since(lastAt) < 10*time.Second {
		time.Sleep(20 * time.Millisecond)
		g, err := parkedGauge(c)
		if err != nil {
			return err
		}
		if parked = g - parked0; parked > last {
			last, lastAt = parked, time.Now()
		}
	}
	took := time.Since(t0)
	if parked < n {
		took = lastAt.Sub(t0) // to the last park, not through the wait for the rest
	}
	procs, procRSS := descendantsRSS(srvPID)
	ids := make(map[string]bool, n)
	for _, cs := range sessions {
		ids[cs.id] = true
	}
	images, logs, dirs := allImages(data, ids)
	fmt.Printf("density: %d Sessions asked and parked (at most %d not yet parked at a time) in %s, %.1f/s; parked %d/%d\n",
		n, parkWindow, took.Round(time.Millisecond), float64(parked)/took.Seconds(), parked, n)
	fmt.Printf("  parked: processes under the server %d, their RSS %.1f MB; server RSS %.1f MB (%.1f MB before); images on disk %.1f MiB for %d Sessions (%.2f MiB each) plus %.1f MiB of dump logs\n",
		procs, float64(procRSS)/(1<<20), float64(rss(srvPID))/(1<<20), float64(rss0)/(1<<20),
		mib(images), dirs, mib(images)/float64(max(dirs, 1)), mib(logs))
	if parked < n {
		fmt.Printf("  %d Sessions were not parked within 10 s of the last park; the first of them:\n", n-parked)
		shown := 0
		for _, cs := range sessions {
			if shown == 5 {
				break
			}
			ps := &parkSession{id: cs.id}
			for more := true; more; {
				var page helmrtype.SessionEventPage
				after := int64(0)
				if len(ps.seen) > 0 {
					after = ps.seen[len(ps.seen)-1].Sequence
				}
				if c.do("GET", fmt.Sprintf("/v1/sessions/%s/events?after=%d&limit=1000", cs.id, after), nil, &page) != nil {
					break
				}
				ps.seen, more = append(ps.seen, page.Records...), page.HasMore
			}
			var res string
			for _, e := range ps.seen {
				if r := residencyOf(&e); r.Residency != "" {
					res = fmt.Sprintf("%s %s", e.Kind, e.Data)
				}
			}
			if !strings.Contains(res, `"parked"`) {
				shown++
				fmt.Printf("    session %s: last residency record %q; last record %s\n", cs.id, res, ps.lastKind())
			}
		}
	}

	// A sample is answered, one at a time, past the last park's pause:
	// each restored with its memory.
	time.Sleep(parkPause + 100*time.Millisecond)
	k := min(10, n)
	var output, completed []time.Duration
	ok := 0
	for i := 0; i < k; i++ {
		cs := sessions[i*n/k]
		ps := &parkSession{id: cs.id, turn: cs.turn}
		var sm parkSample
		f, err := parkAnswer(c, ps, &sm)
		if err != nil {
			return err
		}
		if f != "" {
			fmt.Println("  failed: restore of", f)
			continue
		}
		if sm.ok {
			ok++
		}
		output, completed = append(output, sm.output), append(completed, sm.completed)
	}
	fmt.Printf("  answered %d of them, one at a time: %d/%d resumed with their memory; answer → first output p50 %s  max %s; → Turn completed p50 %s  max %s\n",
		k, ok, k, pct(output, 50), pct(output, 100), pct(completed, 50), pct(completed, 100))
	return nil
}

// errCheckpointOff is a Computer's checkpoint_off: parking is off.
type errCheckpointOff string

func (e errCheckpointOff) Error() string { return "checkpoints are off: " + string(e) }

// checkpointOff is a Computer's checkpoint_off ("" when it parks).
func checkpointOff(c *client, computerID string) string {
	if computerID == "" {
		return "the Session shows no Computer"
	}
	var cs helmrtype.ComputerState
	if err := c.do("GET", "/v1/computers/"+computerID, nil, &cs); err != nil {
		return err.Error()
	}
	return cs.CheckpointOff
}

// parkedGauge reads helmr_sessions_parked from /metrics.
func parkedGauge(c *client) (int, error) {
	req, _ := http.NewRequest("GET", c.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "helmr_sessions_parked" {
			v, err := strconv.ParseFloat(f[1], 64)
			return int(v), err
		}
	}
	return 0, fmt.Errorf("/metrics has no helmr_sessions_parked")
}

// computerPIDs are the live processes whose environment names the
// Computer (HELMR_COMPUTER_ID, as internal/e2e's pidOfComputer finds
// them).
func computerPIDs(computerID string) []int {
	want := "HELMR_COMPUTER_ID=" + computerID
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && slices.Contains(strings.Split(string(env), "\x00"), want) && rss(pid) > 0 {
			out = append(out, pid)
		}
	}
	return out
}

// descendantsRSS counts the live descendants of a process (sandboxes,
// session processes, restored processes) and sums their RSS.
func descendantsRSS(root int) (int, int64) {
	procs := processes()
	in := map[int]bool{root: true}
	var n int
	var sum int64
	for changed := true; changed; {
		changed = false
		for _, p := range procs {
			if in[p.ppid] && !in[p.pid] {
				in[p.pid], changed = true, true
				n++
				sum += rss(p.pid)
			}
		}
	}
	return n, sum
}

// imageSize sums the sizes of the files of one images directory: the
// images, and CRIU's logs apart.
func imageSize(dir string) (images, logs int64) {
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if strings.HasSuffix(d.Name(), ".log") {
			logs += info.Size()
		} else {
			images += info.Size()
		}
		return nil
	})
	return images, logs
}

// allImages sums imageSize over the images directories of the data
// directory (computers/*/checkpoints/<session>) of the Sessions ids, and
// counts them.
func allImages(data string, ids map[string]bool) (images, logs int64, dirs int) {
	matches, _ := filepath.Glob(filepath.Join(data, "computers", "*", "checkpoints", "*"))
	for _, m := range matches {
		if !ids[filepath.Base(m)] {
			continue
		}
		i, l := imageSize(m)
		if i > 0 {
			images, logs, dirs = images+i, logs+l, dirs+1
		}
	}
	return images, logs, dirs
}

// pct is the p-th percentile of ds (sorted here), rounded for printing.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := min(len(ds)-1, len(ds)*p/100)
	return ds[i].Round(100 * time.Microsecond)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// waitReady waits until the server answers /readyz.
func waitReady(c *client) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		resp, err := c.hc.Get(c.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
	}
}
