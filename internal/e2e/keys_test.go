package e2e

import (
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
)

// createKey makes an API key with the role through POST /v1/keys.
func createKey(t *testing.T, url, adminKey, name string, role helmrtype.Role) helmrtype.APIKeyCreated {
	t.Helper()
	var k helmrtype.APIKeyCreated
	if err := apiCall(url, adminKey, "POST", "/v1/keys", helmrtype.APIKeyCreateRequest{Name: name, Role: role}, &k); err != nil {
		t.Fatalf("create %s key: %v", role, err)
	}
	return k
}

// A responder key finds a pending question in the inbox and answers it
// with helmr ask answer; the agent's turn.ask sees the key's ID as who
// answered. The responder may not start Sessions, a viewer may not answer.
func TestResponderAnswersFromTheInbox(t *testing.T) {
	p := startPlane(t, "")
	resp := createKey(t, p.url, p.key, "on-call", helmrtype.RoleResponder)
	view := createKey(t, p.url, p.key, "dashboard", helmrtype.RoleViewer)

	err := apiCall(p.url, resp.Secret, "POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: "waiter", Input: text("ask")}, nil)
	if !errors.Is(err, helmrtype.CodeForbidden) {
		t.Fatalf("a responder starts a Session: %v; want forbidden", err)
	}
	r := p.create("waiter", text("ask"))
	var a helmrtype.AskState
	waitFor(t, "the question in the inbox", func() bool {
		var page helmrtype.AskPage
		if err := apiCall(p.url, resp.Secret, "GET", "/v1/asks?status=pending", nil, &page); err != nil {
			t.Fatal(err)
		}
		for _, x := range page.Asks {
			if x.SessionID == r.Session.ID {
				a = x
				return true
			}
		}
		return false
	})
	if a.TurnID != r.Turn.ID || a.Status != helmrtype.AskPending {
		t.Fatalf("inbox question: %+v", a)
	}
	err = apiCall(p.url, view.Secret, "POST", "/v1/sessions/"+a.SessionID+"/turns/"+a.TurnID+"/asks/"+a.ID+"/respond",
		map[string]any{"answer": map[string]any{"selected": []string{"yes"}}, "response_id": "v1"}, nil)
	if !errors.Is(err, helmrtype.CodeForbidden) {
		t.Fatalf("a viewer answers: %v; want forbidden", err)
	}

	helmr := func(key string, args ...string) (string, error) {
		cmd := exec.Command(helmrBinary(t), append(args, "--api-url", p.url, "--api-key", key)...)
		cmd.Env = []string{"HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir()}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := helmr(resp.Secret, "ask", "list"); err != nil || !strings.Contains(out, a.ID) || !strings.Contains(out, "yes,no") {
		t.Fatalf("helmr ask list: %v\n%s", err, out)
	}
	if out, err := helmr(resp.Secret, "ask", "list", "--all", "--status", "pending"); err == nil || !strings.Contains(out, "only one of --status and --all") {
		t.Fatalf("helmr ask list --all --status: %v\n%s", err, out)
	}
	if out, err := helmr(p.key, "key", "list", "--limit", "1"); err != nil || !strings.Contains(out, "More keys: --cursor ") {
		t.Fatalf("helmr key list --limit 1: %v\n%s", err, out)
	}
	if out, err := helmr(p.key, "key", "list", "--json"); err != nil || !strings.Contains(out, `"name": "on-call"`) || strings.Contains(out, resp.Secret) {
		t.Fatalf("helmr key list --json: %v\n%s", err, out)
	}
	out, err := helmr(resp.Secret, "ask", "answer", a.ID, "--option", "yes")
	if err != nil {
		t.Fatalf("helmr ask answer: %v\n%s", err, out)
	}
	if !strings.Contains(out, "Response ID: ") || !strings.Contains(out, "api_key "+resp.ID) {
		t.Errorf("helmr ask answer printed:\n%s", out)
	}
	res := result(t, p.wait(r.Session.ID, r.Turn.ID))
	if res.By != helmrtype.ResponderAPIKey || res.ByID != resp.ID {
		t.Fatalf("turn.ask saw responded_by %q %q; want api_key %s", res.By, res.ByID, resp.ID)
	}
	var page helmrtype.AskPage
	p.must("GET", "/v1/asks?status=responded", nil, &page)
	if len(page.Asks) != 1 || page.Asks[0].ID != a.ID || page.Asks[0].RespondedBy == nil || page.Asks[0].RespondedBy.ID != resp.ID {
		t.Fatalf("responded questions: %+v", page.Asks)
	}
	p.must("GET", "/v1/asks?status=pending", nil, &page)
	if len(page.Asks) != 0 {
		t.Fatalf("pending after the answer: %+v", page.Asks)
	}
	if out, err := helmr(resp.Secret, "ask", "list", "--all"); err != nil || !strings.Contains(out, a.ID) || !strings.Contains(out, "responded") {
		t.Fatalf("helmr ask list --all: %v\n%s", err, out)
	}
	// The timeline records the key too.
	found := false
	for _, e := range p.events(r.Session.ID) {
		if e.Kind == helmrtype.EventAskResponded && strings.Contains(string(e.Data), resp.ID) {
			found = true
		}
	}
	if !found {
		t.Error("no ask.responded event naming the responder key")
	}
	if err := apiCall(p.url, p.key, "GET", "/v1/asks?status=open", nil, nil); !errors.Is(err, helmrtype.CodeInvalidRequest) {
		t.Errorf("status=open: %v; want invalid_request", err)
	}
}

// Two nodes on one PostgreSQL database: a key revoked through one fails
// at its very next request on the other, which has served it before; the
// last admin key cannot be revoked.
func TestRevocationOnEveryNode(t *testing.T) {
	db := pgtest.URL(t)
	a := startPlaneWith(t, "", "127.0.0.1:0", db)
	b := startPlaneWith(t, "", "127.0.0.1:0", db)
	if a.cp.NodeID() == "" || a.cp.NodeID() == b.cp.NodeID() {
		t.Fatalf("node IDs %q and %q", a.cp.NodeID(), b.cp.NodeID())
	}
	k := createKey(t, a.url, a.key, "ci", helmrtype.RoleOperator)
	for range 3 {
		if err := apiCall(b.url, k.Secret, "GET", "/v1/sessions", nil, nil); err != nil {
			t.Fatalf("the new key on the other node: %v", err)
		}
	}
	var revoked helmrtype.APIKey
	if err := apiCall(a.url, a.key, "DELETE", "/v1/keys/"+k.ID, nil, &revoked); err != nil || revoked.RevokedAt == nil {
		t.Fatalf("revoke: %+v, %v", revoked, err)
	}
	for _, p := range []*plane{b, a} {
		err := apiCall(p.url, k.Secret, "GET", "/v1/sessions", nil, nil)
		var he *helmrtype.Error
		if !errors.As(err, &he) || he.Code != helmrtype.CodeUnauthorized || he.Status != http.StatusUnauthorized {
			t.Errorf("the revoked key on node %s: %v; want 401 unauthorized", p.cp.NodeID(), err)
		}
	}
	// Each plane made an admin key: one may go, the last may not.
	var page helmrtype.APIKeyPage
	if err := apiCall(b.url, b.key, "GET", "/v1/keys", nil, &page); err != nil {
		t.Fatal(err)
	}
	var admins []string
	for _, x := range page.Keys {
		if x.Role == helmrtype.RoleAdmin && x.RevokedAt == nil {
			admins = append(admins, x.ID)
		}
	}
	if len(admins) != 2 {
		t.Fatalf("admin keys: %v", admins)
	}
	if err := apiCall(b.url, b.key, "DELETE", "/v1/keys/"+admins[0], nil, nil); err != nil {
		t.Fatalf("revoke one of two admin keys: %v", err)
	}
	last := admins[1]
	key := b.key
	if apiCall(b.url, b.key, "GET", "/v1/keys", nil, nil) != nil {
		key = a.key // b's own key was the one revoked
	}
	err := apiCall(a.url, key, "DELETE", "/v1/keys/"+last, nil, nil)
	var he *helmrtype.Error
	if !errors.As(err, &he) || he.Code != helmrtype.CodeConflict || he.Details["reason"] != "last_admin_key" {
		t.Fatalf("revoke the last admin key: %v; want conflict last_admin_key", err)
	}
}

// helmrclient's Keys and Inbox against a real control plane.
func TestClientKeysAndInbox(t *testing.T) {
	p := startPlane(t, "")
	ctx := t.Context()
	c := helmrclient.New(p.url, p.key)
	k, err := c.Keys.Create(ctx, "dashboard", helmrtype.RoleViewer)
	if err != nil || k.Secret == "" || !strings.HasPrefix(k.Secret, k.Prefix) {
		t.Fatalf("Keys.Create = %+v, %v", k, err)
	}
	page, err := c.Keys.List(ctx, helmrclient.ListOptions{Limit: 1})
	if err != nil || len(page.Keys) != 1 || page.Keys[0].Role != helmrtype.RoleAdmin || page.NextCursor == "" {
		t.Fatalf("Keys.List(limit 1) = %+v, %v; want the first, admin key and a cursor", page, err)
	}
	page, err = c.Keys.List(ctx, helmrclient.ListOptions{Cursor: page.NextCursor})
	if err != nil || len(page.Keys) != 1 || page.Keys[0].ID != k.ID {
		t.Fatalf("Keys.List(next) = %+v, %v", page, err)
	}
	v := helmrclient.New(p.url, k.Secret)
	if asks, err := v.Inbox.List(ctx, helmrclient.InboxOptions{Status: helmrtype.AskPending}); err != nil || len(asks.Asks) != 0 {
		t.Fatalf("Inbox.List as a viewer = %+v, %v", asks, err)
	}
	if _, err := v.Keys.List(ctx, helmrclient.ListOptions{}); !errors.Is(err, helmrtype.CodeForbidden) {
		t.Fatalf("Keys.List as a viewer: %v; want forbidden", err)
	}
	if _, err := c.Keys.Revoke(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Inbox.List(ctx, helmrclient.InboxOptions{}); !errors.Is(err, helmrtype.CodeUnauthorized) {
		t.Fatalf("a revoked key: %v; want unauthorized", err)
	}
	if _, err := c.Keys.Revoke(ctx, page.Keys[0].ID); err != nil {
		t.Fatalf("revoke again: %v", err)
	}
	all, _ := c.Keys.List(ctx, helmrclient.ListOptions{})
	if _, err := c.Keys.Revoke(ctx, all.Keys[0].ID); !errors.Is(err, helmrtype.CodeConflict) {
		t.Fatalf("revoke the last admin key: %v; want conflict", err)
	}
}
