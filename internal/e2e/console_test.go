package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/device"

	"github.com/helmr-go/helmr/helmrtype"
)

// chromium finds Debian's chromium (or another Chrome) for the browser
// tests, or skips the test saying why.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("the console's browser tests need headless Chromium: install Debian's chromium (.ci/setup does)")
	return ""
}

// artifacts is the directory the browser tests save screenshots in:
// $HELMR_TEST_ARTIFACTS/console, or a new temporary directory that is
// kept. The test prints it.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("HELMR_TEST_ARTIFACTS")
	var err error
	if dir != "" {
		dir = filepath.Join(dir, "console")
		err = os.MkdirAll(dir, 0o755)
	} else {
		dir, err = os.MkdirTemp("", "helmr-console-screenshots-")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// newBrowser starts headless Chromium with an empty profile and the flags
// that keep it from reaching for the network, and returns a tab.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path := chromium(t)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 900))
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelT(); cancel(); cancelA() })
	return ctx
}

// console drives one browser tab against a control plane.
type console struct {
	t    *testing.T
	ctx  context.Context
	base string
	dir  string
}

func (c *console) do(steps ...chromedp.Action[chromedp.Void]) {
	c.t.Helper()
	if err := chromedp.Do(c.ctx, steps...); err != nil {
		c.t.Fatal(err)
	}
}

// js runs a JavaScript expression that yields true.
func (c *console) js(expr string) {
	c.t.Helper()
	if _, err := chromedp.Run(c.ctx, chromedp.Evaluate[bool](expr)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *console) open(path string) { c.t.Helper(); c.do(chromedp.Navigate(c.base + path)) }

// waitJS waits until the JavaScript expression is true, across the
// navigations a form's submission starts.
func (c *console) waitJS(what, expr string) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := chromedp.Run(c.ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			body, _ := chromedp.Run(c.ctx, chromedp.Evaluate[string](`document.body.innerText`))
			c.t.Fatalf("%s: %v\npage %s:\n%s", what, err, c.location(), body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitText waits until the page shows s.
func (c *console) waitText(s string) {
	c.t.Helper()
	q, _ := json.Marshal(s)
	c.waitJS("the page shows "+s, "document.body.innerText.includes("+string(q)+")")
}

func (c *console) location() string {
	c.t.Helper()
	l, err := chromedp.Run(c.ctx, chromedp.Location())
	if err != nil {
		c.t.Fatal(err)
	}
	return l
}

// shot saves a screenshot of the whole page as name.png.
func (c *console) shot(name string) {
	c.t.Helper()
	png, err := chromedp.Run(c.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.dir, name+".png"), png, 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// submit clicks the submit button of the form whose action ends with
// action, accepting its confirmation.
func (c *console) submit(action string) {
	c.t.Helper()
	c.js(`window.confirm = function () { return true; }; true`)
	c.do(chromedp.Click(chromedp.CSS(`form[action$="` + action + `"] button[type=submit]`)))
}

// The console in a real browser: log in with a key, start a Session and
// watch its output arrive live, interrupt and resume it, answer a question
// from the inbox, run a Command and watch its logs; a responder, logged in
// by a one-time link, sees the inbox but no operator action, and an
// operator action it forges is refused. Every page's screenshot is saved.
func TestConsoleInBrowser(t *testing.T) {
	ctx := newBrowser(t)
	p := startPlane(t, "")
	c := &console{t: t, ctx: ctx, base: p.url, dir: artifacts(t)}

	// Log in with the admin key through the form.
	c.open("/")
	c.waitText("API key")
	if !strings.Contains(c.location(), "/console/login") {
		t.Fatalf("/ opens %s, want the login page", c.location())
	}
	c.shot("login")
	c.do(chromedp.SendKeys(chromedp.ID("key"), p.key), chromedp.Click(chromedp.CSS(`form[action="/console/login"] button`)))
	c.waitText("No questions are waiting.")
	c.waitText("(admin)")

	// Start a chat Session from the Sessions page.
	c.open("/console/sessions")
	c.waitText("Start a Session")
	c.do(chromedp.SetValue(chromedp.ID("n-agent"), "chat"), chromedp.SendKeys(chromedp.ID("n-input"), "hello"))
	c.do(chromedp.Click(chromedp.CSS(`form[method=post][action="/console/sessions"] button`)))
	c.waitText("Session started.")
	c.waitText("listening")
	sid := strings.TrimPrefix(strings.SplitN(c.location(), "?", 2)[0], p.url+"/console/sessions/")
	var turns helmrtype.TurnPage
	p.must("GET", "/v1/sessions/"+sid+"/turns", nil, &turns)
	if len(turns.Turns) != 1 {
		t.Fatalf("turns of the console's Session %s: %+v", sid, turns)
	}
	tid := turns.Turns[0].ID

	// Output written now appears without a reload: a mark set on the page
	// survives.
	c.waitJS("the timeline follows", `document.getElementById("live").textContent.includes("live")`)
	c.js(`window.__same = true; true`)
	p.must("POST", "/v1/sessions/"+sid+"/turns/"+tid+"/messages", map[string]any{"content": helmrtype.Text("ok live one")}, nil)
	c.waitText("got ok live one")
	p.must("POST", "/v1/sessions/"+sid+"/turns/"+tid+"/messages", map[string]any{"content": helmrtype.Text("ok live two")}, nil)
	c.waitText("got ok live two")
	c.waitJS("the page was not reloaded", `window.__same === true`)
	c.shot("session-live")

	// Interrupt the Session, then resume its hold.
	c.submit("/sessions/" + sid + "/interrupt")
	c.waitText("Interrupt requested")
	c.waitJS("a Resume button", `!!document.querySelector('form[action$="/resume"] button')`)
	c.shot("session-held")
	c.submit("/sessions/" + sid + "/resume")
	c.waitText("Hold released.")
	var sess helmrtype.Session
	p.must("GET", "/v1/sessions/"+sid, nil, &sess)
	if len(sess.Holds) != 0 {
		t.Fatalf("holds after resume in the console: %+v", sess.Holds)
	}
	c.open("/console/sessions/" + sid + "/turns/" + tid)
	c.waitText("got ok live two")
	c.waitText("interrupted")
	c.shot("turn")

	// A question, answered from the inbox.
	r := p.create("waiter", text("ask"))
	aid := askOf(t, p, r.Session.ID, r.Turn.ID).ID
	c.open("/console/inbox")
	c.waitText("Deploy to production?")
	c.shot("inbox")
	c.do(chromedp.Click(chromedp.CSS(`form[action$="/asks/` + aid + `"] input[value="yes"]`)))
	c.do(chromedp.Click(chromedp.CSS(`form.ask button[type=submit]`)))
	c.waitText("Answer sent.")
	o := p.wait(r.Session.ID, r.Turn.ID)
	var res map[string]any
	json.Unmarshal(o.Result, &res)
	if o.Status != helmrtype.TurnCompleted || !strings.Contains(string(o.Result), `"selected":[{"id":"yes","value":true}]`) || res["responded_by"] != "api_key" {
		t.Fatalf("outcome after the console's answer: %+v %v", o, res)
	}

	// A Command and its live logs.
	var comp helmrtype.ComputerState
	p.must("POST", "/v1/computers", helmrtype.ComputerCreateRequest{Template: "box"}, &comp)
	c.open("/console/computers/" + comp.ID)
	c.waitText("Run a Command")
	c.do(chromedp.SendKeys(chromedp.ID("c-cmd"), "sh -c echo first line; sleep 1; echo second line"))
	c.do(chromedp.Click(chromedp.CSS(`form[action$="/commands"] button`)))
	c.waitText("Command started.")
	c.waitJS("the first line", `document.getElementById("logs").textContent.includes("first line")`)
	c.waitJS("the second line, live", `document.getElementById("logs").textContent.includes("second line")`)
	c.waitJS("the end", `document.getElementById("cmd-status").textContent === "exited"`)
	c.shot("command")
	for _, pg := range []string{"sessions", "agents", "deployments", "computers"} {
		c.open("/console/" + pg)
		c.waitText("Helmr")
		c.shot(pg)
	}

	// On a phone.
	c.do(chromedp.Emulate(device.IPhone12))
	c.open("/console/sessions/" + sid)
	c.waitText("Timeline")
	c.shot("phone-session")
	c.do(chromedp.Emulate(device.Reset))

	// Log out; a responder logs in by a one-time link.
	c.open("/console/inbox")
	c.do(chromedp.Click(chromedp.CSS(`form[action="/console/logout"] button`)))
	c.waitText("API key")
	resp := createKey(t, p.url, p.key, "on-call", helmrtype.RoleResponder)
	link, err := p.cp.Server.ConsoleLoginPath(context.Background(), resp.Secret)
	if err != nil {
		t.Fatal(err)
	}
	c.open(link)
	c.waitText("(responder)")
	r2 := p.create("waiter", text("ask"))
	askOf(t, p, r2.Session.ID, r2.Turn.ID)
	c.open("/console/inbox")
	c.waitText("Deploy to production?")
	c.open("/console/sessions/" + r2.Session.ID)
	c.waitText("Deploy to production?")
	has, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('form[action$="/interrupt"], form[action$="/cancel"], form[action$="/close"], form[action$="/turns"]')`))
	if has {
		t.Fatal("the responder's Session page offers operator actions")
	}
	c.shot("responder-session")
	// An operator action posted anyway (with the session's own CSRF token)
	// is refused by the role check.
	c.js(`(function () {
		var f = document.createElement("form"); f.method = "post"; f.action = "/console/sessions/` + r2.Session.ID + `/interrupt";
		var i = document.createElement("input"); i.type = "hidden"; i.name = "csrf"; i.value = document.querySelector('input[name=csrf]').value;
		f.appendChild(i); document.body.appendChild(f); f.submit(); return true; })()`)
	c.waitText("needs operator")
	c.shot("responder-forbidden")
	p.must("GET", "/v1/sessions/"+r2.Session.ID, nil, &sess)
	if len(sess.Holds) != 0 {
		t.Fatalf("the responder's interrupt took effect: %+v", sess.Holds)
	}
	// The responder answers in place.
	c.open("/console/inbox")
	c.do(chromedp.Click(chromedp.CSS(`form.ask input[value="no"]`)), chromedp.Click(chromedp.CSS(`form.ask button[type=submit]`)))
	c.waitText("Answer sent.")
	o = p.wait(r2.Session.ID, r2.Turn.ID)
	json.Unmarshal(o.Result, &res)
	if !strings.Contains(string(o.Result), `"selected":[{"id":"no","value":false}]`) || res["responded_by_id"] != resp.ID {
		t.Fatalf("the responder's answer: %+v %v", o, res)
	}
	// The link worked once.
	c.do(chromedp.Click(chromedp.CSS(`form[action="/console/logout"] button`)))
	c.waitText("API key")
	c.open(link)
	c.waitText("used already or has expired")
}
