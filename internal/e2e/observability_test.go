package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads url's Prometheus text with key ("" for none).
func scrape(t *testing.T, u, key string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// sample finds the metric of family name with exactly labels; nil if none.
func sample(fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.Metric {
		if len(m.Label) != len(labels) {
			continue
		}
		for _, l := range m.Label {
			if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
				continue next
			}
		}
		return m
	}
	return nil
}

// value is a counter's or gauge's value, or a histogram's count.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	m := sample(fams, name, labels)
	switch {
	case m == nil:
		return 0
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	t.Fatalf("%s %v: no value", name, labels)
	return 0
}

// TestMetricsAfterAWorkload: after a known workload the metrics on the
// API port (behind the API key) say exactly what happened: Turns admitted
// and settled by status and error code, the Turn histograms' counts,
// Sessions by status, processes started, requests by route and status.
func TestMetricsAfterAWorkload(t *testing.T) {
	p := startPlane(t, "")
	var sessions []string
	for _, in := range []string{"one", "two", "three"} {
		r := p.create("echo", text(in))
		if o := p.wait(r.Session.ID, r.Turn.ID); o.Status != helmrtype.TurnCompleted {
			t.Fatalf("echo %s: %+v", in, o)
		}
		sessions = append(sessions, r.Session.ID)
	}
	var ts helmrtype.TurnState
	p.must("POST", "/v1/sessions/"+sessions[0]+"/turns", helmrtype.EnqueueRequest{Input: text("fail")}, &ts)
	if o := p.wait(sessions[0], ts.ID); o.Status != helmrtype.TurnFailed {
		t.Fatalf("fail: %+v", o)
	}
	p.must("POST", "/v1/sessions/"+sessions[1]+"/close", nil, nil)
	p.waitEvent(sessions[1], "session.closed")
	// A Session created without input admits no Turn.
	p.create("echo", nil)

	// Without a key: refused.
	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /metrics without a key: %d", resp.StatusCode)
	}
	fams := scrape(t, p.url+"/metrics", p.key)
	echo := map[string]string{"agent": "echo"}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"helmr_turns_admitted_total", echo, 4},
		{"helmr_turns_settled_total", map[string]string{"agent": "echo", "status": "completed", "error_code": ""}, 3},
		{"helmr_turns_settled_total", map[string]string{"agent": "echo", "status": "failed", "error_code": "handler_failed"}, 1},
		{"helmr_turn_queue_wait_seconds", echo, 4},
		{"helmr_turn_run_seconds", map[string]string{"agent": "echo", "status": "completed"}, 3},
		{"helmr_turn_run_seconds", map[string]string{"agent": "echo", "status": "failed"}, 1},
		{"helmr_turn_latency_seconds", map[string]string{"agent": "echo", "status": "completed"}, 3},
		{"helmr_turn_latency_seconds", map[string]string{"agent": "echo", "status": "failed"}, 1},
		{"helmr_sessions", map[string]string{"status": "open"}, 3},
		{"helmr_sessions", map[string]string{"status": "closed"}, 1},
		{"helmr_session_processes_started_total", nil, 3},
		{"helmr_session_processes_failed_total", nil, 0},
		{"helmr_tokens_pending", nil, 0},
		{"helmr_questions_pending", nil, 0},
		{"helmr_sse_subscribers", nil, 0},
		{"helmr_state_scrape_ok", nil, 1},
		{"helmr_http_request_duration_seconds", map[string]string{"route": "POST /v1/sessions", "status": "201"}, 4},
		{"helmr_http_request_duration_seconds", map[string]string{"route": "POST /v1/sessions/{id}/turns", "status": "201"}, 1},
		{"helmr_http_request_duration_seconds", map[string]string{"route": "POST /v1/sessions/{id}/close", "status": "202"}, 1},
		{"helmr_http_request_duration_seconds", map[string]string{"route": "GET /metrics", "status": "401"}, 1},
	} {
		if got := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if fams["helmr_store_transaction_seconds"] == nil || value(t, fams, "helmr_store_transaction_seconds", map[string]string{"kind": "update"}) == 0 {
		t.Errorf("no store transactions observed")
	}
	// No label names a Session or a Turn.
	for name, f := range fams {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				for _, id := range append(sessions, ts.ID) {
					if l.GetValue() == id {
						t.Errorf("%s has the label %s=%s", name, l.GetName(), id)
					}
				}
			}
		}
	}
}

var leakedCredential = regexp.MustCompile(`hlmr_(sk|tok|proc)_[A-Za-z0-9]`)

// TestNoSecretsInLogs: helmr server on PostgreSQL (a URL with a password),
// at debug level in JSON, through a workload with API keys, a Token
// completed with its credential and session processes (whose credential is
// hlmr_proc_…), never writes a secret to its log; its request lines and
// Turn transition lines carry request_id, session_id and turn_id; and
// /metrics on --metrics-addr needs no key.
func TestNoSecretsInLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs helmr server")
	}
	db, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	const password = "Pg-s3cret-Passw0rd"
	user := "postgres"
	if db.User != nil && db.User.Username() != "" {
		user = db.User.Username()
	}
	db.User = url.UserPassword(user, password)
	metricsAddr := freeAddr(t)
	data := t.TempDir()
	s := startServer(t, data, "server", "--database", db.String(), "--log-level", "debug", "--log-format", "json", "--metrics-addr", metricsAddr)
	if out, errOut, code := s.cli(t, "deploy", "testdata/agents"); code != 0 {
		t.Fatalf("deploy: %d %s %s", code, out, errOut)
	}
	var rec helmrtype.SessionCreateReceipt
	if err := apiCall(s.url, s.key, "POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "waiter", Input: text("token - -")}, &rec); err != nil {
		t.Fatal(err)
	}
	// The Token's credential, from the Turn's output.
	var ti tokenInfo
	for deadline := time.Now().Add(60 * time.Second); ti.Token == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var page helmrtype.SessionEventPage
		if err := apiCall(s.url, s.key, "GET", "/v1/sessions/"+rec.Session.ID+"/events", nil, &page); err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Records {
			var d struct{ Content helmrtype.Content }
			json.Unmarshal(e.Data, &d)
			for _, part := range d.Content {
				if part.Type == "json" {
					json.Unmarshal(part.Value, &ti)
				}
			}
		}
	}
	if ti.Secret == "" {
		t.Fatalf("no token in the output:\n%s", s.output())
	}
	if err := apiCall(s.url, ti.Secret, "POST", "/v1/tokens/"+ti.Token+"/complete", map[string]any{"data": map[string]bool{"ok": true}}, nil); err != nil {
		t.Fatal(err)
	}
	// A wrong key and a wrong Token credential are logged as failures too.
	apiCall(s.url, "hlmr_sk_wrongwrongwrong", "GET", "/v1/sessions", nil, nil)
	apiCall(s.url, "hlmr_tok_wrongwrongwrong", "POST", "/v1/tokens/"+ti.Token+"/complete", map[string]any{"data": 1}, nil)
	var res helmrtype.TimedTurnWaitResult
	if err := apiCall(s.url, s.key, "GET", "/v1/sessions/"+rec.Session.ID+"/turns/"+rec.Turn.ID+"/wait?timeout=60s", nil, &res); err != nil || res.Outcome == nil || res.Outcome.Status != helmrtype.TurnCompleted {
		t.Fatalf("wait: %v %+v", err, res)
	}
	fams := scrape(t, "http://"+metricsAddr+"/metrics", "")
	if got := value(t, fams, "helmr_turns_settled_total", map[string]string{"agent": "waiter", "status": "completed", "error_code": ""}); got != 1 {
		t.Errorf("metrics on --metrics-addr: waiter completed %v, want 1", got)
	}
	s.kill()
	out := s.output()
	for _, secret := range []string{s.key, ti.Secret, password, "wrongwrongwrong"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log has the secret %q", secret)
		}
	}
	if m := leakedCredential.FindString(out); m != "" {
		t.Errorf("the log has a credential: %q", m)
	}
	// Request and Turn transition lines carry their IDs.
	var sawRequest, sawTurn bool
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		switch {
		case l["msg"] == "request" && l["route"] == "GET /v1/sessions/{id}/turns/{turn_id}/wait":
			sawRequest = l["request_id"] != nil && l["session_id"] == rec.Session.ID && l["turn_id"] == rec.Turn.ID
		case l["msg"] == "turn completed" && l["turn_id"] == rec.Turn.ID:
			sawTurn = l["session_id"] == rec.Session.ID && l["agent"] == "waiter"
		}
	}
	if !sawRequest || !sawTurn {
		t.Errorf("request line with IDs %v, turn line with IDs %v:\n%s", sawRequest, sawTurn, out)
	}
}
