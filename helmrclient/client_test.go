package helmrclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/helmr-go/helmr/helmrtype"
)

func TestErrorDecoding(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		body       string
		wantCode   helmrtype.Code
		wantMsg    string
		wantDetail string
	}{
		{"envelope", 404, `{"error":{"code":"not_found","message":"no Session x","details":{"id":"x"}}}`, helmrtype.CodeNotFound, "no Session x", "x"},
		{"idempotency conflict", 409, `{"error":{"code":"idempotency_conflict","message":"key reused"}}`, helmrtype.CodeIdempotencyConflict, "key reused", ""},
		{"envelope without code", 409, `{"error":{"message":"busy"}}`, helmrtype.CodeConflict, "busy", ""},
		{"plain text from a proxy", 502, "Bad Gateway\n", helmrtype.CodeUnavailable, "HTTP 502: Bad Gateway", ""},
		{"empty body", 401, "", helmrtype.CodeUnauthorized, "HTTP 401: Unauthorized", ""},
		{"unknown code is kept", 400, `{"error":{"code":"brand_new","message":"m"}}`, "brand_new", "m", ""},
		{"server error", 500, `oops`, helmrtype.CodeInternal, "HTTP 500: oops", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			c := newTestClient(t, srv)
			_, err := c.Sessions.Get(context.Background(), "x")
			if !errors.Is(err, tc.wantCode) {
				t.Fatalf("err = %v; want code %s", err, tc.wantCode)
			}
			var he *helmrtype.Error
			if !errors.As(err, &he) {
				t.Fatalf("err %T is not *helmrtype.Error", err)
			}
			if he.Status != tc.status || he.Message != tc.wantMsg {
				t.Errorf("status %d message %q; want %d %q", he.Status, he.Message, tc.status, tc.wantMsg)
			}
			if tc.wantDetail != "" && he.Details["id"] != tc.wantDetail {
				t.Errorf("details = %v", he.Details)
			}
			if helmrtype.CodeOf(err) != tc.wantCode {
				t.Errorf("CodeOf = %q", helmrtype.CodeOf(err))
			}
		})
	}
}

func TestTransportErrorWraps(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close()
	c := New(u, "k")
	_, err := c.Sessions.Get(context.Background(), "x")
	var ue *url.Error
	if !errors.As(err, &ue) {
		t.Fatalf("err = %T %v; want a *url.Error", err, err)
	}
	if helmrtype.CodeOf(err) != helmrtype.CodeInternal {
		t.Errorf("CodeOf(transport error) = %q", helmrtype.CodeOf(err))
	}
}

func TestBadBaseURL(t *testing.T) {
	for _, u := range []string{"", "localhost:7070", "ftp://x", "http://"} {
		_, err := New(u, "k").Sessions.Get(context.Background(), "x")
		if err == nil || !strings.Contains(err.Error(), "base URL") {
			t.Errorf("New(%q): err = %v; want a base URL error", u, err)
		}
	}
}

func TestSessionListQuery(t *testing.T) {
	tests := []struct {
		opts    SessionListOptions
		want    string
		wantErr bool
	}{
		{SessionListOptions{}, "", false},
		{SessionListOptions{Agent: "a", Key: "k"}, "agent=a&key=k", false},
		{SessionListOptions{Status: []string{"open", "closing"}, ParentSessionID: "p", RequesterSessionID: "r", Cursor: "c1", Limit: 20},
			"cursor=c1&limit=20&parent_session_id=p&requester_session_id=r&status=open&status=closing", false},
		{SessionListOptions{Agent: "a b/c"}, "agent=a+b%2Fc", false},
		{SessionListOptions{Key: "k"}, "", true},
		{SessionListOptions{Agent: "a", Key: "k", Limit: 5}, "", true},
		{SessionListOptions{Agent: "a", Key: "k", Status: []string{"open"}}, "", true},
		{SessionListOptions{Limit: 101}, "", true},
		{SessionListOptions{Limit: -1}, "", true},
	}
	for _, tc := range tests {
		q, err := tc.opts.query()
		if tc.wantErr {
			if !errors.Is(err, helmrtype.CodeInvalidRequest) {
				t.Errorf("%+v: err = %v; want invalid_request", tc.opts, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%+v: %v", tc.opts, err)
			continue
		}
		if got := q.Encode(); got != tc.want {
			t.Errorf("%+v: query %q; want %q", tc.opts, got, tc.want)
		}
	}
}

func TestOtherQueries(t *testing.T) {
	q, err := EventListOptions{After: 12, Limit: 1000}.query()
	if err != nil || q.Encode() != "after=12&limit=1000" {
		t.Errorf("events query %q, %v", q.Encode(), err)
	}
	q, err = EventListOptions{}.query()
	if err != nil || q.Encode() != "" {
		t.Errorf("empty events query %q, %v", q.Encode(), err)
	}
	for _, bad := range []EventListOptions{{After: -1}, {Limit: 1001}} {
		if _, err := bad.query(); !errors.Is(err, helmrtype.CodeInvalidRequest) {
			t.Errorf("%+v: err = %v", bad, err)
		}
	}
	q, err = AgentListOptions{DeploymentID: "d1", Cursor: "c", Limit: 50}.query()
	if err != nil || q.Encode() != "cursor=c&deployment_id=d1&limit=50" {
		t.Errorf("agents query %q, %v", q.Encode(), err)
	}
}

func TestFormatWaitTimeout(t *testing.T) {
	for d, want := range map[time.Duration]string{
		60 * time.Second:           "60s",
		30 * time.Second:           "30s",
		1500 * time.Millisecond:    "1500ms",
		time.Nanosecond:            "1ms",
		1001 * time.Microsecond:    "2ms",
		59999*time.Millisecond + 1: "60s",
	} {
		if got := formatWaitTimeout(d); got != want {
			t.Errorf("formatWaitTimeout(%v) = %q; want %q", d, got, want)
		}
		// Both the Helmr and the Go parser must read it.
		if _, err := helmrtype.ParseDuration(formatWaitTimeout(d)); err != nil {
			t.Errorf("helmrtype.ParseDuration(%q): %v", formatWaitTimeout(d), err)
		}
		if _, err := time.ParseDuration(formatWaitTimeout(d)); err != nil {
			t.Errorf("time.ParseDuration(%q): %v", formatWaitTimeout(d), err)
		}
	}
}

func TestEncodeInput(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{nil, ""},
		{json.RawMessage(`{"issue":42}`), `{"issue":42}`},
		{json.RawMessage(nil), ""},
		{helmrtype.Content(nil), `[]`},
		{Text("hi"), `[{"type":"text","text":"hi"}]`},
		{TextParts(), `[]`},
		{TextParts("a", ""), `[{"type":"text","text":"a"},{"type":"text","text":""}]`},
		{map[string]int{"issue": 42}, `{"issue":42}`},
	}
	for _, tc := range tests {
		got, err := encodeInput(tc.in)
		if err != nil || string(got) != tc.want {
			t.Errorf("encodeInput(%#v) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	if _, err := encodeInput(json.RawMessage(`{`)); !errors.Is(err, helmrtype.CodeInputInvalid) {
		t.Errorf("invalid raw JSON: err = %v", err)
	}
}

// recorded is one request a recording server saw.
type recorded struct {
	method, path, query, auth, ua, contentType string
	body                                       map[string]any
}

// recorder answers every request with answer (status, body) and records it.
func recorder(t *testing.T, answer func(r *http.Request) (int, string)) (*httptest.Server, func() []recorded) {
	var (
		mu   sync.Mutex
		reqs []recorded
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := recorded{method: r.Method, path: r.URL.EscapedPath(), query: r.URL.RawQuery,
			auth: r.Header.Get("Authorization"), ua: r.Header.Get("User-Agent"), contentType: r.Header.Get("Content-Type")}
		if r.Body != nil && strings.HasPrefix(rec.contentType, "application/json") {
			_ = json.NewDecoder(r.Body).Decode(&rec.body)
		}
		mu.Lock()
		reqs = append(reqs, rec)
		mu.Unlock()
		status, body := answer(r)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []recorded {
		mu.Lock()
		defer mu.Unlock()
		return append([]recorded(nil), reqs...)
	}
}

func TestIdempotencyKeysAndHeaders(t *testing.T) {
	srv, reqs := recorder(t, func(r *http.Request) (int, string) {
		switch {
		case r.URL.Path == "/v1/sessions":
			return 201, `{"session":{"id":"s/1"},"turn":null}`
		case strings.HasSuffix(r.URL.Path, "/messages"):
			return 202, `{"id":"m1","status":"accepted"}`
		case strings.HasSuffix(r.URL.Path, "/interrupt"):
			return 202, `{"id":"i1","session_id":"s/1","turn_id":"t1","status":"accepted"}`
		}
		return 201, `{"id":"t1","session_id":"s/1","sequence":1,"status":"queued"}`
	})
	c := newTestClient(t, srv, WithUserAgent("helmr-test/1"))
	ctx := context.Background()
	r, err := c.Sessions.Create(ctx, "reviewer", nil, CreateOptions{Key: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Turn != nil || r.Receipt.Turn != nil || r.Replayed || r.Session.ID() != "s/1" {
		t.Errorf("receipt = %+v", r)
	}
	if _, err := c.Sessions.Create(ctx, "reviewer", Text("hi"), CreateOptions{IdempotencyKey: "fixed"}); err != nil {
		t.Fatal(err)
	}
	s := r.Session
	turn, err := s.Enqueue(ctx, Text("more"), EnqueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if turn.ID() != "t1" || turn.SessionID() != "s/1" || turn.State().Status != "queued" {
		t.Errorf("turn %s/%s state %+v", turn.SessionID(), turn.ID(), turn.State())
	}
	if _, err := turn.Send(ctx, nil, SendOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := turn.Interrupt(ctx, InterruptOptions{IdempotencyKey: "ik"}); err != nil {
		t.Fatal(err)
	}
	got := reqs()
	if len(got) != 5 {
		t.Fatalf("%d requests", len(got))
	}
	wantPaths := []string{"/v1/sessions", "/v1/sessions", "/v1/sessions/s%2F1/turns", "/v1/sessions/s%2F1/turns/t1/messages", "/v1/sessions/s%2F1/turns/t1/interrupt"}
	seen := map[string]bool{}
	for i, rq := range got {
		if rq.method != http.MethodPost || rq.path != wantPaths[i] {
			t.Errorf("request %d: %s %s; want POST %s", i, rq.method, rq.path, wantPaths[i])
		}
		if rq.auth != "Bearer sk_test" || rq.ua != "helmr-test/1" || rq.contentType != "application/json" {
			t.Errorf("request %d headers: auth %q ua %q type %q", i, rq.auth, rq.ua, rq.contentType)
		}
		key, _ := rq.body["idempotency_key"].(string)
		switch i {
		case 1:
			if key != "fixed" {
				t.Errorf("request 1 key %q; want the given one", key)
			}
		case 4:
			if key != "ik" {
				t.Errorf("request 4 key %q; want the given one", key)
			}
		default:
			u, err := uuid.Parse(key)
			if err != nil || u.Version() != 7 {
				t.Errorf("request %d: generated key %q is not a UUIDv7", i, key)
			}
			if seen[key] {
				t.Errorf("request %d: key %q reused", i, key)
			}
			seen[key] = true
		}
	}
	if _, ok := got[0].body["input"]; ok {
		t.Errorf("create without input sent input: %v", got[0].body)
	}
	if got[0].body["agent"] != "reviewer" || got[0].body["key"] != "k1" {
		t.Errorf("create body %v", got[0].body)
	}
	if fmt.Sprint(got[1].body["input"]) != "[map[text:hi type:text]]" {
		t.Errorf("create input %v", got[1].body["input"])
	}
	if fmt.Sprint(got[3].body["content"]) != "[]" {
		t.Errorf("send with nil content sent %v; want []", got[3].body["content"])
	}
}

func TestWaitLoopsUntilSettled(t *testing.T) {
	var (
		mu       sync.Mutex
		timeouts []string
	)
	srv, _ := recorder(t, func(r *http.Request) (int, string) {
		mu.Lock()
		defer mu.Unlock()
		timeouts = append(timeouts, r.URL.Query().Get("timeout"))
		switch len(timeouts) {
		case 1:
			return 200, `{"status":"timeout"}`
		case 2:
			return 503, `{"error":{"code":"unavailable","message":"restarting"}}`
		}
		return 200, `{"status":"settled","outcome":{"status":"completed","result":{"ok":true},"response":[{"type":"text","text":"done"}]}}`
	})
	c := newTestClient(t, srv)
	o, err := c.Sessions.Ref("s1").Turns.Ref("t1").Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != "completed" || string(o.Result) != `{"ok":true}` || o.Response.PlainText() != "done" {
		t.Errorf("outcome %+v", o)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(timeouts) != "[60s 60s 60s]" {
		t.Errorf("timeouts asked %v; want 60s each", timeouts)
	}
}

func TestWaitTimeoutSplitsAndTimesOut(t *testing.T) {
	var asked []string
	srv, _ := recorder(t, func(r *http.Request) (int, string) {
		asked = append(asked, r.URL.Query().Get("timeout"))
		time.Sleep(20 * time.Millisecond)
		return 200, `{"status":"timeout"}`
	})
	c := newTestClient(t, srv)
	r, err := c.Sessions.Ref("s1").Turns.Ref("t1").WaitTimeout(context.Background(), 30*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != helmrtype.WaitTimeout || r.Outcome != nil {
		t.Errorf("result %+v", r)
	}
	if len(asked) == 0 || asked[0] != "30ms" {
		t.Errorf("asked %v; want the first request for 30ms", asked)
	}
}

func TestWaitAPIErrorIsNotRetried(t *testing.T) {
	n := 0
	srv, _ := recorder(t, func(r *http.Request) (int, string) {
		n++
		return 404, `{"error":{"code":"not_found","message":"no Turn"}}`
	})
	c := newTestClient(t, srv)
	_, err := c.Sessions.Ref("s1").Turns.Ref("t1").Wait(context.Background())
	if !errors.Is(err, helmrtype.CodeNotFound) || n != 1 {
		t.Errorf("err %v after %d requests; want not_found after 1", err, n)
	}
}

func TestDeploymentCreateMultipart(t *testing.T) {
	var (
		gotManifest helmrtype.Manifest
		gotBinary   []byte
		partNames   []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mr, err := r.MultipartReader()
		if err != nil {
			t.Errorf("multipart: %v", err)
			w.WriteHeader(400)
			return
		}
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Errorf("next part: %v", err)
				return
			}
			partNames = append(partNames, p.FormName())
			b, _ := io.ReadAll(p)
			switch p.FormName() {
			case "manifest":
				_ = json.Unmarshal(b, &gotManifest)
			case "binary":
				gotBinary = b
				if p.FileName() == "" {
					t.Errorf("binary part has no file name")
				}
			}
		}
		w.WriteHeader(201)
		io.WriteString(w, `{"id":"d1","current":true}`)
	}))
	defer srv.Close()
	c := newTestClient(t, srv)
	m := helmrtype.Manifest{Version: helmrtype.ManifestVersion, Agents: []helmrtype.AgentManifest{{ID: "a"}}}
	bin := strings.Repeat("\x7fELF", 100000)
	d, err := c.Deployments.Create(context.Background(), m, strings.NewReader(bin))
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != "d1" || !d.Current {
		t.Errorf("deployment %+v", d)
	}
	if fmt.Sprint(partNames) != "[manifest binary]" || gotManifest.Agents[0].ID != "a" || string(gotBinary) != bin {
		t.Errorf("parts %v manifest %+v binary %d bytes", partNames, gotManifest, len(gotBinary))
	}
}

func TestDeploymentCreateServerRefusesEarly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"code":"unauthorized","message":"bad key"}}`)
	}))
	defer srv.Close()
	c := newTestClient(t, srv)
	// A reader larger than any buffer: Create must not hang on it.
	big := io.LimitReader(zeros{}, 8<<20)
	_, err := c.Deployments.Create(context.Background(), helmrtype.Manifest{}, big)
	if err == nil {
		t.Fatal("want an error")
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// FuzzErrorFromBody checks that any error answer decodes to a typed error
// with its status and a code.
func FuzzErrorFromBody(f *testing.F) {
	f.Add(404, []byte(`{"error":{"code":"not_found","message":"m","details":{"a":1}}}`))
	f.Add(502, []byte("<html>bad gateway</html>"))
	f.Add(409, []byte(`{"error":null}`))
	f.Add(400, []byte(`{"error":{"code":""}}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		e := errorFromBody(status, body)
		if e == nil || e.Code == "" || e.Status != status {
			t.Fatalf("errorFromBody(%d, %q) = %+v", status, body, e)
		}
	})
}

// With Progress, Upload asks for the NDJSON stream and calls back per
// progress line as it arrives (before the last line is written), then
// returns the Deployment of the last line, or the error of an error line
// as a typed error.
func TestDeploymentUploadProgressStream(t *testing.T) {
	release := make(chan struct{})
	var fail bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if got := r.Header.Get("Accept"); !strings.Contains(got, "application/x-ndjson") {
			t.Errorf("Accept %q", got)
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("X-Request-Id", "rid-1")
		io.WriteString(w, `{"progress":{"kind":"step","state":"started","template":"t","image":"i","step":1,"steps":2,"op":"copy","args":["/a","a"]}}`+"\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, `{"progress":{"kind":"future_kind","state":"done"}}`+"\n")
		if fail {
			io.WriteString(w, `{"error":{"code":"image_build_failed","message":"template t: image \"i\": step 1 of 2","details":{"template":"t"}}}`+"\n")
			return
		}
		io.WriteString(w, `{"deployment":{"id":"d1","current":true}}`+"\n")
	}))
	defer srv.Close()
	c := newTestClient(t, srv)
	upload := func() ([]helmrtype.DeployProgress, *helmrtype.Deployment, error) {
		var got []helmrtype.DeployProgress
		d, err := c.Deployments.Upload(context.Background(), DeploymentUpload{Binary: strings.NewReader("bin"),
			Progress: func(p helmrtype.DeployProgress) {
				got = append(got, p)
				if len(got) == 1 {
					close(release) // the first line came before the rest was written
				}
			}})
		return got, d, err
	}
	got, d, err := upload()
	if err != nil || d.ID != "d1" || !d.Current {
		t.Fatalf("upload: %+v %v", d, err)
	}
	if len(got) != 2 || got[0].Kind != helmrtype.ProgressStep || got[0].Step != 1 || got[0].Args[1] != "a" || got[1].Kind != "future_kind" {
		t.Fatalf("progress %+v", got)
	}

	release, fail = make(chan struct{}), true
	_, _, err = upload()
	var he *helmrtype.Error
	if !errors.Is(err, helmrtype.CodeImageBuildFailed) || !errors.As(err, &he) || he.Status != http.StatusBadRequest ||
		he.RequestID != "rid-1" || he.Details["template"] != "t" {
		t.Fatalf("error line: %#v", err)
	}
}

// A stream cut before its last line is an error, not a Deployment; an
// error answered before the stream began is the usual typed error.
func TestDeploymentUploadProgressStreamCut(t *testing.T) {
	refuse := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if refuse {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"code":"sources_invalid","message":"no sources"}}`)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		io.WriteString(w, `{"progress":{"kind":"image","state":"started"}}`+"\n")
	}))
	defer srv.Close()
	c := newTestClient(t, srv)
	n := 0
	u := DeploymentUpload{Binary: strings.NewReader("bin"), Progress: func(helmrtype.DeployProgress) { n++ }}
	if d, err := c.Deployments.Upload(context.Background(), u); err == nil || d != nil || n != 1 {
		t.Fatalf("cut stream: %+v %v after %d lines", d, err, n)
	}
	refuse = true
	u.Binary = strings.NewReader("bin")
	if _, err := c.Deployments.Upload(context.Background(), u); !errors.Is(err, helmrtype.CodeSourcesInvalid) {
		t.Fatalf("refused before the stream: %v", err)
	}
}
