package obs

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestHandlerRedactsAndAddsIDs: secrets in messages, attributes, errors,
// groups and With attributes are redacted; IDs come from the context.
func TestHandlerRedactsAndAddsIDs(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLogger(&buf, "json", slog.LevelDebug)
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{"hlmr_sk_AbC123secret", "hlmr_tok_TokSecret99", "hlmr_proc_ProcSecret", "Pw0rd!x", "bearerSecret"}
	ctx := WithIDs(context.Background(), &IDs{Request: "r1", Session: "s1", Turn: "t1"})
	log.With("dsn", "postgres://helmr:Pw0rd!x@db:5432/helmr").InfoContext(ctx, "connecting with hlmr_sk_AbC123secret",
		"err", errors.New("dial: password=Pw0rd!x refused"), "header", "Bearer bearerSecret",
		slog.Group("proc", "cred", "hlmr_proc_ProcSecret"), "api_key", "anything", "tok", []byte("hlmr_tok_TokSecret99"))
	out := buf.String()
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("%q in %s", s, out)
		}
	}
	for _, want := range []string{`"request_id":"r1"`, `"session_id":"s1"`, `"turn_id":"t1"`, `hlmr_sk_[redacted]`, `postgres://helmr:[redacted]@db:5432/helmr`} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in %s", want, out)
		}
	}
	// A record's own session_id wins over the context's.
	buf.Reset()
	log.InfoContext(ctx, "x", KeySessionID, "own")
	if strings.Count(buf.String(), "session_id") != 1 || !strings.Contains(buf.String(), `"own"`) {
		t.Errorf("session_id twice or lost: %s", buf.String())
	}
}
