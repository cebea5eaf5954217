package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// run runs helmr with args and stdin, returning the exit code and output.
func run(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, Streams{In: strings.NewReader(stdin), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

// deadURL is an address nothing listens on: a command that wrongly got past
// validation fails with exit 1, not 2.
func deadURL(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close()
	return u
}

func TestUsageErrorsExit2(t *testing.T) {
	t.Setenv("HELMR_API_KEY", "sk_test")
	t.Setenv("HELMR_API_URL", deadURL(t))
	tests := [][]string{
		{"bogus"},
		{"session", "bogus"},
		{"session", "create", "--text", "hi"}, // --agent missing
		{"session", "create", "--agent", "a", "--text", "x", "--input-json", "{}"}, // exclusive
		{"session", "create", "--agent", "a", "--text", "x", "--input-file", "f"},  // exclusive
		{"session", "create", "--agent", "a", "--input-json", "{}", "--input-file", "f"},
		{"session", "create", "--agent", "a", "--input-json", "{nope"},
		{"session", "create", "--agent", "a", "--input-file", "/does/not/exist"},
		{"session", "create", "--agent", "a", "--wait"}, // nothing to wait for
		{"session", "create", "--agent", "a", "--text", "x", "--wait", "--timeout", "-1s"},
		{"session", "create", "--agent", "a", "--text", "x", "--wait", "--timeout", "soon"},
		{"session", "create", "--agent", "a", "extra-arg"},
		{"session", "enqueue", "s1"}, // input missing
		{"session", "enqueue", "s1", "--text", "x", "--input-json", "[]"},
		{"session", "enqueue", "--text", "x"}, // SESSION missing
		{"session", "get"},
		{"session", "get", "a", "b"},
		{"session", "get", " "},
		{"session", "list", "--key", "k"},
		{"session", "list", "--agent", "a", "--key", "k", "--status", "open"},
		{"session", "list", "--agent", "a", "--key", "k", "--limit", "5"},
		{"session", "list", "--status", "sleeping"},
		{"session", "list", "--limit", "101"},
		{"session", "events", "s1", "--limit", "1001"},
		{"session", "events", "s1", "--after", "-1"},
		{"session", "events", "s1", "--after", "x"},
		{"session", "turn", "get", "s1"},
		{"session", "turn", "wait", "s1", "t1", "--timeout", "-5s"},
		{"session", "turn", "send", "s1", "t1"}, // --text missing
		{"session", "turn", "interrupt", "s1"},
		{"agent", "get"},
		{"agent", "list", "--limit", "0x"},
		{"agent", "list", "--limit", "500"},
		{"agent", "list", "extra"},
		{"--no-such-flag"},
	}
	for _, args := range tests {
		code, out, errOut := run(t, "", args...)
		if code != ExitUsage {
			t.Errorf("helmr %s: exit %d; want 2 (stdout %q, stderr %q)", strings.Join(args, " "), code, out, errOut)
			continue
		}
		if !strings.HasPrefix(errOut, "Error: ") || !strings.Contains(errOut, "--help' for usage") {
			t.Errorf("helmr %s: stderr %q", strings.Join(args, " "), errOut)
		}
	}
}

func TestMissingAPIKeyIsUsage(t *testing.T) {
	t.Setenv("HELMR_API_KEY", "")
	code, _, errOut := run(t, "", "session", "get", "s1")
	if code != ExitUsage || !strings.Contains(errOut, "HELMR_API_KEY") {
		t.Errorf("exit %d stderr %q", code, errOut)
	}
}

func TestHelpExits0(t *testing.T) {
	for _, args := range [][]string{{}, {"--help"}, {"session"}, {"session", "turn", "wait", "--help"}} {
		code, out, _ := run(t, "", args...)
		if code != 0 || !strings.Contains(out, "Usage:") {
			t.Errorf("helmr %v: exit %d, output %q", args, code, out)
		}
	}
}

func TestTransportErrorExit1(t *testing.T) {
	code, _, errOut := run(t, "", "--api-key", "k", "--api-url", deadURL(t), "session", "get", "s1")
	if code != ExitFailure || !strings.Contains(errOut, "connection refused") {
		t.Errorf("exit %d stderr %q", code, errOut)
	}
}

// answers is a server that answers each request path with a fixed status and
// body and records the requests.
type answers struct {
	mu    sync.Mutex
	seen  []*http.Request
	body  []string
	reply map[string][2]string // "METHOD path" -> {status, body}
}

func (a *answers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	a.seen = append(a.seen, r)
	a.body = append(a.body, string(b))
	rep, ok := a.reply[r.Method+" "+r.URL.Path]
	a.mu.Unlock()
	if !ok {
		w.WriteHeader(404)
		io.WriteString(w, `{"error":{"code":"not_found","message":"no route"}}`)
		return
	}
	var status int
	fmt.Sscan(rep[0], &status)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, rep[1])
}

func serve(t *testing.T, reply map[string][2]string) (*answers, string) {
	a := &answers{reply: reply}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	t.Setenv("HELMR_API_URL", srv.URL)
	t.Setenv("HELMR_API_KEY", "sk_test")
	return a, srv.URL
}

const settledCompleted = `{"status":"settled","outcome":{"status":"completed","result":{"ok":true},"response":[{"type":"text","text":"All done\n"}]}}`

func TestExitCodesFromAnswers(t *testing.T) {
	tests := []struct {
		name     string
		reply    map[string][2]string
		args     []string
		want     int
		wantOut  string
		wantErr  string
		wantBody string
	}{
		{
			name:    "not found",
			reply:   map[string][2]string{"GET /v1/sessions/s1": {"404", `{"error":{"code":"not_found","message":"no Session s1"}}`}},
			args:    []string{"session", "get", "s1"},
			want:    ExitNotFound,
			wantErr: "Error: not_found: no Session s1",
		},
		{
			name:    "idempotency conflict",
			reply:   map[string][2]string{"POST /v1/sessions": {"409", `{"error":{"code":"idempotency_conflict","message":"key reused with another request"}}`}},
			args:    []string{"session", "create", "--agent", "a", "--text", "hi", "--idempotency-key", "k1"},
			want:    ExitConflict,
			wantErr: "idempotency_conflict",
		},
		{
			name:    "state conflict",
			reply:   map[string][2]string{"POST /v1/sessions/s1/turns/t1/messages": {"409", `{"error":{"code":"turn_not_running","message":"Turn t1 is queued"}}`}},
			args:    []string{"session", "turn", "send", "s1", "t1", "--text", "hey"},
			want:    ExitConflict,
			wantErr: "turn_not_running",
		},
		{
			name:    "other API error",
			reply:   map[string][2]string{"GET /v1/sessions/s1": {"401", `{"error":{"code":"unauthorized","message":"bad key"}}`}},
			args:    []string{"session", "get", "s1"},
			want:    ExitFailure,
			wantErr: "Error: unauthorized: bad key",
		},
		{
			name: "wait completed",
			reply: map[string][2]string{"GET /v1/sessions/s1/turns/t1/wait": {"200", settledCompleted},
				"GET /v1/sessions/s1/events": {"200", `{"records":[{"session_id":"s1","turn_id":"t1","sequence":2,"kind":"turn.output","data":{"content":[{"type":"text","text":"working"}]}},` +
					`{"session_id":"s1","turn_id":"t0","sequence":3,"kind":"turn.output","data":{"content":[{"type":"text","text":"another Turn's"}]}}],"next_after":3,"has_more":false}`}},
			args:    []string{"session", "turn", "wait", "s1", "t1"},
			want:    0,
			wantOut: "Output:\nworking\nTurn t1 completed\nAll done\nResult: {\n  \"ok\": true\n}\n",
		},
		{
			name:    "wait failed",
			reply:   map[string][2]string{"GET /v1/sessions/s1/turns/t1/wait": {"200", `{"status":"settled","outcome":{"status":"failed","error":{"code":"handler_failed","message":"boom"}}}`}},
			args:    []string{"session", "turn", "wait", "s1", "t1"},
			want:    ExitNotCompleted,
			wantOut: "Turn t1 failed: handler_failed: boom\n",
			wantErr: "Error: Turn t1 failed: handler_failed: boom",
		},
		{
			name:    "wait timed out",
			reply:   map[string][2]string{"GET /v1/sessions/s1/turns/t1/wait": {"200", `{"status":"timeout"}`}},
			args:    []string{"session", "turn", "wait", "s1", "t1", "--timeout", "20ms"},
			want:    ExitWaitTimeout,
			wantErr: "did not settle within 20ms",
		},
		{
			name:    "wait timed out, json",
			reply:   map[string][2]string{"GET /v1/sessions/s1/turns/t1/wait": {"200", `{"status":"timeout"}`}},
			args:    []string{"--json", "session", "turn", "wait", "s1", "t1", "--timeout", "20ms"},
			want:    ExitWaitTimeout,
			wantOut: "{\n  \"status\": \"timeout\"\n}\n",
		},
		{
			name: "create --wait interrupted",
			reply: map[string][2]string{
				"POST /v1/sessions":                 {"201", `{"session":{"id":"s1","agent":"a"},"turn":{"id":"t1","session_id":"s1","sequence":1,"status":"queued"}}`},
				"GET /v1/sessions/s1/turns/t1/wait": {"200", `{"status":"settled","outcome":{"status":"interrupted","error":{"code":"interrupted"}}}`},
			},
			args:     []string{"session", "create", "--agent", "a", "--input-file", "-", "--wait"},
			want:     ExitNotCompleted,
			wantOut:  "Session s1 created (agent a)\nTurn t1 queued (sequence 1)\nTurn t1 interrupted: interrupted\n",
			wantBody: `"input":{"issue":42}`,
		},
		{
			name: "create --wait --json",
			reply: map[string][2]string{
				"POST /v1/sessions":                 {"200", `{"session":{"id":"s1","agent":"a"},"turn":{"id":"t1","session_id":"s1","sequence":1,"status":"queued"}}`},
				"GET /v1/sessions/s1/turns/t1/wait": {"200", settledCompleted},
			},
			args:     []string{"--json", "session", "create", "--agent", "a", "--text", "hi", "--key", "k", "--wait"},
			want:     0,
			wantOut:  `"outcome": {`,
			wantBody: `"input":[{"type":"text","text":"hi"}],"key":"k"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := serve(t, tc.reply)
			code, out, errOut := run(t, `{"issue":42}`, tc.args...)
			if code != tc.want {
				t.Errorf("exit %d; want %d (stdout %q, stderr %q)", code, tc.want, out, errOut)
			}
			if tc.wantOut != "" && !strings.Contains(out, tc.wantOut) {
				t.Errorf("stdout %q; want it to contain %q", out, tc.wantOut)
			}
			if tc.wantErr != "" && !strings.Contains(errOut, tc.wantErr) {
				t.Errorf("stderr %q; want it to contain %q", errOut, tc.wantErr)
			}
			if tc.wantBody != "" && !strings.Contains(a.body[0], tc.wantBody) {
				t.Errorf("request body %s; want it to contain %s", a.body[0], tc.wantBody)
			}
			for _, r := range a.seen {
				if r.Header.Get("Authorization") != "Bearer sk_test" {
					t.Errorf("%s %s: Authorization %q", r.Method, r.URL, r.Header.Get("Authorization"))
				}
			}
		})
	}
}

func TestFlagsOverrideEnvironment(t *testing.T) {
	a, url := serve(t, map[string][2]string{"GET /v1/sessions/s1": {"200", `{"id":"s1"}`}})
	t.Setenv("HELMR_API_URL", deadURL(t))
	t.Setenv("HELMR_API_KEY", "from-env")
	code, _, errOut := run(t, "", "--api-url", url, "--api-key", "from-flag", "session", "get", "s1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := a.seen[0].Header.Get("Authorization"); got != "Bearer from-flag" {
		t.Errorf("Authorization %q", got)
	}
}

func TestSessionListQueryFromFlags(t *testing.T) {
	a, _ := serve(t, map[string][2]string{"GET /v1/sessions": {"200", `{"sessions":[],"next_cursor":"c2"}`}})
	code, _, errOut := run(t, "", "session", "list", "--agent", "a", "--status", "open,closing", "--status", "closed", "--parent", "p", "--limit", "10", "--cursor", "c1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if q := a.seen[0].URL.RawQuery; q != "agent=a&cursor=c1&limit=10&parent_session_id=p&status=open&status=closing&status=closed" {
		t.Errorf("query %q", q)
	}
	if !strings.Contains(errOut, "--cursor c2") {
		t.Errorf("stderr %q; want the next cursor", errOut)
	}
}

func TestInputFileFromDisk(t *testing.T) {
	a, _ := serve(t, map[string][2]string{"POST /v1/sessions/s1/turns": {"201", `{"id":"t2","session_id":"s1","sequence":2,"status":"queued"}`}})
	path := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(path, []byte(`[{"type":"text","text":"from file"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "", "session", "enqueue", "s1", "--input-file", path, "--idempotency-key", "ik")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if out != "Turn t2 queued (sequence 2) in Session s1\n" {
		t.Errorf("stdout %q", out)
	}
	var body map[string]any
	_ = json.Unmarshal([]byte(a.body[0]), &body)
	if body["idempotency_key"] != "ik" || fmt.Sprint(body["input"]) != "[map[text:from file type:text]]" {
		t.Errorf("body %s", a.body[0])
	}
}

func TestExtraCommands(t *testing.T) {
	var sawURL string
	extra := func(g *Globals) *cobra.Command {
		return &cobra.Command{
			Use: "custom",
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := Client(g)
				if err != nil {
					return err
				}
				_ = c
				sawURL = g.ResolvedAPIURL()
				if len(args) > 0 && args[0] == "fail" {
					return errors.New("build failed")
				}
				if len(args) > 0 && args[0] == "code" {
					return &ExitError{Code: 42, Err: errors.New("custom")}
				}
				return nil
			},
		}
	}
	var out, errb bytes.Buffer
	s := Streams{In: strings.NewReader(""), Out: &out, Err: &errb}
	if code := Main(context.Background(), []string{"--api-key", "k", "--api-url", "http://example.test:1", "custom"}, s, extra); code != 0 {
		t.Errorf("deploy: exit %d: %s", code, errb.String())
	}
	if sawURL != "http://example.test:1" {
		t.Errorf("extra command saw URL %q", sawURL)
	}
	if code := Main(context.Background(), []string{"--api-key", "k", "custom", "fail"}, s, extra); code != ExitFailure {
		t.Errorf("deploy fail: exit %d; want 1", code)
	}
	if code := Main(context.Background(), []string{"--api-key", "k", "custom", "code"}, s, extra); code != 42 {
		t.Errorf("deploy code: exit %d; want 42", code)
	}
}

// sseServer serves n records as real SSE frames, then keep-alives until the
// client leaves.
func sseServer(t *testing.T, n int) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "text/event-stream" {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"records":[{"session_id":"s1","turn_id":null,"sequence":1,"created_at":"2025-01-02T03:04:05Z","kind":"session.created","data":{}}],"next_after":1,"has_more":true,"retained_after":0}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 1; i <= n; i++ {
			fmt.Fprintf(w, "id: %d\ndata: {\"session_id\":\"s1\",\"sequence\":%d,\"created_at\":\"2025-01-02T03:04:05Z\",\"kind\":\"turn.output\",\"data\":{\"content\":[{\"type\":\"text\",\"text\":\"part %d\"}]}}\n\n", i, i, i)
		}
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
				io.WriteString(w, ": ping\n\n")
				w.(http.Flusher).Flush()
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestEventsFollow(t *testing.T) {
	url := sseServer(t, 5)
	code, out, errOut := run(t, "", "--api-key", "k", "--api-url", url, "session", "events", "s1", "--follow", "--limit", "3", "--jsonl")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[2], `"sequence":3`) {
		t.Errorf("output %q", out)
	}

	// Interrupted by the user (ctx ends): exit 0 with what arrived.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var o, e bytes.Buffer
	code = Main(ctx, []string{"--api-key", "k", "--api-url", url, "session", "events", "s1", "-f"}, Streams{Out: &o, Err: &e})
	if code != 0 {
		t.Fatalf("follow until interrupted: exit %d: %s", code, e.String())
	}
	if !strings.Contains(o.String(), "turn.output") || !strings.Contains(o.String(), "part 5") {
		t.Errorf("human output %q", o.String())
	}
}

func TestEventsPage(t *testing.T) {
	url := sseServer(t, 0)
	code, out, errOut := run(t, "", "--api-key", "k", "--api-url", url, "session", "events", "s1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if out != "     1  2025-01-02T03:04:05Z  session.created\n" || errOut != "More events: --after 1\n" {
		t.Errorf("stdout %q stderr %q", out, errOut)
	}
}
