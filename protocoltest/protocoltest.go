// Package protocoltest is the conformance suite of the session protocol
// (docs/protocol.md): shared test vectors, in vectors/*.json, that play the
// control plane's side of the protocol against a real session process over
// a real WebSocket on a Unix socket, and check every message the process
// sends. Any SDK's conformance agent (README.md describes what it must do)
// passes the same vectors, so the SDKs cannot drift: the Go SDK's is
// protocoltest/goagent, the TypeScript SDK's protocoltest/ts.
//
// A vector is a list of steps, run in order:
//
//	{"expect": PATTERN}             the next message the process sends matches PATTERN
//	{"expect_unordered": [P, ...]}  the next len messages match the patterns in any order
//	{"send": MESSAGE}               the server sends MESSAGE ("$ref:NAME" strings are replaced)
//	{"quiet": "300ms"}              the process sends nothing for that long
//	{"drop": true}                  the server drops the connection (as a dying control plane)
//	{"expect_close": 1000}          the process closes the WebSocket with that status
//	                                (and "close_reason": TEXT, with that reason)
//	{"no_dial": "2s"}               the process opens no connection for that long
//	{"expect_exit": 0}              the process exits with that status
//	{"expect_stdout": PATTERN}      what the process printed, as JSON, matches PATTERN
//	{"signal": "SIGTERM"}           the process gets the signal
//
// Patterns are JSON. An object matches an object that has every key of the
// pattern with a matching value (other keys are allowed); arrays match
// element by element and must have the same length; other values must be
// equal. Strings starting with "$" are special: "$any" (present, any value),
// "$absent" (the key is absent or null), "$optional" (anything, or absent),
// "$string", "$number", "$uuid", "$prefix:TEXT", "$capture:NAME" (any value,
// kept as NAME) and "$ref:NAME" (equal to the value kept as NAME).
//
// With "auto_ack" the server acknowledges every operation (a message with an
// op) as the control plane does: an output gets the next timeline sequence
// and a token.create its token state. The other vectors send their acks.
package protocoltest

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/helmr-go/helmr/internal/protocol"
)

//go:embed vectors/*.json
var vectorFiles embed.FS

// Vector is one conformance test: a session process run with Args (none
// for a session, ["--helmr-manifest"] for the manifest) serving Agent, and
// the steps the server takes and checks.
type Vector struct {
	// Name is the file's name without .json.
	Name string `json:"name"`
	// Description says what the vector checks, with the protocol.md section.
	Description string `json:"description"`
	// Agent is HELMR_AGENT.
	Agent string `json:"agent,omitempty"`
	// Args are the program's arguments; with any, no session is served.
	Args []string `json:"args,omitempty"`
	// AutoAck acknowledges every operation as the control plane does.
	AutoAck bool `json:"auto_ack,omitempty"`
	// Steps run in order.
	Steps []Step `json:"steps"`
}

// Step is one step of a Vector; exactly one field is set (Note and
// CloseReason aside).
type Step struct {
	// Note names the step in failure reports.
	Note string `json:"note,omitempty"`
	// Expect is the pattern of the next message the process sends.
	Expect json.RawMessage `json:"expect,omitempty"`
	// ExpectUnordered are the patterns of the next messages, in any order.
	ExpectUnordered []json.RawMessage `json:"expect_unordered,omitempty"`
	// Send is a message the server sends ("$ref:NAME" strings replaced).
	Send json.RawMessage `json:"send,omitempty"`
	// Quiet is a Duration during which the process must send nothing.
	Quiet string `json:"quiet,omitempty"`
	// Drop drops the connection without a close frame.
	Drop bool `json:"drop,omitempty"`
	// ExpectClose is the status the process closes the WebSocket with.
	ExpectClose *int `json:"expect_close,omitempty"`
	// CloseReason, with ExpectClose, is the close's reason.
	CloseReason string `json:"close_reason,omitempty"`
	// NoDial is a Duration during which the process must open no
	// connection (make no request to the endpoint).
	NoDial string `json:"no_dial,omitempty"`
	// ExpectExit is the status the process exits with.
	ExpectExit *int `json:"expect_exit,omitempty"`
	// ExpectStdout is the pattern of what the process printed, as JSON.
	ExpectStdout json.RawMessage `json:"expect_stdout,omitempty"`
	// Signal is sent to the process: SIGTERM or SIGINT.
	Signal string `json:"signal,omitempty"`
}

// Vectors returns the suite's vectors, sorted by name.
func Vectors() ([]Vector, error) {
	names, err := fs.Glob(vectorFiles, "vectors/*.json")
	if err != nil {
		return nil, err
	}
	var out []Vector
	for _, n := range names {
		b, err := vectorFiles.ReadFile(n)
		if err != nil {
			return nil, err
		}
		var v Vector
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		if v.Name == "" {
			v.Name = strings.TrimSuffix(filepath.Base(n), ".json")
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// parallel bounds the vectors that run at once (each starts a process).
const parallel = 4

// Run runs every vector as a subtest of t against the agent program started
// by argv (for example {"/path/to/agent"} or {"node", "agent.mjs"}), a few
// at a time.
func Run(t *testing.T, argv []string) {
	t.Helper()
	vs, err := Vectors()
	if err != nil {
		t.Fatal(err)
	}
	slots := make(chan struct{}, parallel)
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel()
			slots <- struct{}{}
			defer func() { <-slots }()
			if err := RunVector(context.Background(), v, argv); err != nil {
				t.Fatalf("%s (%s):\n%v", v.Name, v.Description, err)
			}
		})
	}
}

// stepTimeout bounds each step that waits for the process.
const stepTimeout = 15 * time.Second

// event is what a connection's reader saw: a message, or the end.
type event struct {
	conn *websocket.Conn
	msg  json.RawMessage
	err  error
}

// runner is the server side of one vector.
type runner struct {
	v      Vector
	token  string
	conns  chan *websocket.Conn
	events chan event
	cur    *websocket.Conn
	caps   map[string]any
	seq    int64
	log    []string // what was exchanged, for failure reports
	cmd    *exec.Cmd
	done   chan struct{} // closed when the vector is over
	dials  atomic.Int64  // requests to the endpoint so far
}

// RunVector runs one vector against the agent program started by argv and
// returns what did not conform, with the exchange so far and the process's
// output.
func RunVector(ctx context.Context, v Vector, argv []string) (err error) {
	dir, err := os.MkdirTemp("", "helmr-conformance-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s.sock")
	r := &runner{v: v, token: testToken, conns: make(chan *websocket.Conn, 4),
		events: make(chan event, 64), caps: map[string]any{}, done: make(chan struct{})}
	defer close(r.done)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(r.serveHTTP)}
	go srv.Serve(ln)
	defer srv.Close()

	cmd := exec.Command(argv[0], append(append([]string(nil), argv[1:]...), v.Args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	connect := sock
	if len(v.Args) > 0 {
		connect = "" // the program is asked for its manifest, not connected
	}
	if err := startAgent(cmd, dir, connect, r.token, v.Agent); err != nil {
		return err
	}
	r.cmd = cmd
	exited := make(chan int, 1)
	go func() {
		cmd.Wait()
		exited <- cmd.ProcessState.ExitCode()
	}()
	defer func() {
		select {
		case <-exited:
		default:
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if err != nil {
			err = fmt.Errorf("%w\n--- exchange:\n%s\n--- stdout:\n%s\n--- stderr:\n%s", err, strings.Join(r.log, "\n"), stdout.String(), stderr.String())
		}
	}()
	for i, s := range v.Steps {
		if err := r.step(ctx, s, exited, &stdout); err != nil {
			label := fmt.Sprintf("step %d", i+1)
			if s.Note != "" {
				label += " (" + s.Note + ")"
			}
			return fmt.Errorf("%s: %w", label, err)
		}
	}
	return nil
}

// testToken is the credential the runner gives the processes it starts.
const testToken = "hlmr_proc_0123456789ab0123456789ab0123456789ab0123456789ab"

// acceptProcess is the protocol endpoint's upgrade: it checks the path,
// the credential (token) and the subprotocol as the control plane does,
// and returns the connection, or nil when it refused the request.
func acceptProcess(w http.ResponseWriter, req *http.Request, token string) *websocket.Conn {
	if req.URL.Path != protocol.Path {
		http.NotFound(w, req)
		return nil
	}
	if req.Header.Get("Authorization") != "Bearer "+token {
		http.Error(w, "unknown process token", http.StatusUnauthorized)
		return nil
	}
	ws, err := websocket.Accept(w, req, &websocket.AcceptOptions{Subprotocols: []string{protocol.Version}})
	if err != nil {
		return nil
	}
	if ws.Subprotocol() != protocol.Version {
		ws.Close(websocket.StatusPolicyViolation, "the subprotocol must be "+protocol.Version)
		return nil
	}
	ws.SetReadLimit(32 << 20)
	return ws
}

// startAgent starts cmd in a process group of its own, as the control
// plane's launcher starts a session process: with only PATH, HOME and
// TMPDIR (dir) from the environment and, when sock is set, the variables
// that connect it to the protocol endpoint on sock as agent, with the
// credential token alone on a pipe at descriptor 3.
func startAgent(cmd *exec.Cmd, dir, sock, token, agent string) error {
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + dir}
	if sock != "" {
		tr, tw, err := os.Pipe()
		if err != nil {
			return err
		}
		tw.WriteString(token)
		tw.Close()
		defer tr.Close()
		cmd.ExtraFiles = []*os.File{tr}
		cmd.Env = append(cmd.Env, protocol.EnvSocket+"="+sock, protocol.EnvTokenFD+"="+strconv.Itoa(protocol.TokenFD),
			protocol.EnvAgent+"="+agent, protocol.EnvReconnectWindow+"=30s")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %v: %w", cmd.Args, err)
	}
	return nil
}

// serveHTTP is the protocol endpoint: it checks the credential and the
// subprotocol as the control plane does, then reads the connection.
func (r *runner) serveHTTP(w http.ResponseWriter, req *http.Request) {
	r.dials.Add(1)
	ws := acceptProcess(w, req, r.token)
	if ws == nil {
		return
	}
	select {
	case r.conns <- ws:
	case <-r.done:
		ws.CloseNow()
		return
	}
	for {
		_, b, err := ws.Read(context.Background())
		select {
		case r.events <- event{conn: ws, msg: b, err: err}:
		case <-r.done:
			ws.CloseNow()
			return
		}
		if err != nil {
			return
		}
	}
}

func (r *runner) step(ctx context.Context, s Step, exited chan int, stdout *bytes.Buffer) error {
	switch {
	case s.Expect != nil:
		return r.expect([]json.RawMessage{s.Expect})
	case s.ExpectUnordered != nil:
		return r.expect(s.ExpectUnordered)
	case s.Send != nil:
		var m any
		if err := json.Unmarshal(s.Send, &m); err != nil {
			return err
		}
		m, err := r.substitute(m)
		if err != nil {
			return err
		}
		return r.send(m)
	case s.Quiet != "":
		d, err := time.ParseDuration(s.Quiet)
		if err != nil {
			return err
		}
		m, err := r.next(d)
		if err == nil {
			return fmt.Errorf("want no message for %s, got %s", s.Quiet, m)
		}
		if errors.Is(err, errTimeout) {
			return nil
		}
		return err
	case s.Drop:
		if r.cur == nil {
			return errors.New("drop: no connection")
		}
		r.log = append(r.log, "server: drops the connection")
		r.cur.CloseNow()
		r.cur = nil
		return nil
	case s.ExpectClose != nil:
		return r.expectClose(*s.ExpectClose, s.CloseReason)
	case s.NoDial != "":
		d, err := time.ParseDuration(s.NoDial)
		if err != nil {
			return err
		}
		before := r.dials.Load()
		time.Sleep(d)
		if n := r.dials.Load() - before; n > 0 {
			return fmt.Errorf("the process opened %d connection(s) within %s, want none", n, s.NoDial)
		}
		r.log = append(r.log, "server: no connection for "+s.NoDial)
		return nil
	case s.ExpectExit != nil:
		select {
		case code := <-exited:
			exited <- code
			if code != *s.ExpectExit {
				return fmt.Errorf("the process exited with status %d, want %d", code, *s.ExpectExit)
			}
			return nil
		case <-time.After(stepTimeout):
			return fmt.Errorf("the process did not exit within %s (want status %d)", stepTimeout, *s.ExpectExit)
		}
	case s.ExpectStdout != nil:
		select {
		case code := <-exited:
			exited <- code
		case <-time.After(stepTimeout):
			return errors.New("the process did not finish printing")
		}
		var got, want any
		if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
			return fmt.Errorf("stdout is not one JSON value: %v", err)
		}
		if err := json.Unmarshal(s.ExpectStdout, &want); err != nil {
			return err
		}
		return r.match("stdout", want, got, true)
	case s.Signal != "":
		sig, ok := map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT}[s.Signal]
		if !ok {
			return fmt.Errorf("signal %q: want SIGTERM or SIGINT", s.Signal)
		}
		r.log = append(r.log, "server: sends the process "+s.Signal)
		return r.cmd.Process.Signal(sig)
	}
	return errors.New("empty step")
}

var errTimeout = errors.New("timed out")

// next returns the next message of the current connection, taking a new
// connection when there is none (after a drop, or at the start) and
// acknowledging operations in auto_ack vectors.
func (r *runner) next(timeout time.Duration) (json.RawMessage, error) {
	deadline := time.After(timeout)
	for {
		select {
		case ws := <-r.conns:
			if r.cur == nil {
				r.cur = ws
				r.log = append(r.log, "server: accepted a connection")
			} else {
				ws.CloseNow()
			}
		case e := <-r.events:
			if e.conn != r.cur || r.cur == nil {
				continue
			}
			if e.err != nil {
				r.cur = nil
				return nil, fmt.Errorf("the connection ended: %w", e.err)
			}
			r.log = append(r.log, "process: "+string(e.msg))
			if r.v.AutoAck {
				if err := r.autoAck(e.msg); err != nil {
					return nil, err
				}
			}
			return e.msg, nil
		case <-deadline:
			return nil, errTimeout
		}
	}
}

// autoAck acknowledges an operation as the control plane does.
func (r *runner) autoAck(raw json.RawMessage) error {
	var m protocol.Msg
	if err := json.Unmarshal(raw, &m); err != nil || m.Op == 0 {
		return nil
	}
	ack := map[string]any{"type": protocol.TypeAck, "turn_id": m.TurnID, "op": m.Op}
	switch m.Type {
	case protocol.TypeOutput:
		r.seq++
		ack["sequence"] = r.seq
	case protocol.TypeTokenCreate:
		if m.Token != nil {
			ack["token_state"] = map[string]any{"id": m.Token.ID, "status": "pending", "tags": []string{},
				"callback_url": "http://helmr.invalid/v1/tokens/" + m.Token.ID + "/complete", "created_at": "2026-01-02T03:04:05Z"}
		}
	}
	return r.send(ack)
}

func (r *runner) send(m any) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if r.cur == nil {
		// The process has not connected yet, or reconnects: wait for it.
		select {
		case r.cur = <-r.conns:
			r.log = append(r.log, "server: accepted a connection")
		case <-time.After(stepTimeout):
			return errors.New("send: the process did not connect")
		}
	}
	r.log = append(r.log, "server: "+string(b))
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	return r.cur.Write(ctx, websocket.MessageText, b)
}

// expect takes len(patterns) messages and matches them, in any order when
// there are several.
func (r *runner) expect(patterns []json.RawMessage) error {
	want := make([]any, len(patterns))
	for i, p := range patterns {
		if err := json.Unmarshal(p, &want[i]); err != nil {
			return err
		}
	}
	matched := make([]bool, len(want))
	for range want {
		raw, err := r.next(stepTimeout)
		if err != nil {
			return fmt.Errorf("want %s: %w", patterns[firstFalse(matched)], err)
		}
		var got any
		if err := json.Unmarshal(raw, &got); err != nil {
			return fmt.Errorf("the process sent a frame that is not JSON: %s", raw)
		}
		var errs []string
		ok := false
		for i, w := range want {
			if matched[i] {
				continue
			}
			saved := r.saveCaps()
			if err := r.match("message", w, got, true); err != nil {
				r.caps = saved
				errs = append(errs, err.Error())
				continue
			}
			matched[i], ok = true, true
			break
		}
		if !ok {
			return fmt.Errorf("unexpected message %s:\n  %s", raw, strings.Join(errs, "\n  "))
		}
	}
	return nil
}

func firstFalse(b []bool) int {
	for i, v := range b {
		if !v {
			return i
		}
	}
	return 0
}

func (r *runner) saveCaps() map[string]any {
	c := make(map[string]any, len(r.caps))
	for k, v := range r.caps {
		c[k] = v
	}
	return c
}

// expectClose waits for the process to close the current connection with
// status code and, when reason is not empty, that reason.
func (r *runner) expectClose(code int, reason string) error {
	deadline := time.After(stepTimeout)
	for {
		select {
		case e := <-r.events:
			if e.conn != r.cur {
				continue
			}
			if e.err == nil {
				r.log = append(r.log, "process: "+string(e.msg))
				return fmt.Errorf("want a close with status %d, got %s", code, e.msg)
			}
			r.cur = nil
			got := int(websocket.CloseStatus(e.err))
			var ce websocket.CloseError
			errors.As(e.err, &ce)
			r.log = append(r.log, fmt.Sprintf("process: close %d %q", got, ce.Reason))
			if got != code {
				return fmt.Errorf("the connection ended with status %d (%v), want %d", got, e.err, code)
			}
			if reason != "" && ce.Reason != reason {
				return fmt.Errorf("the connection closed with reason %q, want %q", ce.Reason, reason)
			}
			return nil
		case <-deadline:
			return fmt.Errorf("no close with status %d within %s", code, stepTimeout)
		}
	}
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// match checks got against the pattern want; at names the place, for errors.
func (r *runner) match(at string, want, got any, present bool) error {
	if s, ok := want.(string); ok && strings.HasPrefix(s, "$") {
		return r.matchSpecial(at, s, got, present)
	}
	if !present {
		return fmt.Errorf("%s: absent, want %s", at, show(want))
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: got %s, want an object", at, show(got))
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			gv, ok := g[k]
			if err := r.match(at+"."+k, w[k], gv, ok); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: got %s, want %s", at, show(got), show(want))
		}
		for i := range w {
			if err := r.match(fmt.Sprintf("%s[%d]", at, i), w[i], g[i], true); err != nil {
				return err
			}
		}
		return nil
	default:
		if !equalJSON(want, got) {
			return fmt.Errorf("%s: got %s, want %s", at, show(got), show(want))
		}
		return nil
	}
}

func (r *runner) matchSpecial(at, s string, got any, present bool) error {
	name, arg, _ := strings.Cut(s, ":")
	if name == "$absent" {
		if present && got != nil {
			return fmt.Errorf("%s: got %s, want it absent", at, show(got))
		}
		return nil
	}
	if name == "$optional" {
		return nil
	}
	if !present {
		return fmt.Errorf("%s: absent, want %s", at, s)
	}
	switch name {
	case "$any":
		return nil
	case "$string":
		if _, ok := got.(string); !ok {
			return fmt.Errorf("%s: got %s, want a string", at, show(got))
		}
	case "$number":
		if _, ok := got.(float64); !ok {
			return fmt.Errorf("%s: got %s, want a number", at, show(got))
		}
	case "$uuid":
		if g, ok := got.(string); !ok || !uuidPattern.MatchString(g) {
			return fmt.Errorf("%s: got %s, want a UUID", at, show(got))
		}
	case "$prefix":
		if g, ok := got.(string); !ok || !strings.HasPrefix(g, arg) {
			return fmt.Errorf("%s: got %s, want a string starting %q", at, show(got), arg)
		}
	case "$capture":
		r.caps[arg] = got
	case "$ref":
		v, ok := r.caps[arg]
		if !ok {
			return fmt.Errorf("%s: nothing captured as %q", at, arg)
		}
		if !equalJSON(v, got) {
			return fmt.Errorf("%s: got %s, want %s (captured as %s)", at, show(got), show(v), arg)
		}
	default:
		// A literal string that starts with "$$" stands for one "$".
		if strings.HasPrefix(s, "$$") {
			if g, ok := got.(string); !ok || g != s[1:] {
				return fmt.Errorf("%s: got %s, want %q", at, show(got), s[1:])
			}
			return nil
		}
		return fmt.Errorf("%s: unknown pattern %q", at, s)
	}
	return nil
}

// substitute replaces "$ref:NAME" strings in a message to send.
func (r *runner) substitute(v any) (any, error) {
	switch x := v.(type) {
	case string:
		if name, ok := strings.CutPrefix(x, "$ref:"); ok {
			c, ok := r.caps[name]
			if !ok {
				return nil, fmt.Errorf("send: nothing captured as %q", name)
			}
			return c, nil
		}
		return x, nil
	case map[string]any:
		for k, e := range x {
			s, err := r.substitute(e)
			if err != nil {
				return nil, err
			}
			x[k] = s
		}
	case []any:
		for i, e := range x {
			s, err := r.substitute(e)
			if err != nil {
				return nil, err
			}
			x[i] = s
		}
	}
	return v, nil
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func show(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}
