package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/helmr-go/helmr/helmrtype"
)

// pendingToken waits until GET /v1/tokens?status=pending lists a Token of
// the Session, with a schema when schema is set, and returns it.
func pendingToken(t *testing.T, p *plane, sessionID string, schema bool) helmrtype.TokenState {
	t.Helper()
	var tok helmrtype.TokenState
	waitFor(t, "the Token in GET /v1/tokens", func() bool {
		var page helmrtype.TokenPage
		p.must("GET", "/v1/tokens?status=pending", nil, &page)
		for _, x := range page.Tokens {
			if x.SessionID == sessionID && (!schema || len(x.Schema) > 0) {
				tok = x
				return true
			}
		}
		return false
	})
	return tok
}

// Pending Tokens in the console's inbox: their Session, Turn and schema
// are shown; data that is not JSON, and data the schema refuses, are
// refused in place with the message and the Token stays pending; an
// operator cancels one; a responder sees no cancel but completes one, and
// the waiting Turn finishes with the data.
func TestConsoleTokensInBrowser(t *testing.T) {
	ctx := newBrowser(t)
	p := startPlane(t, "")
	c := &console{t: t, ctx: ctx, base: p.url, dir: artifacts(t)}

	schemed := p.create("waiter", text("tokenschema"))
	tok := pendingToken(t, p, schemed.Session.ID, true)
	plain := p.create("waiter", text("token - -"))
	tok2 := pendingToken(t, p, plain.Session.ID, false)
	if tok.TurnID != schemed.Turn.ID || !strings.Contains(string(tok.Schema), `"approved"`) {
		t.Fatalf("listed Token: %+v", tok)
	}
	var page helmrtype.TokenPage
	p.must("GET", "/v1/tokens?status=pending&limit=1", nil, &page)
	if len(page.Tokens) != 1 || page.Tokens[0].ID != tok2.ID || page.NextCursor == "" {
		t.Fatalf("the newest pending Token: %+v", page)
	}

	// The admin logs in: both Tokens wait in the inbox.
	c.open("/console/login")
	c.waitText("API key")
	c.do(chromedp.SendKeys(chromedp.ID("key"), p.key), chromedp.Click(chromedp.CSS(`form[action="/console/login"] button`)))
	c.waitText("(admin)")
	c.open("/console/inbox")
	c.waitText(tok.ID)
	c.waitText(tok2.ID)
	c.waitText("The data must satisfy this JSON Schema")
	c.waitJS("the schema shown", `document.querySelector('section[aria-label="Token `+tok.ID+`"] pre.schema').textContent.includes("approved")`)
	c.waitJS("the Turn linked", `!!document.querySelector('section[aria-label="Token `+tok.ID+`"] a[href="/console/sessions/`+tok.SessionID+`/turns/`+tok.TurnID+`"]')`)
	c.shot("inbox-tokens")

	area := `d-` + tok.ID
	fill := func(v string) {
		c.do(chromedp.SetValue(chromedp.ID(area), v))
		c.submit("/tokens/" + tok.ID + "/complete")
	}
	// Not JSON.
	fill(`approved`)
	c.waitText("the data is not valid JSON")
	c.waitJS("the data kept", `document.getElementById("`+area+`").value === "approved"`)
	c.shot("inbox-token-not-json")
	// JSON the schema refuses.
	c.open("/console/inbox")
	c.waitText(tok.ID)
	fill(`{"approved": "yes"}`)
	c.waitText("input_invalid")
	c.waitText("the token stays pending")
	c.shot("inbox-token-schema")
	var st helmrtype.TokenState
	p.must("GET", "/v1/tokens/"+tok.ID, nil, &st)
	if st.Status != helmrtype.TokenPending {
		t.Fatalf("the refused Token is %s", st.Status)
	}

	// The admin cancels the other Token: its Turn sees token_cancelled.
	c.open("/console/inbox")
	c.waitText(tok2.ID)
	c.submit("/tokens/" + tok2.ID + "/cancel")
	c.waitText("Token cancelled.")
	if res := result(t, p.wait(plain.Session.ID, plain.Turn.ID)); res.Error != string(helmrtype.CodeTokenCancelled) {
		t.Fatalf("the cancelled Token's Turn: %+v", res)
	}

	// A responder: no cancel, but completes the Token in place.
	c.do(chromedp.Click(chromedp.CSS(`form[action="/console/logout"] button`)))
	c.waitText("API key")
	resp := createKey(t, p.url, p.key, "on-call", helmrtype.RoleResponder)
	link, err := p.cp.Server.ConsoleLoginPath(context.Background(), resp.Secret)
	if err != nil {
		t.Fatal(err)
	}
	c.open(link)
	c.waitText("(responder)")
	c.open("/console/inbox")
	c.waitText(tok.ID)
	if has, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('form[action$="/cancel"]')`)); has {
		t.Fatal("the responder's inbox offers to cancel a Token")
	}
	c.shot("inbox-tokens-responder")
	fill(`{"approved": true, "by": "on-call"}`)
	c.waitText("Token completed.")
	res := result(t, p.wait(schemed.Session.ID, schemed.Turn.ID))
	if !strings.Contains(string(res.Value), `"approved":true`) || !strings.Contains(string(res.Value), `"on-call"`) {
		t.Fatalf("the completed Token's Turn: %+v", res)
	}
	c.waitText("No Tokens are waiting.")
}
