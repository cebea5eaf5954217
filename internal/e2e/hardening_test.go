package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/controlplane"
)

// rawCall sends body as it is and returns the status and the decoded
// error envelope (nil when the body is not one).
func rawCall(t *testing.T, url, key, method, path, body string, header http.Header) (int, *helmrtype.Error, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var env helmrtype.ErrorEnvelope
	if json.Unmarshal(data, &env) != nil {
		return resp.StatusCode, nil, resp.Header
	}
	return resp.StatusCode, env.Error, resp.Header
}

// TestStrictBodiesAndEnvelopes: a Command's cancel takes an empty body or
// an empty object like every control route, and every /v1 error has the
// envelope, a path with .. included.
func TestStrictBodiesAndEnvelopes(t *testing.T) {
	p := startPlane(t, "")
	var c helmrtype.ComputerState
	p.must("POST", "/v1/computers", helmrtype.ComputerCreateRequest{Template: "box"}, &c)
	var cmd helmrtype.CommandState
	p.must("POST", "/v1/computers/"+c.ID+"/commands", helmrtype.CommandRequest{Command: []string{"/bin/sleep", "30"}}, &cmd)
	for _, body := range []string{"not json", `{"unknown": 1}`, `{} {}`} {
		if st, e, _ := rawCall(t, p.url, p.key, "POST", "/v1/commands/"+cmd.ID+"/cancel", body, nil); st != 400 || e == nil || e.Code != helmrtype.CodeInvalidRequest {
			t.Fatalf("cancel with body %q: %d %+v", body, st, e)
		}
	}
	if st, e, _ := rawCall(t, p.url, p.key, "POST", "/v1/commands/"+cmd.ID+"/cancel", "{}", nil); st != 200 || e != nil {
		t.Fatalf("cancel with {}: %d %+v", st, e)
	}
	for _, path := range []string{"/v1/sessions/../agents", "/v1/./agents", "/v1//agents", "/v1/sessions/x/.."} {
		if st, e, _ := rawCall(t, p.url, p.key, "GET", path, "", nil); st != 404 || e == nil || e.Code != helmrtype.CodeNotFound {
			t.Fatalf("GET %s: %d %+v", path, st, e)
		}
	}
	// A header past the limit is refused.
	big := http.Header{"X-Big": {strings.Repeat("x", 100<<10)}}
	if st, _, _ := rawCall(t, p.url, p.key, "GET", "/v1/agents", "", big); st != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a 100 KiB header: %d", st)
	}
}

// TestFailedAuthenticationIsRateLimited: after a burst of failures an
// address gets 429 rate_limited with the envelope and Retry-After, before
// its credential is looked up.
func TestFailedAuthenticationIsRateLimited(t *testing.T) {
	p := startPlane(t, "")
	limited := 0
	var last *helmrtype.Error
	var retry string
	for i := 0; i < 80; i++ {
		st, e, h := rawCall(t, p.url, "hlmr_wrong_key", "GET", "/v1/agents", "", nil)
		switch st {
		case 401:
		case 429:
			limited++
			last, retry = e, h.Get("Retry-After")
		default:
			t.Fatalf("a wrong key: %d %+v", st, e)
		}
	}
	if limited == 0 || last == nil || last.Code != helmrtype.CodeRateLimited || retry == "" {
		t.Fatalf("80 wrong keys: %d limited, last %+v, Retry-After %q", limited, last, retry)
	}
	// A Token's public credential is limited the same way.
	if st, e, _ := rawCall(t, p.url, "hlmr_tok_wrong", "POST", "/v1/tokens/x/complete", "{}", nil); st != 429 || e == nil {
		t.Fatalf("a wrong Token credential from a limited address: %d %+v", st, e)
	}
	// No credential at all costs no store read and is not counted: it is
	// 401 still, from a fresh plane's address too.
	q := startPlane(t, "")
	for i := 0; i < 80; i++ {
		if st, e, _ := rawCall(t, q.url, "", "GET", "/v1/agents", "", nil); st != 401 || e == nil || e.Code != helmrtype.CodeUnauthorized {
			t.Fatalf("request %d without a key: %d %+v", i, st, e)
		}
	}
}

// TestDataFilesAreOwnerOnly: the data directory is 0700 and the database
// 0600.
func TestDataFilesAreOwnerOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startPlane(t, dir)
	p.must("GET", "/v1/agents", nil, nil)
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "helmr.db"): 0o600, filepath.Join(dir, "helmr.db-wal"): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Fatalf("%s has mode %v, want %v", path, fi.Mode().Perm(), want)
		}
	}
}

// TestComputersUnderStoragePressure: below the free-space floor Computer
// creation and Commands are refused with 507 like Sessions, and /readyz
// says why.
func TestComputersUnderStoragePressure(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 40)
	p := startPlaneConfig(t, "127.0.0.1:0", controlplane.Config{MinFreeBytes: 1 << 30, FreeSpace: func(string) (uint64, error) { return uint64(free.Load()), nil }})
	var c helmrtype.ComputerState
	p.must("POST", "/v1/computers", helmrtype.ComputerCreateRequest{Template: "box"}, &c)
	free.Store(1 << 20)
	p.cp.CheckDisk(t.Context())
	var he *helmrtype.Error
	if err := p.call("POST", "/v1/computers", helmrtype.ComputerCreateRequest{Template: "box"}, nil); !errors.As(err, &he) || he.Code != helmrtype.CodeStoragePressure || he.Status != 507 {
		t.Fatalf("create a Computer under pressure: %v", err)
	}
	if err := p.call("POST", "/v1/computers/"+c.ID+"/commands", helmrtype.CommandRequest{Command: []string{"/bin/true"}}, nil); !errors.As(err, &he) || he.Code != helmrtype.CodeStoragePressure || he.Status != 507 {
		t.Fatalf("a Command under pressure: %v", err)
	}
	if st, e, _ := rawCall(t, p.url, "", "GET", "/readyz", "", nil); st != 507 || e == nil || e.Code != helmrtype.CodeStoragePressure {
		t.Fatalf("/readyz under pressure: %d %+v", st, e)
	}
	free.Store(1 << 40)
	p.cp.CheckDisk(t.Context())
	if st, _, _ := rawCall(t, p.url, "", "GET", "/readyz", "", nil); st != 200 {
		t.Fatalf("/readyz after pressure: %d", st)
	}
	p.must("POST", "/v1/computers/"+c.ID+"/commands", helmrtype.CommandRequest{Command: []string{"/bin/true"}}, nil)
}

// TestNothingOfTheServerReachesAComputer: a helmr server started with a
// secret in its environment and an extra inherited descriptor: a Command
// sees neither, and no host process's command line or environment holds
// a session credential.
func TestNothingOfTheServerReachesAComputer(t *testing.T) {
	needSandbox(t)
	if testing.Short() {
		t.Skip("runs helmr server")
	}
	leak, err := os.CreateTemp(t.TempDir(), "inherited-*.log")
	if err != nil {
		t.Fatal(err)
	}
	defer leak.Close()
	const canary = "postgres://helmr:s3cret-canary@db/helmr"
	data := t.TempDir()
	s := startServerWith(t, data, []string{"HELMR_CANARY_URL=" + canary}, []*os.File{leak}, "server", "--log-level", "warn")
	if out, errOut, code := s.cli(t, "deploy", "testdata/agents"); code != 0 {
		t.Fatalf("deploy: %d %s %s", code, out, errOut)
	}
	var c helmrtype.ComputerState
	if err := apiCall(s.url, s.key, "POST", "/v1/computers", helmrtype.ComputerCreateRequest{Template: "box"}, &c); err != nil {
		t.Fatal(err)
	}
	var cmd helmrtype.CommandState
	script := `echo leaked >&3; echo leaked >&4; ls -l /proc/self/fd /proc/1/fd; for e in /proc/[0-9]*/environ; do tr '\0' '\n' < $e; done`
	if err := apiCall(s.url, s.key, "POST", "/v1/computers/"+c.ID+"/commands", helmrtype.CommandRequest{Command: []string{"/bin/bash", "-c", script}}, &cmd); err != nil {
		t.Fatal(err)
	}
	var w helmrtype.CommandWaitResult
	if err := apiCall(s.url, s.key, "GET", "/v1/commands/"+cmd.ID+"/wait?timeout=30s", nil, &w); err != nil {
		t.Fatal(err)
	}
	var logs helmrtype.CommandLogPage
	if err := apiCall(s.url, s.key, "GET", "/v1/commands/"+cmd.ID+"/logs", nil, &logs); err != nil {
		t.Fatal(err)
	}
	var all bytes.Buffer
	for _, l := range logs.Records {
		all.Write(l.Data)
	}
	t.Logf("the Command saw:\n%s", all.String())
	if strings.Contains(all.String(), "s3cret-canary") || strings.Contains(all.String(), leak.Name()) {
		t.Fatalf("a Command saw the server's environment or descriptor:\n%s", all.String())
	}
	if b, _ := os.ReadFile(leak.Name()); len(b) > 0 {
		t.Fatalf("a Command wrote to the server's inherited descriptor: %q", b)
	}
	// A session process runs; its credential is on no command line and in
	// no environment on the host.
	out, errOut, code := s.cli(t, "session", "create", "--agent", "echo", "--text", "hello", "--wait", "--json")
	if code != 0 {
		t.Fatalf("create: %d %s %s", code, out, errOut)
	}
	// The server's processes: itself and its descendants (other tests on
	// this machine run control planes of their own).
	ours := map[string]bool{strconv.Itoa(s.cmd.Process.Pid): true}
	entries, _ := os.ReadDir("/proc")
	for changed := true; changed; {
		changed = false
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if f := strings.Fields(string(b)); len(f) > 3 && ours[f[3]] && !ours[e.Name()] {
				ours[e.Name()], changed = true, true
			}
		}
	}
	if len(ours) < 3 {
		t.Fatalf("the server has no session process: %v", ours)
	}
	for pid := range ours {
		for _, f := range []string{"cmdline", "environ"} {
			if b, err := os.ReadFile(filepath.Join("/proc", pid, f)); err == nil && bytes.Contains(b, []byte("hlmr_proc_")) {
				t.Fatalf("process %s has a session credential in its %s: %q", pid, f, b)
			}
		}
	}
	t.Logf("checked the command lines and environments of %d processes of the server", len(ours))
}

// TestIdleConnectionsAreClosed: a connection kept alive after a request
// (here one without a key) is closed once idle, and a connection that
// sends nothing at all is closed too.
func TestIdleConnectionsAreClosed(t *testing.T) {
	p := startPlaneConfig(t, "127.0.0.1:0", controlplane.Config{IdleTimeout: 300 * time.Millisecond})
	addr := strings.TrimPrefix(p.url, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /v1/agents HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 401 {
		t.Fatalf("no key: %d", resp.StatusCode)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := br.Read(make([]byte, 1)); err == nil || n > 0 {
		t.Fatalf("an idle kept-alive connection stayed open: %d %v", n, err)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("an idle kept-alive connection was not closed within 10 s")
	}
}

// TestFullDiskAnswers507: with the data directory on a full filesystem
// (a small tmpfs, filled), a write that cannot be stored answers 507
// storage_pressure, never 500, and what was stored before stays.
func TestFullDiskAnswers507(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts a tmpfs: needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=24m", "helmr-test-full", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	data := filepath.Join(dir, "data")
	p := startPlaneConfig(t, "127.0.0.1:0", controlplane.Config{DataDir: data, MinFreeBytes: -1})
	r := p.create("chat", text("hi"))
	waitOutput(t, p, r.Session.ID, "listening")
	// Fill the filesystem.
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Sync()
	f.Close()
	failed := 0
	for i := 0; i < 200 && failed == 0; i++ {
		big := text(strings.Repeat("x", 64<<10))
		err := p.call("POST", "/v1/sessions/"+r.Session.ID+"/turns", helmrtype.EnqueueRequest{Input: big}, nil)
		if err == nil {
			continue
		}
		var he *helmrtype.Error
		if !errors.As(err, &he) || he.Code != helmrtype.CodeStoragePressure || he.Status != 507 {
			t.Fatalf("a write on a full disk: %v", err)
		}
		failed++
	}
	if failed == 0 {
		t.Fatal("200 writes of 64 KiB on a full disk all succeeded")
	}
	// What was stored before is still there.
	os.Remove(filepath.Join(dir, "filler"))
	if s := p.session(r.Session.ID); s.ID != r.Session.ID {
		t.Fatalf("the Session after a full disk: %+v", s)
	}
}

// TestDiskLimitStopsCommandsAndTurns: a Template's Resources.Disk stops a
// Command and a Turn that write past it, each with a limit_exceeded
// error, and nothing else of the host fills.
func TestDiskLimitStopsCommandsAndTurns(t *testing.T) {
	p := startPlane(t, "")
	var c helmrtype.ComputerState
	p.must("POST", "/v1/computers", helmrtype.ComputerCreateRequest{Template: "tight"}, &c)
	var cmd helmrtype.CommandState
	p.must("POST", "/v1/computers/"+c.ID+"/commands", helmrtype.CommandRequest{
		Command: []string{"/bin/bash", "-c", "for i in $(seq 64); do head -c 1048576 /dev/zero > f$i; sleep 0.1; done"}}, &cmd)
	var w helmrtype.CommandWaitResult
	p.must("GET", "/v1/commands/"+cmd.ID+"/wait?timeout=30s", nil, &w)
	var got helmrtype.CommandState
	p.must("GET", "/v1/commands/"+cmd.ID, nil, &got)
	if got.Status != helmrtype.CommandFailed || got.Error == nil || got.Error.Code != helmrtype.CodeLimitExceeded {
		t.Fatalf("a Command past its disk limit: %+v", got)
	}
	t.Logf("the Command: %s: %s", got.Status, got.Error.Message)

	r := p.create("tight", text("go"))
	o := p.wait(r.Session.ID, r.Turn.ID)
	if o.Status != helmrtype.TurnFailed || o.Error == nil || o.Error.Code != helmrtype.CodeLimitExceeded {
		t.Fatalf("a Turn past its disk limit: %+v", o)
	}
	t.Logf("the Turn: %s: %s", o.Status, o.Error.Message)
}

// TestUploadedProgramPrintsItsManifestInASandbox: the program a client
// uploads runs with the manifest flag inside a sandbox, not on the host:
// it cannot write a host file or read the server's environment, and its
// manifest is still read.
func TestUploadedProgramPrintsItsManifestInASandbox(t *testing.T) {
	needSandbox(t)
	t.Setenv("HELMR_CANARY_SECRET", "server-secret-42")
	p := startPlane(t, "")
	m, err := json.Marshal(agentBinary(t).Manifest)
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "escaped")
	script := "#!/bin/sh\n" +
		"echo escaped > " + marker + " 2>/dev/null\n" +
		"env | grep -q server-secret-42 && echo leaked > " + marker + "\n" +
		"cat <<'EOF'\n" + string(m) + "\nEOF\n"
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("binary", "agent")
	fw.Write([]byte(script))
	mw.Close()
	req, _ := http.NewRequest("POST", p.url+"/v1/deployments", &body)
	req.Header.Set("Authorization", "Bearer "+p.key)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 && resp.StatusCode != 200 {
		t.Fatalf("upload: %d %s", resp.StatusCode, out)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Fatalf("the uploaded program ran on the host: %q", b)
	}
}

// TestRequestIDs: every /v1 answer names its request, and the Go client
// keeps it on an error.
func TestRequestIDs(t *testing.T) {
	p := startPlane(t, "")
	_, _, h := rawCall(t, p.url, p.key, "GET", "/v1/agents", "", nil)
	_, _, h2 := rawCall(t, p.url, p.key, "GET", "/v1/sessions/nope", "", nil)
	if a, b := h.Get("X-Request-Id"), h2.Get("X-Request-Id"); a == "" || b == "" || a == b {
		t.Fatalf("request IDs %q and %q", a, b)
	}
	c := helmrclient.New(p.url, p.key)
	_, err := c.Sessions.Get(t.Context(), "nope")
	var he *helmrtype.Error
	if !errors.As(err, &he) || he.RequestID == "" {
		t.Fatalf("a client error without its request ID: %#v", err)
	}
}

// TestStreamsOutliveTheWriteTimeout: the server's write timeout bounds
// non-streaming responses only; a Command's followed logs and a Session's
// event stream go on past it (here 1 s) until they end.
func TestStreamsOutliveTheWriteTimeout(t *testing.T) {
	p := startPlaneConfig(t, "127.0.0.1:0", controlplane.Config{WriteTimeout: time.Second})
	var c helmrtype.ComputerState
	p.must("POST", "/v1/computers", helmrtype.ComputerCreateRequest{Template: "box"}, &c)
	var cmd helmrtype.CommandState
	p.must("POST", "/v1/computers/"+c.ID+"/commands", helmrtype.CommandRequest{Command: []string{"/bin/sh", "-c", "echo one; sleep 3; echo two"}}, &cmd)
	req, _ := http.NewRequest("GET", p.url+"/v1/commands/"+cmd.ID+"/logs?follow=true", nil)
	req.Header.Set("Authorization", "Bearer "+p.key)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || !strings.Contains(string(body), "event: end") {
		t.Fatalf("a Command's followed logs past the write timeout: %d %v\n%s", resp.StatusCode, err, body)
	}

	var s helmrtype.SessionCreateReceipt
	p.must("POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "echo"}, &s)
	req, _ = http.NewRequest("GET", p.url+"/v1/sessions/"+s.Session.ID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+p.key)
	req.Header.Set("Accept", "text/event-stream")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	go func() {
		time.Sleep(2500 * time.Millisecond)
		var tr helmrtype.TurnState
		p.must("POST", "/v1/sessions/"+s.Session.ID+"/turns", helmrtype.EnqueueRequest{Input: text("late")}, &tr)
	}()
	br := bufio.NewReader(resp.Body)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the event stream ended past the write timeout: %v", err)
		}
		if strings.Contains(line, "late") {
			return
		}
	}
	t.Fatal("no event of the late Turn")
}

// TestCommandCwdWithNUL: a NUL in a Command's cwd is refused; bubblewrap
// reads its options NUL-separated, and the rest would be options of its
// own (a bind of a host directory).
func TestCommandCwdWithNUL(t *testing.T) {
	p := startPlane(t, "")
	var c helmrtype.ComputerState
	p.must("POST", "/v1/computers", helmrtype.ComputerCreateRequest{Template: "box"}, &c)
	body := `{"command": ["/bin/cat", "/tmp/injected/hostname"], "cwd": "/workspace/\u0000--ro-bind\u0000/etc\u0000/tmp/injected"}`
	st, e, _ := rawCall(t, p.url, p.key, "POST", "/v1/computers/"+c.ID+"/commands", body, nil)
	if st != 400 || e == nil || e.Code != helmrtype.CodeInvalidRequest {
		t.Fatalf("a cwd with a NUL: %d %+v", st, e)
	}
	if e != nil {
		t.Logf("refused: %s", e.Message)
	}
}

// TestCommandOutputIsBounded: a Command that prints more than the limit
// has the first bytes stored, then one note on stderr, and nothing more.
func TestCommandOutputIsBounded(t *testing.T) {
	p := startPlaneConfig(t, "127.0.0.1:0", controlplane.Config{MaxCommandOutput: 1 << 20})
	var c helmrtype.ComputerState
	p.must("POST", "/v1/computers", helmrtype.ComputerCreateRequest{Template: "box"}, &c)
	var cmd helmrtype.CommandState
	p.must("POST", "/v1/computers/"+c.ID+"/commands", helmrtype.CommandRequest{
		Command: []string{"/bin/sh", "-c", "head -c 8388608 /dev/zero | tr '\\0' x; echo after >&2"}}, &cmd)
	var w helmrtype.CommandWaitResult
	p.must("GET", "/v1/commands/"+cmd.ID+"/wait?timeout=30s", nil, &w)
	var stdout, stderr int
	var last string
	for after := int64(0); ; {
		var page helmrtype.CommandLogPage
		p.must("GET", fmt.Sprintf("/v1/commands/%s/logs?after=%d", cmd.ID, after), nil, &page)
		for _, r := range page.Records {
			if r.Stream == "stdout" {
				stdout += len(r.Data)
			} else {
				stderr += len(r.Data)
				last = string(r.Data)
			}
		}
		if len(page.Records) == 0 || page.NextAfter == after {
			break
		}
		after = page.NextAfter
	}
	if stdout > 1<<20 || stdout < 1<<19 || !strings.Contains(last, "the rest of its output was dropped") || strings.Contains(last, "after") {
		t.Fatalf("8 MiB under a 1 MiB limit: %d bytes of stdout stored, last stderr %q", stdout, last)
	}
}
