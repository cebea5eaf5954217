package e2e

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
)

// TestFaultInjection runs a few hundred Turns over many Sessions while
// session processes are killed (kill -9) and the control plane is stopped
// or detached and restarted, resuming the holds that follow as an operator
// would. Then it checks: every admitted Turn is terminal or still queued
// under a hold, no Turn ran twice, every Session's timeline is gapless, and
// every completed Turn's output records are in its timeline, in order,
// before its completion.
func TestFaultInjection(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	faultInjection(t, "")
}

// TestFaultInjectionOnPostgreSQL is TestFaultInjection on PostgreSQL.
func TestFaultInjectionOnPostgreSQL(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	faultInjection(t, pgtest.URL(t))
}

func faultInjection(t *testing.T, database string) {
	rng := rand.New(rand.NewPCG(7, 11))
	dir := t.TempDir()
	start := func() *plane { return startPlaneWith(t, dir, "127.0.0.1:0", database) }
	p := start()
	const sessions, rounds, perRound = 12, 30, 12
	var sids []string
	admitted := map[string]string{} // turn → session
	for i := range sessions {
		r := p.create("echo", text(fmt.Sprintf("s%d-start", i)))
		sids = append(sids, r.Session.ID)
		admitted[r.Turn.ID] = r.Session.ID
	}
	kills, restarts, detaches, resumes := 0, 0, 0, 0
	resumeAll := func() {
		for _, sid := range sids {
			for _, h := range p.session(sid).Holds {
				if h.ID != nil && h.CanRelease && *h.SessionID == sid {
					if err := p.call("POST", "/v1/sessions/"+sid+"/resume", map[string]any{"hold_id": *h.ID}, nil); err == nil {
						resumes++
					}
				}
			}
		}
	}
	for round := range rounds {
		for range perRound {
			sid := sids[rng.IntN(len(sids))]
			in := fmt.Sprintf("sleep %dms", rng.IntN(60))
			var ts helmrtype.TurnState
			p.must("POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: text(in)}, &ts)
			admitted[ts.ID] = sid
		}
		time.Sleep(time.Duration(rng.IntN(80)) * time.Millisecond)
		for range rng.IntN(3) { // kill -9 session processes mid-work
			sid := sids[rng.IntN(len(sids))]
			if pid := findSessionPID(p, sid); pid != 0 {
				syscall.Kill(pid, syscall.SIGKILL)
				kills++
			}
		}
		switch round % 6 {
		case 2: // stop the control plane, restart it
			p.stop()
			p = start()
			restarts++
		case 5: // detach (processes live on), restart
			p.detach()
			p = start()
			detaches++
		}
		if round%3 == 2 {
			resumeAll()
		}
	}
	// Let everything that can run finish.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resumeAll()
		pending := 0
		for id, sid := range admitted {
			if st := p.turnStatus(sid, id); st == "queued" || st == "running" {
				pending++
			}
		}
		if pending == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Invariants.
	statuses := map[string]int{}
	for id, sid := range admitted {
		st := p.turnStatus(sid, id)
		statuses[st]++
		if st == "queued" && len(p.session(sid).Holds) == 0 {
			evs := p.events(sid)
			var tail []string
			for _, e := range evs[max(0, len(evs)-12):] {
				tail = append(tail, fmt.Sprintf("%d %s %s", e.Sequence, e.Kind, e.Data))
			}
			t.Errorf("turn %s is queued in an unheld session %s (process %d); its last events:\n%s",
				id, sid, findSessionPID(p, sid), strings.Join(tail, "\n"))
		}
		if st == "running" {
			t.Errorf("turn %s is still running", id)
		}
	}
	events, outputs := 0, 0
	for _, sid := range sids {
		evs := p.events(sid)
		events += len(evs)
		runs := map[string]int{}
		outs := map[string][]string{}
		done := map[string]bool{}
		for i, e := range evs {
			if e.Sequence != int64(i+1) {
				t.Fatalf("session %s: event %d has sequence %d", sid, i+1, e.Sequence)
			}
			if e.TurnID == nil {
				continue
			}
			tid := *e.TurnID
			switch e.Kind {
			case helmrtype.EventTurnRunning:
				runs[tid]++
				if runs[tid] > 1 {
					t.Errorf("turn %s ran twice", tid)
				}
			case helmrtype.EventTurnOutput:
				if done[tid] {
					t.Errorf("output of turn %s after it settled", tid)
				}
				outs[tid] = append(outs[tid], string(e.Data))
				outputs++
			case helmrtype.EventTurnCompleted:
				done[tid] = true
				// echo writes "echo: " then its input, in that order.
				if o := outs[tid]; len(o) != 2 || !strings.Contains(o[0], "echo: ") || !strings.Contains(o[1], "sleep") && !strings.Contains(o[1], "start") {
					t.Errorf("turn %s completed with outputs %v: %s", tid, o, e.Data)
				}
			case helmrtype.EventTurnFailed, helmrtype.EventTurnInterrupted, helmrtype.EventTurnCancelled:
				done[tid] = true
			}
		}
	}
	t.Logf("checked %d turns in %d sessions (%v), %d events, %d output records; %d kills, %d restarts, %d detach-restarts, %d resumes",
		len(admitted), len(sids), statuses, events, outputs, kills, restarts, detaches, resumes)
	if statuses["completed"] == 0 {
		t.Fatal("no turn completed")
	}
}

// findSessionPID is sessionPID without failing when there is no process.
func findSessionPID(p *plane, sid string) int {
	s := p.session(sid)
	if s.ComputerID == nil {
		return 0
	}
	return pidOfComputer(p, *s.ComputerID)
}
