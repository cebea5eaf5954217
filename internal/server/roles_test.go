package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/store/sqlitestore"
)

// testServer is a Server over an engine on a real SQLite file, serving
// real HTTP, with one API key of each role.
type testServer struct {
	url  string
	srv  *Server
	eng  *engine.Engine
	keys map[helmrtype.Role]string
}

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "helmr.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng := engine.New(st, engine.Options{})
	t.Cleanup(eng.Close)
	s := New(eng, Options{})
	hs := httptest.NewServer(s)
	t.Cleanup(func() { s.Stop(); hs.Close() })
	ts := &testServer{url: hs.URL, srv: s, eng: eng, keys: map[helmrtype.Role]string{}}
	for _, role := range helmrtype.Roles {
		k, err := eng.CreateKey(ctx, helmrtype.APIKeyCreateRequest{Name: string(role) + " key", Role: role})
		if err != nil {
			t.Fatal(err)
		}
		ts.keys[role] = k.Secret
	}
	return ts
}

// do sends one request with key and returns the status and error code.
func (ts *testServer) do(t *testing.T, key, method, path, body string) (int, helmrtype.Code) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, ts.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return resp.StatusCode, ""
	}
	var env helmrtype.ErrorEnvelope
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &env); err != nil || env.Error == nil {
		t.Fatalf("%s %s: %d without the error envelope: %s", method, path, resp.StatusCode, data)
	}
	return resp.StatusCode, env.Error.Code
}

// TestEveryRouteChecksItsRole walks every route the router registered
// (a route added without a role panics in New) with a key of every role:
// the roles below the route's are refused 403 forbidden, the others get
// past the check (the IDs name nothing, so most answer not_found).
func TestEveryRouteChecksItsRole(t *testing.T) {
	ts := newTestServer(t)
	patterns := ts.srv.Patterns()
	if len(patterns) < 40 {
		t.Fatalf("only %d routes registered", len(patterns))
	}
	wild := regexp.MustCompile(`\{[a-z_]+\}`)
	for pattern, need := range patterns {
		method, path, ok := strings.Cut(pattern, " ")
		if !ok {
			method, path = http.MethodGet, pattern+"no-such-route"
		}
		if !strings.HasPrefix(path, "/v1/") {
			t.Errorf("route %q is outside /v1", pattern)
			continue
		}
		path = wild.ReplaceAllString(path, "0190e7a4-0000-7000-8000-000000000000")
		body := ""
		if method == http.MethodPost {
			body = "{}"
		}
		for _, role := range helmrtype.Roles {
			status, code := ts.do(t, ts.keys[role], method, path, body)
			forbidden := status == http.StatusForbidden
			if role.Allows(need) && forbidden {
				t.Errorf("%s with a %s key (route needs %s): 403 %s", pattern, role, need, code)
			}
			if !role.Allows(need) && (!forbidden || code != helmrtype.CodeForbidden) {
				t.Errorf("%s with a %s key (route needs %s): %d %s; want 403 forbidden", pattern, role, need, status, code)
			}
		}
	}
	// What the roles mean, for a few routes.
	for pattern, want := range map[string]helmrtype.Role{
		"GET /v1/sessions": helmrtype.RoleViewer, "GET /v1/asks": helmrtype.RoleViewer,
		"POST /v1/sessions/{id}/turns/{turn_id}/asks/{ask_id}/respond": helmrtype.RoleResponder,
		"POST /v1/tokens/{id}/complete":                                helmrtype.RoleResponder,
		"POST /v1/sessions":                                            helmrtype.RoleOperator, "POST /v1/computers/{id}/commands": helmrtype.RoleOperator,
		"POST /v1/deployments": helmrtype.RoleAdmin, "POST /v1/keys": helmrtype.RoleAdmin, "GET /v1/keys": helmrtype.RoleAdmin,
		"DELETE /v1/keys/{id}": helmrtype.RoleAdmin,
	} {
		if patterns[pattern] != want {
			t.Errorf("%s needs %q; want %q", pattern, patterns[pattern], want)
		}
	}
}

// A revoked key fails at its next request; the last admin key cannot be
// revoked, by itself or another; an admin may revoke its own key when
// another admin key remains.
func TestRevokedKeyFailsAtOnce(t *testing.T) {
	ts := newTestServer(t)
	adminKey := ts.keys[helmrtype.RoleAdmin]
	var page helmrtype.APIKeyPage
	ts.getJSON(t, adminKey, "/v1/keys", &page)
	ids := map[helmrtype.Role]string{}
	for _, k := range page.Keys {
		ids[k.Role] = k.ID
		if !strings.HasPrefix(ts.keys[k.Role], k.Prefix) || len(k.Prefix) < len("hlmr_sk_")+4 {
			t.Errorf("key %s prefix %q is not the start of its secret", k.ID, k.Prefix)
		}
	}
	viewerKey := ts.keys[helmrtype.RoleViewer]
	if st, code := ts.do(t, viewerKey, "GET", "/v1/sessions", ""); st != 200 {
		t.Fatalf("viewer before revocation: %d %s", st, code)
	}
	if st, code := ts.do(t, adminKey, "DELETE", "/v1/keys/"+ids[helmrtype.RoleViewer], ""); st != 200 {
		t.Fatalf("revoke: %d %s", st, code)
	}
	if st, code := ts.do(t, viewerKey, "GET", "/v1/sessions", ""); st != 401 || code != helmrtype.CodeUnauthorized {
		t.Fatalf("viewer after revocation: %d %s; want 401 unauthorized", st, code)
	}
	if st, code := ts.do(t, adminKey, "DELETE", "/v1/keys/"+ids[helmrtype.RoleViewer], ""); st != 200 {
		t.Errorf("revoke again: %d %s; want 200", st, code)
	}
	// The only admin key cannot revoke itself.
	if st, code := ts.do(t, adminKey, "DELETE", "/v1/keys/"+ids[helmrtype.RoleAdmin], ""); st != 409 || code != helmrtype.CodeConflict {
		t.Fatalf("revoke the last admin key: %d %s; want 409 conflict", st, code)
	}
	var second helmrtype.APIKeyCreated
	ts.postJSON(t, adminKey, "/v1/keys", `{"name":"second admin","role":"admin"}`, &second)
	if second.Secret == "" || second.Role != helmrtype.RoleAdmin || second.ID == "" {
		t.Fatalf("created %+v", second)
	}
	if st, code := ts.do(t, adminKey, "DELETE", "/v1/keys/"+ids[helmrtype.RoleAdmin], ""); st != 200 {
		t.Fatalf("revoke an admin key with another left: %d %s", st, code)
	}
	if st, _ := ts.do(t, adminKey, "GET", "/v1/keys", ""); st != 401 {
		t.Fatalf("the revoked admin key: %d; want 401", st)
	}
	if st, code := ts.do(t, second.Secret, "DELETE", "/v1/keys/"+second.ID, ""); st != 409 || code != helmrtype.CodeConflict {
		t.Fatalf("revoke the new last admin key: %d %s; want 409 conflict", st, code)
	}
	for _, body := range []string{`{"name":"x","role":"root"}`, `{"name":"","role":"viewer"}`, `{"name":"x"}`} {
		if st, code := ts.do(t, second.Secret, "POST", "/v1/keys", body); st != 400 {
			t.Errorf("POST /v1/keys %s: %d %s; want 400", body, st, code)
		}
	}
	ts.getJSON(t, second.Secret, "/v1/keys", &page)
	revoked := 0
	for _, k := range page.Keys {
		if k.RevokedAt != nil {
			revoked++
		}
	}
	if len(page.Keys) != 5 || revoked != 2 {
		t.Errorf("keys after two revocations: %d keys, %d revoked; want 5 and 2", len(page.Keys), revoked)
	}
}

func (ts *testServer) getJSON(t *testing.T, key, path string, out any) {
	t.Helper()
	ts.sendJSON(t, key, http.MethodGet, path, "", out)
}

func (ts *testServer) postJSON(t *testing.T, key, path, body string, out any) {
	t.Helper()
	ts.sendJSON(t, key, http.MethodPost, path, body, out)
}

func (ts *testServer) sendJSON(t *testing.T, key, method, path, body string, out any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, ts.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatal(err)
	}
}
