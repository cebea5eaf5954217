package clienv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

func TestExitCode(t *testing.T) {
	run := func(err error) error { return &runError{err: err} }
	tests := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("unknown flag: --x"), ExitUsage}, // cobra's, not a run error
		{run(errors.New("disk full")), ExitFailure},
		{run(&helmrtype.Error{Code: helmrtype.CodeNotFound, Status: 404}), ExitNotFound},
		{run(&helmrtype.Error{Code: helmrtype.CodeNoDeployment, Status: 404}), ExitNotFound},
		{run(&helmrtype.Error{Code: "gone_somewhere", Status: 404}), ExitNotFound},
		{run(fmt.Errorf("create: %w", &helmrtype.Error{Code: helmrtype.CodeIdempotencyConflict, Status: 409})), ExitConflict},
		{run(&helmrtype.Error{Code: helmrtype.CodeSessionClosed, Status: 409}), ExitConflict},
		{run(&helmrtype.Error{Code: helmrtype.CodeTurnSettled}), ExitConflict}, // no status: by code
		{run(&helmrtype.Error{Code: helmrtype.CodeInputInvalid, Status: 400}), ExitFailure},
		{run(&helmrtype.Error{Code: helmrtype.CodeUnauthorized, Status: 401}), ExitFailure},
		{run(Usagef("bad")), ExitUsage},
		{run(Exitf(ExitWaitTimeout, "late")), ExitWaitTimeout},
		{run(Exitf(ExitNotCompleted, "failed")), ExitNotCompleted},
		{run(fmt.Errorf("wait: %w", context.Canceled)), ExitInterrupted},
	}
	for _, tc := range tests {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d; want %d", tc.err, got, tc.want)
		}
	}
}

func TestErrorMessage(t *testing.T) {
	for err, want := range map[error]string{
		&helmrtype.Error{Code: helmrtype.CodeNotFound, Message: "no Session x", Status: 404}: "Error: not_found: no Session x",
		&helmrtype.Error{Code: helmrtype.CodeInternal, Status: 500}:                          "Error: internal (HTTP 500)",
		errors.New("plain"): "Error: plain",
	} {
		if got := ErrorMessage(err); got != want {
			t.Errorf("ErrorMessage(%v) = %q; want %q", err, got, want)
		}
	}
}

func TestResolveGlobals(t *testing.T) {
	env := map[string]string{}
	g := &Globals{Getenv: func(k string) string { return env[k] }, ConfigFile: filepath.Join(t.TempDir(), "none.json")}
	if g.ResolvedAPIURL() != DefaultAPIURL || g.ResolvedAPIKey() != "" {
		t.Errorf("defaults: %q %q", g.ResolvedAPIURL(), g.ResolvedAPIKey())
	}
	if _, err := g.Client(); ExitCode(&runError{err}) != ExitUsage {
		t.Errorf("Client without key: %v", err)
	}
	env[EnvAPIURL], env[EnvAPIKey] = "http://h:1", "envkey"
	if g.ResolvedAPIURL() != "http://h:1" || g.ResolvedAPIKey() != "envkey" {
		t.Errorf("env: %q %q", g.ResolvedAPIURL(), g.ResolvedAPIKey())
	}
	g.APIURL, g.APIKey = "http://flag:2", "flagkey"
	if g.ResolvedAPIURL() != "http://flag:2" || g.ResolvedAPIKey() != "flagkey" {
		t.Errorf("flags: %q %q", g.ResolvedAPIURL(), g.ResolvedAPIKey())
	}
	if c, err := g.Client(); err != nil || c == nil {
		t.Errorf("Client: %v", err)
	}
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	tb := NewTable(&b, "SESSION", "AGENT", "KEY")
	tb.Row("s-1", "reviewer", "")
	tb.Row("s-22222", "a", "k\twith tab")
	if err := tb.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "SESSION  AGENT     KEY\n" +
		"s-1      reviewer  -\n" +
		"s-22222  a         k with tab\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestWriteOutcome(t *testing.T) {
	expired := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	tests := []struct {
		o    helmrtype.TurnOutcome
		want string
		exit int
	}{
		{
			helmrtype.TurnOutcome{Status: "completed", Response: helmrtype.Content{
				{Type: "text", Text: "Review "}, {Type: "text", Text: "complete"}, {Type: "json", Value: json.RawMessage(`{"n": 1}`)},
			}, Result: json.RawMessage(`{"reviewed":true}`)},
			"Turn t1 completed\nReview complete{\"n\":1}\nResult: {\n  \"reviewed\": true\n}\n", 0,
		},
		{helmrtype.TurnOutcome{Status: "completed"}, "Turn t1 completed\n", 0},
		{helmrtype.TurnOutcome{Status: "completed", Response: helmrtype.Content{}}, "Turn t1 completed\n\n", 0},
		{helmrtype.TurnOutcome{Status: "completed", PayloadExpiredAt: &expired}, "Turn t1 completed (payload expired 2025-03-04T05:06:07Z)\n", 0},
		{helmrtype.TurnOutcome{Status: "failed", Error: &helmrtype.TurnError{Code: "handler_failed", Message: "boom"}}, "Turn t1 failed: handler_failed: boom\n", ExitNotCompleted},
		{helmrtype.TurnOutcome{Status: "cancelled"}, "Turn t1 cancelled\n", ExitNotCompleted},
	}
	for _, tc := range tests {
		var b bytes.Buffer
		WriteOutcome(&b, "t1", &tc.o)
		if b.String() != tc.want {
			t.Errorf("WriteOutcome(%+v) = %q; want %q", tc.o, b.String(), tc.want)
		}
		got := ExitOK
		if err := OutcomeExit("t1", &tc.o); err != nil {
			got = ExitCode(&runError{err})
		}
		if got != tc.exit {
			t.Errorf("OutcomeExit(%s) exit %d; want %d", tc.o.Status, got, tc.exit)
		}
	}
}

func TestWriteTurn(t *testing.T) {
	created := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	st := &helmrtype.TurnState{
		ID: "t1", SessionID: "s1", Sequence: 3, Status: "completed",
		Input:     json.RawMessage(`[{"type":"text","text":"hi there"}]`),
		Source:    helmrtype.InputSource{Kind: "api_key"},
		CreatedAt: created, TerminalAt: &created,
		Result:   json.RawMessage(`[1,2]`),
		Response: helmrtype.Text("Done."),
	}
	var b bytes.Buffer
	if err := WriteTurn(&b, st); err != nil {
		t.Fatal(err)
	}
	want := "Turn:     t1\n" +
		"Session:  s1\n" +
		"Sequence: 3\n" +
		"Status:   completed\n" +
		"Source:   api_key\n" +
		"Created:  2025-01-02T03:04:05Z\n" +
		"Settled:  2025-01-02T03:04:05Z\n" +
		"Input:    \"hi there\"\n" +
		"Result: [\n  1,\n  2\n]\n" +
		"Response:\nDone.\n"
	if b.String() != want {
		t.Errorf("WriteTurn:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestShortenAndContent(t *testing.T) {
	if got := Shorten("héllo world", 5); got != "héll…" {
		t.Errorf("Shorten = %q", got)
	}
	if got := ContentText(helmrtype.Content{{Type: "text", Text: "a"}, {Type: "json", Value: json.RawMessage(`[ 1 ]`)}}); got != "a[1]" {
		t.Errorf("ContentText = %q", got)
	}
}

func TestProfiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "helmr", "config.json")
	if cur, err := SaveProfile(path, DevProfile, Profile{APIURL: "http://127.0.0.1:7070", APIKey: "hlmr_sk_devdevdevdevdev"}, false); err != nil || !cur {
		t.Fatalf("the first profile is current: %v %v", cur, err)
	}
	if cur, err := SaveProfile(path, "prod", Profile{APIURL: "https://prod", APIKey: "hlmr_sk_prodprodprodprod"}, false); err != nil || cur {
		t.Fatalf("a second profile without makeCurrent: %v %v", cur, err)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: %v %v; want mode %o", p, st.Mode(), err, want)
		}
	}
	if _, err := SaveProfile(path, "bad name", Profile{}, false); ExitCode(&runError{err}) != ExitUsage {
		t.Errorf("a bad name: %v", err)
	}
	env := map[string]string{}
	g := func() *Globals { return &Globals{Getenv: func(k string) string { return env[k] }, ConfigFile: path} }
	if url, key, prof, err := g().Resolved(); err != nil || url != "http://127.0.0.1:7070" || key != "hlmr_sk_devdevdevdevdev" || prof != DevProfile {
		t.Errorf("from the current profile: %q %q %q %v", url, key, prof, err)
	}
	// The environment wins, and a profile's key never goes to another URL.
	env[EnvAPIURL] = "http://elsewhere:1"
	if url, key, _, _ := g().Resolved(); url != "http://elsewhere:1" || key != "" {
		t.Errorf("another URL in the environment: %q %q", url, key)
	}
	env[EnvAPIKey] = "envkey"
	if url, key, prof, _ := g().Resolved(); url != "http://elsewhere:1" || key != "envkey" || prof != "" {
		t.Errorf("environment: %q %q %q", url, key, prof)
	}
	delete(env, EnvAPIURL)
	if url, key, _, _ := g().Resolved(); url != "http://127.0.0.1:7070" || key != "envkey" {
		t.Errorf("a key in the environment, the URL from the profile: %q %q", url, key)
	}
	gf := g()
	gf.APIURL, gf.APIKey = "http://flag:2", "flagkey"
	if url, key, _, _ := gf.Resolved(); url != "http://flag:2" || key != "flagkey" {
		t.Errorf("flags: %q %q", url, key)
	}
	c, err := LoadConfig(path)
	if err != nil || c.Current != DevProfile || strings.Join(c.Names(), ",") != "dev,prod" {
		t.Fatalf("config %+v %v", c, err)
	}
	os.WriteFile(path, []byte("{not json"), 0o600)
	delete(env, EnvAPIKey)
	if _, err := g().Client(); err == nil || ExitCode(&runError{err}) != ExitFailure {
		t.Errorf("a broken config file: %v", err)
	}
	if got := KeyPrefix("hlmr_sk_0123456789abcdef"); got != "hlmr_sk_0123…" {
		t.Errorf("KeyPrefix = %q", got)
	}
	if got := KeyPrefix("short"); got != "shor…" {
		t.Errorf("KeyPrefix(short) = %q", got)
	}
}
