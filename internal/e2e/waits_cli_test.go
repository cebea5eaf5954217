package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/helmr-go/helmr/helmrtype"
)

// The CLI completes, reads and cancels Tokens, with an API key or with a
// Token's public credential, and answers questions.
func TestTokenAndAskCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the helmr binary")
	}
	p := startPlane(t, "")
	api := &server{url: p.url, key: p.key}
	r := p.create("waiter", text("token - -"))
	ti := tokenOf(t, p, r.Session.ID)
	public := &server{url: p.url, key: ti.Secret}

	// helmr token list shows the pending Token; --status completed does not.
	if out, errOut, code := api.cli(t, "token", "list"); code != 0 || !strings.Contains(out, ti.Token) || !strings.Contains(out, "pending") {
		t.Fatalf("token list: exit %d %s %s", code, out, errOut)
	}
	if out, _, code := api.cli(t, "token", "list", "--status", "completed"); code != 0 || strings.Contains(out, ti.Token) {
		t.Fatalf("token list --status completed before the completion: exit %d %s", code, out)
	}
	if _, _, code := api.cli(t, "token", "list", "--status", "done"); code == 0 {
		t.Fatal("token list --status done succeeded")
	}

	// The public credential reads nothing.
	if _, errOut, code := public.cli(t, "token", "get", ti.Token); code == 0 || !strings.Contains(errOut, "unauthorized") {
		t.Fatalf("token get with the public credential: exit %d %s", code, errOut)
	}
	out, errOut, code := public.cli(t, "token", "complete", ti.Token, "--data-json", `{"ok": true}`)
	if code != 0 || !strings.Contains(out, "completed") {
		t.Fatalf("token complete: exit %d %s %s", code, out, errOut)
	}
	out, _, code = public.cli(t, "token", "complete", ti.Token, "--data-json", `{"ok":true}`, "--json")
	var c helmrtype.TokenCompletion
	if json.Unmarshal([]byte(out), &c); code != 0 || c.Status != helmrtype.TokenAlreadyCompleted {
		t.Fatalf("repeated completion: exit %d %s", code, out)
	}
	if _, _, code := public.cli(t, "token", "complete", ti.Token, "--data-json", `{"ok":false}`); code != 4 {
		t.Fatalf("conflicting completion: exit %d, want 4 (conflict)", code)
	}
	out, _, code = api.cli(t, "token", "get", ti.Token, "--json")
	var st helmrtype.TokenState
	json.Unmarshal([]byte(out), &st)
	data, _ := helmrtype.CanonicalJSON(st.Data)
	if code != 0 || st.Status != helmrtype.TokenCompleted || string(data) != `{"ok":true}` {
		t.Fatalf("token get: exit %d %s", code, out)
	}
	if res := result(t, p.wait(r.Session.ID, r.Turn.ID)); string(res.Value) != `{"ok":true}` {
		t.Fatalf("waiter: %+v", res)
	}

	// Questions.
	q := p.create("waiter", text("asktext"))
	a := askOf(t, p, q.Session.ID, q.Turn.ID)
	out, _, code = api.cli(t, "session", "turn", "ask", "list", q.Session.ID, q.Turn.ID)
	if code != 0 || !strings.Contains(out, a.ID) || !strings.Contains(out, "Why?") {
		t.Fatalf("ask list: exit %d %s", code, out)
	}
	// A person answering by hand needs no --response-id: one is generated
	// and printed, and a retry with it is safe.
	out, errOut, code = api.cli(t, "session", "turn", "ask", "respond", q.Session.ID, q.Turn.ID, a.ID, "--text", "because")
	_, rest, found := strings.Cut(out, "Response ID: ")
	responseID, _, _ := strings.Cut(rest, "\n")
	if code != 0 || !found || len(responseID) != 36 || !strings.Contains(out, "responded") {
		t.Fatalf("ask respond without --response-id: exit %d %s %s", code, out, errOut)
	}
	for range 2 { // a retry with the same response ID is safe
		out, errOut, code = api.cli(t, "session", "turn", "ask", "respond", q.Session.ID, q.Turn.ID, a.ID, "--text", "because", "--response-id", responseID)
		if code != 0 || !strings.Contains(out, "responded") {
			t.Fatalf("ask respond: exit %d %s %s", code, out, errOut)
		}
	}
	// ask list shows a choice's option IDs, the ones an answer selects.
	qc := p.create("waiter", text("ask"))
	ac := askOf(t, p, qc.Session.ID, qc.Turn.ID)
	if out, _, code = api.cli(t, "session", "turn", "ask", "list", qc.Session.ID, qc.Turn.ID); code != 0 || !strings.Contains(out, "OPTIONS") || !strings.Contains(out, "yes,no") {
		t.Fatalf("ask list of a choice: exit %d %s", code, out)
	}
	if out, errOut, code = api.cli(t, "session", "turn", "ask", "respond", qc.Session.ID, qc.Turn.ID, ac.ID, "--answer-json", `{"selected":["no"]}`); code != 0 {
		t.Fatalf("answer the choice: exit %d %s %s", code, out, errOut)
	}
	if res := result(t, p.wait(q.Session.ID, q.Turn.ID)); string(res.Value) != `"because"` {
		t.Fatalf("asker: %+v", res)
	}
	// Cancelling a Token through the CLI.
	r2 := p.create("waiter", text("token - -"))
	t2 := tokenOf(t, p, r2.Session.ID)
	if out, _, code := api.cli(t, "token", "cancel", t2.Token); code != 0 || !strings.Contains(out, "cancelled") {
		t.Fatalf("token cancel: exit %d %s", code, out)
	}
	if res := result(t, p.wait(r2.Session.ID, r2.Turn.ID)); res.Error != string(helmrtype.CodeTokenCancelled) {
		t.Fatalf("waiter of a cancelled token: %+v", res)
	}
}
