package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/controlplane"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
)

// TestHistoryRetention: helmr server --history-retention drops the payloads
// of settled Turns once they are older than the retention. Reads and waits
// then show payload_expired_at with status, error and timings but no
// input, result or response; the timeline keeps every record, without the
// payloads and saying when they expired.
func TestHistoryRetention(t *testing.T) {
	if testing.Short() {
		t.Skip("runs helmr server")
	}
	const retention = 3 * time.Second
	s := startServer(t, t.TempDir(), "server", "--log-level", "warn", "--history-retention", "3s")
	if out, errOut, code := s.cli(t, "deploy", "testdata/agents"); code != 0 {
		t.Fatalf("deploy: %d %s %s", code, out, errOut)
	}
	rec := createEcho(t, s, "the secret plan")
	sid, tid := rec.Session.ID, rec.Turn.ID
	out, errOut, code := s.cli(t, "session", "enqueue", sid, "--text", "fail", "--json")
	if code != 0 {
		t.Fatalf("enqueue: %d %s %s", code, out, errOut)
	}
	var failed helmrtype.TurnState
	json.Unmarshal([]byte(out), &failed)

	getTurn := func(id string) helmrtype.TurnState {
		t.Helper()
		out, errOut, code := s.cli(t, "session", "turn", "get", sid, id, "--json")
		if code != 0 {
			t.Fatalf("turn get: %d %s %s", code, out, errOut)
		}
		var ts helmrtype.TurnState
		if err := json.Unmarshal([]byte(out), &ts); err != nil {
			t.Fatalf("turn get: %v: %s", err, out)
		}
		return ts
	}
	before := getTurn(tid)
	if before.Status != "completed" || before.TerminalAt == nil {
		t.Fatalf("first Turn = %+v, want completed", before)
	}
	// Read well within the retention, the payload is there.
	if time.Since(*before.TerminalAt) < retention/2 {
		if before.PayloadExpiredAt != nil || before.Result == nil || before.Response == nil || before.Input == nil {
			t.Fatalf("first Turn within the retention = %+v, want its payload", before)
		}
	}

	var got helmrtype.TurnState
	waitFor(t, "the first Turn's payload expires", func() bool {
		got = getTurn(tid)
		return got.PayloadExpiredAt != nil
	})
	if got.Status != "completed" || got.Input != nil || got.Result != nil || got.Response != nil {
		t.Fatalf("expired Turn = %+v, want completed without input, result or response", got)
	}
	if got.Sequence != before.Sequence || got.Source != before.Source || !got.CreatedAt.Equal(before.CreatedAt) ||
		got.StartedAt == nil || !got.StartedAt.Equal(*before.StartedAt) || !got.TerminalAt.Equal(*before.TerminalAt) {
		t.Fatalf("expired Turn = %+v, want the sequence, source and timings of %+v", got, before)
	}
	if got.PayloadExpiredAt.Sub(*got.TerminalAt) < retention {
		t.Fatalf("payload expired at %v, less than %v after the Turn settled at %v", got.PayloadExpiredAt, retention, got.TerminalAt)
	}

	// A wait says so too: a completed outcome without result or response.
	out, errOut, code = s.cli(t, "session", "turn", "wait", sid, tid, "--timeout", "10s", "--json")
	if code != 0 {
		t.Fatalf("turn wait: %d %s %s", code, out, errOut)
	}
	var waited helmrtype.TimedTurnWaitResult
	if err := json.Unmarshal([]byte(out), &waited); err != nil {
		t.Fatalf("turn wait: %v: %s", err, out)
	}
	if o := waited.Outcome; waited.Status != "settled" || o == nil || o.Status != "completed" || o.PayloadExpiredAt == nil ||
		o.Result != nil || o.Response != nil {
		t.Fatalf("wait on the expired Turn = %s", out)
	}
	var timed helmrtype.TimedTurnWaitResult
	if err := apiCall(s.url, s.key, "GET", "/v1/sessions/"+sid+"/turns/"+tid+"/wait?timeout=0", nil, &timed); err != nil ||
		timed.Status != "settled" || timed.Outcome == nil || timed.Outcome.PayloadExpiredAt == nil || timed.Outcome.Result != nil {
		t.Fatalf("timed wait on the expired Turn = %+v, %v", timed, err)
	}

	// The failed Turn keeps its error.
	var f helmrtype.TurnState
	waitFor(t, "the failed Turn's payload expires", func() bool {
		f = getTurn(failed.ID)
		return f.PayloadExpiredAt != nil
	})
	if f.Status != "failed" || f.Error == nil || f.Error.Code != helmrtype.CodeHandlerFailed || !strings.Contains(f.Error.Message, "boom") || f.Input != nil {
		t.Fatalf("expired failed Turn = %+v, want its error and no input", f)
	}

	// The timeline keeps its records, without payloads.
	var page helmrtype.SessionEventPage
	if err := apiCall(s.url, s.key, "GET", "/v1/sessions/"+sid+"/events?limit=1000", nil, &page); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, ev := range page.Records {
		if ev.TurnID == nil || *ev.TurnID != tid {
			continue
		}
		var data map[string]json.RawMessage
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			t.Fatal(err)
		}
		switch ev.Kind {
		case helmrtype.EventTurnQueued, helmrtype.EventTurnOutput, helmrtype.EventTurnCompleted:
			seen[ev.Kind]++
			var stamp time.Time
			if err := json.Unmarshal(data["payload_expired_at"], &stamp); err != nil || !stamp.Equal(*got.PayloadExpiredAt) {
				t.Errorf("%s: payload_expired_at %s, want %v", ev.Kind, data["payload_expired_at"], got.PayloadExpiredAt)
			}
			for _, field := range []string{"input", "content", "result", "response"} {
				if _, ok := data[field]; ok {
					t.Errorf("%s still has %s: %s", ev.Kind, field, ev.Data)
				}
			}
		}
	}
	if seen[helmrtype.EventTurnQueued] != 1 || seen[helmrtype.EventTurnOutput] != 2 || seen[helmrtype.EventTurnCompleted] != 1 {
		t.Fatalf("timeline records of the expired Turn: %v; want turn.queued, two turn.output and turn.completed", seen)
	}
	if page.RetainedAfter != 0 {
		t.Fatalf("retained_after = %d, want 0: the records are kept", page.RetainedAfter)
	}
	if strings.Contains(string(mustJSON(t, page)), "the secret plan") {
		t.Fatalf("the timeline still holds the payload: %s", mustJSON(t, page))
	}
}

// TestHistoryRetentionFlagIsChecked: a bad --history-retention is a usage
// error (exit 2) that names the flag.
func TestHistoryRetentionFlagIsChecked(t *testing.T) {
	for _, v := range []string{"soon", "0s", "-1h"} {
		cmd := exec.Command(helmrBinary(t), "server", "--history-retention", v, "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "--history-retention") {
			t.Errorf("helmr server --history-retention %s: %v: %s", v, err, out)
		}
	}
}

// errorLog is a slog handler that keeps the messages of error records.
type errorLog struct {
	mu   *sync.Mutex
	msgs *[]string
}

func (h errorLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (h errorLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
	*h.msgs = append(*h.msgs, msg)
	return nil
}
func (h errorLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h errorLog) WithGroup(string) slog.Handler      { return h }

// TestHistoryRetentionOnSharedPostgres: two control planes on one
// PostgreSQL database both run the expiry, often at the same moment; every
// Turn expires once and neither logs an error.
func TestHistoryRetentionOnSharedPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two control planes on PostgreSQL")
	}
	db := pgtest.URL(t)
	var mu sync.Mutex
	var errs []string
	log := slog.New(errorLog{&mu, &errs})
	var nodes []*plane
	for i := range 2 {
		nodes = append(nodes, startPlaneConfig(t, "127.0.0.1:0", controlplane.Config{Database: db, Logger: log,
			NodeID: fmt.Sprintf("node-%d", i), HistoryRetention: 400 * time.Millisecond}))
	}
	type ids struct{ sid, tid string }
	var turns []ids
	for i := range 6 {
		r := nodes[i%2].create("echo", text(fmt.Sprintf("payload %d", i)))
		nodes[i%2].wait(r.Session.ID, r.Turn.ID)
		turns = append(turns, ids{r.Session.ID, r.Turn.ID})
	}
	for _, id := range turns {
		waitFor(t, "payload of "+id.tid+" expires", func() bool {
			var ts helmrtype.TurnState
			nodes[1].must("GET", "/v1/sessions/"+id.sid+"/turns/"+id.tid, nil, &ts)
			return ts.PayloadExpiredAt != nil && ts.Result == nil && ts.Input == nil && ts.Status == "completed"
		})
		for _, ev := range nodes[0].events(id.sid) {
			if strings.Contains(string(ev.Data), "payload ") {
				t.Errorf("event %d of %s still holds its payload: %s", ev.Sequence, id.sid, ev.Data)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, m := range errs {
		if strings.Contains(m, "expire") {
			t.Errorf("a node logged: %s", m)
		}
	}
}
