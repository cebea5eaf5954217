package slackfake

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzCheckBlocks: any blocks text gets reasons or none, never a panic,
// and valid blocks stay valid when re-checked.
func FuzzCheckBlocks(f *testing.F) {
	f.Add(`[{"type":"section","text":{"type":"mrkdwn","text":"Deploy?"}},{"type":"actions","block_id":"q","elements":[{"type":"button","action_id":"a","value":"v","text":{"type":"plain_text","text":"OK"}}]}]`)
	f.Add(`[{"type":"header","text":{"type":"mrkdwn","text":""}}]`)
	f.Add(`{}`)
	f.Add(`[null, 1, "x"]`)
	f.Fuzz(func(t *testing.T, raw string) {
		first := checkBlocks([]byte(raw))
		if len(first) == 0 && len(checkBlocks([]byte(raw))) != 0 {
			t.Fatal("checkBlocks is not deterministic")
		}
	})
}

// FuzzWebAPI: any form body to any method gets a JSON answer, never a
// panic, and refusals post nothing.
func FuzzWebAPI(f *testing.F) {
	f.Add("chat.postMessage", "channel=C1&text=hi")
	f.Add("chat.update", "channel=C1&ts=1.000001&blocks=%5B%5D")
	f.Add("chat.postMessage", "channel=C1&blocks=%5B%7B%22type%22%3A%22actions%22%7D%5D")
	f.Add("conversations.replies", "channel=C1&ts=")
	fake := Start(f)
	fake.AddChannel("C1", "general")
	f.Fuzz(func(t *testing.T, method, form string) {
		if method == "" {
			return
		}
		req := httptest.NewRequest(http.MethodPost, "/api/method", strings.NewReader(form))
		req.SetPathValue("method", method)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+fake.BotToken())
		w := httptest.NewRecorder()
		fake.serveAPI(w, req)
		if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Fatalf("%s: content type %q", method, ct)
		}
	})
}
