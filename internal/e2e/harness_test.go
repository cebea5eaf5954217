package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/computer/local"
	"github.com/helmr-go/helmr/internal/controlplane"
	"github.com/helmr-go/helmr/internal/deploy"
	"github.com/helmr-go/helmr/internal/freezer"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
)

var (
	buildOnce sync.Once
	built     *deploy.Built
	buildErr  error
	binDir    string
)

// agentBinary builds the test agent program once per test binary.
func agentBinary(t *testing.T) *deploy.Built {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "helmr-e2e-bin-")
		if buildErr == nil {
			built, buildErr = deploy.BuildDir(context.Background(), "testdata/agents", binDir)
		}
	})
	if buildErr != nil {
		t.Fatalf("build test agents: %v", buildErr)
	}
	return built
}

func TestMain(m *testing.M) {
	// helmr dev saves a profile in the user config directory: keep the
	// tests' profiles out of the real one.
	configDir, err := os.MkdirTemp("", "helmr-e2e-config-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", configDir)
	code := pgtest.Main(m) // a PostgreSQL server for the tests that use one
	os.RemoveAll(configDir)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	hostOnce sync.Once
	// hostUnsandboxed is why bubblewrap cannot run here ("" when it can);
	// hostLimitsWhy why resource limits are not enforced ("" when they are).
	hostUnsandboxed, hostLimitsWhy string
	// hostFreezer is the kind of freezer control planes get here.
	hostFreezer string
)

// probeHost asks the local provider once what this host can do: run
// bubblewrap sandboxes, enforce resource limits.
func probeHost() {
	hostOnce.Do(func() {
		fz := freezer.New(slog.New(slog.DiscardHandler), "helmr-e2e-probe")
		hostFreezer = fz.Kind()
		freezer.Cleanup(fz)
		dir, err := os.MkdirTemp("", "helmr-e2e-probe-")
		if err != nil {
			hostUnsandboxed, hostLimitsWhy = err.Error(), err.Error()
			return
		}
		defer os.RemoveAll(dir)
		p, err := local.New(local.Options{Dir: dir, Unsafe: true, CgroupName: "helmr-e2e-probe"})
		if err != nil {
			hostUnsandboxed, hostLimitsWhy = err.Error(), err.Error()
			return
		}
		defer p.Cleanup()
		hostUnsandboxed, hostLimitsWhy = p.Unsandboxed(), p.LimitsWhy()
	})
}

// unsandboxed reports whether bubblewrap cannot run here: control planes
// of the tests then run their agents unsandboxed (UnsafeNoSandbox,
// --unsafe-no-sandbox), as helmr dev does.
func unsandboxed() bool {
	probeHost()
	return hostUnsandboxed != ""
}

// unlimited reports whether this host cannot enforce resource limits (no
// writable cgroups): helmr server then runs with --allow-unlimited.
func unlimited() bool {
	probeHost()
	return hostLimitsWhy != ""
}

// needSandbox skips a test whose point is the sandbox (escape, hardening,
// isolation) where bubblewrap cannot run, saying why.
func needSandbox(t *testing.T) {
	t.Helper()
	if unsandboxed() {
		t.Skipf("needs the bubblewrap sandbox, which cannot run here: %s", hostUnsandboxed)
	}
}

// needLimits skips a test whose point is enforced resource limits where
// this host cannot enforce them, saying why.
func needLimits(t *testing.T) {
	t.Helper()
	if unlimited() {
		t.Skipf("needs enforced resource limits (cgroups), which this host cannot give: %s", hostLimitsWhy)
	}
}

// plane is a control plane serving real HTTP on loopback.
type plane struct {
	t       *testing.T
	dataDir string
	cp      *controlplane.ControlPlane
	url     string
	key     string
	cancel  context.CancelFunc
	done    chan struct{}
}

// startPlane opens a control plane on dataDir (a new one when empty), with
// the test agents deployed.
func startPlane(t *testing.T, dataDir string) *plane {
	t.Helper()
	return startPlaneAt(t, dataDir, "127.0.0.1:0")
}

// startPlaneAt is startPlane listening on addr.
func startPlaneAt(t *testing.T, dataDir, addr string) *plane {
	t.Helper()
	return startPlaneWith(t, dataDir, addr, "")
}

// startPlaneWith is startPlaneAt on the given database ("" for SQLite in
// dataDir).
func startPlaneWith(t *testing.T, dataDir, addr, database string) *plane {
	t.Helper()
	return startPlaneConfig(t, addr, controlplane.Config{DataDir: dataDir, Database: database})
}

// startPlaneOpts is startPlane with a reattach window.
func startPlaneOpts(t *testing.T, dataDir string, reattach time.Duration) *plane {
	t.Helper()
	return startPlaneConfig(t, "127.0.0.1:0", controlplane.Config{DataDir: dataDir, ReattachWindow: reattach})
}

// startPlaneConfig opens a control plane with cfg (DataDir a new one when
// empty), with the test agents deployed, serving on addr.
func startPlaneConfig(t *testing.T, addr string, cfg controlplane.Config) *plane {
	t.Helper()
	b := agentBinary(t)
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	dataDir := cfg.DataDir
	if unsandboxed() {
		cfg.UnsafeNoSandbox = true
	}
	if os.Getenv("HELMR_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx := context.Background()
	cp, err := controlplane.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &plane{t: t, dataDir: dataDir, cp: cp, done: make(chan struct{})}
	keyFile := filepath.Join(dataDir, "api-key")
	if k, err := os.ReadFile(keyFile); err == nil {
		p.key = string(k)
	} else {
		if p.key, err = cp.Engine.CreateAPIKey(ctx, "test"); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(keyFile, []byte(p.key), 0o600)
	}
	if _, err := cp.Engine.PublishDeployment(ctx, b.Digest, b.Manifest, b.Binary, ""); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p.url = "http://" + ln.Addr().String()
	sctx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	go func() {
		defer close(p.done)
		cp.Serve(sctx, ln)
	}()
	t.Cleanup(p.stop)
	return p
}

func (p *plane) stop() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	<-p.done
	p.cp.Close(context.Background())
	p.cancel = nil
}

// call does one API request and decodes a 2xx body into out; a non-2xx
// answer is returned as *helmrtype.Error.
func (p *plane) call(method, path string, body, out any) error {
	return apiCall(p.url, p.key, method, path, body, out)
}

// apiCall does one API request to the server at url with key; a non-2xx
// answer is returned as *helmrtype.Error, a transport error as it is.
func apiCall(url, key, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		var env helmrtype.ErrorEnvelope
		if err := json.Unmarshal(data, &env); err != nil || env.Error == nil {
			return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, data)
		}
		env.Error.Status = resp.StatusCode
		return env.Error
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (p *plane) must(method, path string, body, out any) {
	p.t.Helper()
	if err := p.call(method, path, body, out); err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
}

func text(s string) json.RawMessage {
	b, _ := json.Marshal(helmrtype.Text(s))
	return b
}

func (p *plane) create(agent string, input json.RawMessage) helmrtype.SessionCreateReceipt {
	p.t.Helper()
	var r helmrtype.SessionCreateReceipt
	p.must("POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: agent, Input: input}, &r)
	return r
}

// wait waits for a Turn to settle and returns its outcome.
func (p *plane) wait(sessionID, turnID string) helmrtype.TurnOutcome {
	p.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var r helmrtype.TimedTurnWaitResult
		p.must("GET", "/v1/sessions/"+sessionID+"/turns/"+turnID+"/wait?timeout=20s", nil, &r)
		if r.Status == helmrtype.WaitSettled {
			return *r.Outcome
		}
	}
	p.t.Fatalf("turn %s did not settle", turnID)
	return helmrtype.TurnOutcome{}
}

// events returns the whole timeline of a Session.
func (p *plane) events(sessionID string) []helmrtype.SessionEvent {
	p.t.Helper()
	var all []helmrtype.SessionEvent
	after := int64(0)
	for {
		var page helmrtype.SessionEventPage
		p.must("GET", fmt.Sprintf("/v1/sessions/%s/events?after=%d&limit=1000", sessionID, after), nil, &page)
		all = append(all, page.Records...)
		after = page.NextAfter
		if !page.HasMore {
			return all
		}
	}
}

// waitEvent waits until the Session's timeline has an event of kind.
func (p *plane) waitEvent(sessionID, kind string) helmrtype.SessionEvent {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ch, stop := p.cp.Engine.Watch(sessionID)
		for _, e := range p.events(sessionID) {
			if e.Kind == kind {
				stop()
				return e
			}
		}
		select {
		case <-ch:
		case <-time.After(time.Second):
		}
		stop()
	}
	p.t.Fatalf("no %s event in session %s", kind, sessionID)
	return helmrtype.SessionEvent{}
}

// hasOutput reports whether any output record of the Session contains s.
func (p *plane) hasOutput(sessionID, s string) bool {
	p.t.Helper()
	for _, e := range p.events(sessionID) {
		if e.Kind == "turn.output" && strings.Contains(string(e.Data), s) {
			return true
		}
	}
	return false
}
