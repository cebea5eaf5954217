package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
)

// browser is an HTTP client with a cookie jar that does not follow
// redirects, so that each answer can be checked.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

func newBrowser(t *testing.T, base string, c *http.Client) *browser {
	jar, _ := cookiejar.New(nil)
	if c == nil {
		c = &http.Client{}
	}
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{t: t, base: base, c: c}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func (b *browser) do(method, path string, form url.Values, header ...string) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if m := csrfField.FindSubmatch(raw); m != nil {
		b.csrf = string(m[1])
	}
	return res, string(raw)
}

// login logs in with key and loads the inbox (for the CSRF token).
func (b *browser) login(key string) {
	b.t.Helper()
	res, _ := b.do("POST", "/console/login", url.Values{"key": {key}, "next": {"/console/inbox"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/inbox" {
		b.t.Fatalf("login: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	if res, _ := b.do("GET", "/console/inbox", nil); res.StatusCode != 200 || b.csrf == "" {
		b.t.Fatalf("inbox after login: %d (csrf %q)", res.StatusCode, b.csrf)
	}
}

func consoleCookieOf(t *testing.T, res *http.Response) *http.Cookie {
	t.Helper()
	for _, c := range res.Cookies() {
		if c.Name == consoleCookie {
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", consoleCookie, res.Header["Set-Cookie"])
	return nil
}

// Logging in with an API key sets an opaque, HttpOnly, SameSite=Strict
// cookie; forms need the session's CSRF token and a same-origin request;
// logout clears the cookie and forgets the session.
func TestConsoleLoginAndCSRF(t *testing.T) {
	ts := newTestServer(t)
	b := newBrowser(t, ts.url, nil)
	res, _ := b.do("GET", "/", nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/" {
		t.Fatalf("GET /: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	res, _ = b.do("GET", "/console/sessions", nil)
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/console/login?next=") {
		t.Fatalf("logged out: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	if res, body := b.do("POST", "/console/login", url.Values{"key": {"hlmr_sk_nope"}}); res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "not valid") {
		t.Fatalf("bad key: %d", res.StatusCode)
	}
	key := ts.keys[helmrtype.RoleOperator]
	res, _ = b.do("POST", "/console/login", url.Values{"key": {key}, "next": {"https://evil.example/"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/" {
		t.Fatalf("login with a foreign next: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	c := consoleCookieOf(t, res)
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Path != "/console" || c.MaxAge <= 0 || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(c.Value) {
		t.Fatalf("cookie: %+v", c)
	}
	if strings.Contains(res.Header.Get("Set-Cookie"), key) {
		t.Fatal("the cookie carries the key")
	}
	res, body := b.do("GET", "/console/inbox", nil)
	if res.StatusCode != 200 || !strings.Contains(body, "operator key") || strings.Contains(body, key) {
		t.Fatalf("inbox: %d", res.StatusCode)
	}
	if res.Header.Get("Cache-Control") != "no-store" || !strings.Contains(res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatalf("headers: %v", res.Header)
	}
	// A form without the token, with another session's, or from another
	// site is refused.
	if res, body := b.do("POST", "/console/logout", url.Values{}); res.StatusCode != http.StatusForbidden || !strings.Contains(body, "security token") {
		t.Fatalf("logout without csrf: %d", res.StatusCode)
	}
	if res, _ := b.do("POST", "/console/logout", url.Values{"csrf": {strings.Repeat("0", 64)}}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("logout with a wrong csrf: %d", res.StatusCode)
	}
	if res, _ := b.do("POST", "/console/logout", url.Values{"csrf": {b.csrf}}, "Origin", "https://evil.example"); res.StatusCode != http.StatusForbidden {
		t.Fatalf("logout from another origin: %d", res.StatusCode)
	}
	res, _ = b.do("POST", "/console/logout", url.Values{"csrf": {b.csrf}})
	if res.StatusCode != http.StatusSeeOther || consoleCookieOf(t, res).MaxAge >= 0 {
		t.Fatalf("logout: %d %v", res.StatusCode, res.Header["Set-Cookie"])
	}
	// The old cookie names no session any more.
	replay := newBrowser(t, ts.url, nil)
	u, _ := url.Parse(ts.url + "/console/")
	replay.c.Jar.SetCookies(u, []*http.Cookie{{Name: consoleCookie, Value: c.Value, Path: "/console"}})
	if res, _ := replay.do("GET", "/console/inbox", nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("old cookie after logout: %d", res.StatusCode)
	}
}

// Over TLS the cookie is Secure.
func TestConsoleCookieSecureOverTLS(t *testing.T) {
	ts := newTestServer(t)
	hs := httptest.NewTLSServer(ts.srv)
	t.Cleanup(hs.Close)
	b := newBrowser(t, hs.URL, hs.Client())
	res, _ := b.do("POST", "/console/login", url.Values{"key": {ts.keys[helmrtype.RoleViewer]}})
	if c := consoleCookieOf(t, res); !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie over TLS: %+v", c)
	}
}

// A login link works once, and a revoked key's console session ends at
// its next request.
func TestConsoleLoginLinkAndRevocation(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	if _, err := ts.srv.ConsoleLoginPath(ctx, "hlmr_sk_nope"); helmrtype.CodeOf(err) != helmrtype.CodeUnauthorized {
		t.Fatalf("link for a bad key: %v", err)
	}
	k, err := ts.eng.CreateKey(ctx, helmrtype.APIKeyCreateRequest{Name: "short-lived", Role: helmrtype.RoleResponder})
	if err != nil {
		t.Fatal(err)
	}
	link, err := ts.srv.ConsoleLoginPath(ctx, k.Secret)
	if err != nil || !strings.HasPrefix(link, "/console/login?token=") || strings.Contains(link, k.Secret) {
		t.Fatalf("link %q: %v", link, err)
	}
	b := newBrowser(t, ts.url, nil)
	res, _ := b.do("GET", link, nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/" {
		t.Fatalf("login link: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	consoleCookieOf(t, res)
	if res, body := b.do("GET", "/console/inbox", nil); res.StatusCode != 200 || !strings.Contains(body, "short-lived") {
		t.Fatalf("inbox by link: %d", res.StatusCode)
	}
	other := newBrowser(t, ts.url, nil)
	if res, _ := other.do("GET", link, nil); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("link used twice: %d", res.StatusCode)
	}
	if _, err := ts.eng.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if res, _ := b.do("GET", "/console/inbox", nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("after revocation: %d", res.StatusCode)
	}
}

// Every console page and action needs the role of the /v1 route it stands
// for: a lesser role gets 403, the route's role or above gets past the
// check (to a 404 here: the IDs are made up).
func TestEveryConsoleRouteChecksItsRole(t *testing.T) {
	ts := newTestServer(t)
	api := ts.srv.Patterns()
	browsers := map[helmrtype.Role]*browser{}
	for _, role := range helmrtype.Roles {
		browsers[role] = newBrowser(t, ts.url, nil)
		browsers[role].login(ts.keys[role])
	}
	fill := strings.NewReplacer("{id}", "0190f5f0-0000-7000-8000-000000000001", "{turn_id}", "0190f5f0-0000-7000-8000-000000000002",
		"{ask_id}", "0190f5f0-0000-7000-8000-000000000003", "{$}", "")
	n := 0
	for pattern, apiPattern := range ts.srv.ConsolePatterns() {
		need, ok := api[apiPattern]
		if !ok {
			t.Fatalf("%s: API route %s is not registered", pattern, apiPattern)
		}
		method, path, _ := strings.Cut(pattern, " ")
		path = fill.Replace(path)
		for _, role := range helmrtype.Roles {
			b := browsers[role]
			var form url.Values
			if method == "POST" {
				form = url.Values{"csrf": {b.csrf}, "input": {"hi"}, "content": {"hi"}, "text": {"x"}, "option": {"yes"}, "hold_id": {"h"}, "command": {"true"}, "agent": {"nope"}}
			}
			res, body := b.do(method, path, form)
			if role.Allows(need) {
				if res.StatusCode == http.StatusForbidden || res.StatusCode == http.StatusUnauthorized || res.StatusCode >= 500 {
					t.Errorf("%s as %s (route needs %s): %d %s", pattern, role, need, res.StatusCode, firstLine(body))
				}
			} else if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "needs "+string(need)) {
				t.Errorf("%s as %s (route needs %s): %d, want 403", pattern, role, need, res.StatusCode)
			}
			n++
		}
	}
	if n < 4*20 {
		t.Fatalf("walked %d route×role pairs", n)
	}
}

func firstLine(s string) string {
	if i := strings.Index(s, "role=\"alert\""); i >= 0 {
		s = s[i:]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// TestConsoleLiveCounts: the Sessions page shows the counts of Sessions by
// status and of what waits for an answer, and /console/counts serves them
// for the page to keep current.
func TestConsoleLiveCounts(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	m := helmrtype.Manifest{Version: helmrtype.ManifestVersion, SDK: "go",
		Templates: []helmrtype.TemplateManifest{{ID: "box", Image: helmrtype.ImageManifest{Name: "box", Host: true}}},
		Agents:    []helmrtype.AgentManifest{{ID: "echo", Template: "box", InputKind: "text", CloseAfterIdle: "7d", HibernateAfterIdle: "never"}}}
	if _, err := ts.eng.PublishDeployment(ctx, "sha256:counts", m, "", ""); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 3 {
		rec, _, err := ts.eng.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "echo"}, engine.APICaller)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.Session.ID)
	}
	if _, err := ts.eng.CancelSession(ctx, ids[0], helmrtype.ControlRequest{}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, ts.url, nil)
	b.login(ts.keys[helmrtype.RoleViewer])
	res, body := b.do("GET", "/console/counts", nil)
	var c map[string]int64
	if res.StatusCode != 200 || json.Unmarshal([]byte(body), &c) != nil || c["open"] != 2 || c["closed"] != 1 || c["pending_asks"] != 0 {
		t.Fatalf("counts: %d %s", res.StatusCode, body)
	}
	if res, body := b.do("GET", "/console/sessions", nil); res.StatusCode != 200 || !strings.Contains(body, `<span data-n="open">2</span> open`) ||
		!strings.Contains(body, `<span data-n="closed">1</span> closed`) {
		t.Fatalf("the Sessions page's counts: %d", res.StatusCode)
	}
}
