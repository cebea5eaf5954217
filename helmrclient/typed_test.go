package helmrclient

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

type issueInput struct {
	Issue int `json:"issue"`
}

type reviewResult struct {
	Reviewed bool `json:"reviewed"`
}

// definition stands in for the SDK's Agent definition type.
type definition[I, R any] struct{ id string }

func (d *definition[I, R]) AgentID() string             { return d.id }
func (d *definition[I, R]) InvocationTypes() (i I, r R) { return i, r }

func TestTypedCreateInfersAndDecodes(t *testing.T) {
	srv, reqs := recorder(t, func(r *http.Request) (int, string) {
		if r.Method == http.MethodPost {
			return 200, `{"session":{"id":"s1"},"turn":{"id":"t1","session_id":"s1","sequence":1,"status":"queued"}}`
		}
		return 200, `{"status":"settled","outcome":{"status":"completed","result":{"reviewed":true}}}`
	})
	c := newTestClient(t, srv)
	worker := &definition[issueInput, reviewResult]{id: "worker"}

	// I and R are inferred from worker's methods.
	r, err := Create(context.Background(), c, worker, issueInput{Issue: 42}, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Replayed {
		t.Errorf("a 200 answer is a replay")
	}
	o, err := r.Turn.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !o.HasResult || !o.Result.Reviewed || o.Status != helmrtype.TurnCompleted {
		t.Errorf("outcome %+v", o)
	}
	body := reqs()[0].body
	if body["agent"] != "worker" || body["input"].(map[string]any)["issue"] != float64(42) {
		t.Errorf("create body %v", body)
	}

	// Ref gives the same for an ID alone.
	var ref Contract[issueInput, reviewResult] = Ref[issueInput, reviewResult]("worker")
	if ref.AgentID() != "worker" {
		t.Errorf("Ref AgentID = %q", ref.AgentID())
	}
}

func TestDecodeOutcome(t *testing.T) {
	expired := time.Now()
	tests := []struct {
		in      helmrtype.TurnOutcome
		has     bool
		wantErr bool
	}{
		{helmrtype.TurnOutcome{Status: "completed", Result: json.RawMessage(`{"reviewed":true}`)}, true, false},
		{helmrtype.TurnOutcome{Status: "completed", PayloadExpiredAt: &expired}, false, false},
		{helmrtype.TurnOutcome{Status: "failed", Error: &helmrtype.TurnError{Code: helmrtype.CodeHandlerFailed}}, false, false},
		{helmrtype.TurnOutcome{Status: "completed", Result: json.RawMessage(`"text"`)}, false, true},
	}
	for _, tc := range tests {
		o, err := decodeOutcome[reviewResult]("t1", tc.in)
		if (err != nil) != tc.wantErr || o == nil || o.HasResult != tc.has || o.Status != tc.in.Status {
			t.Errorf("decodeOutcome(%+v) = %+v, %v", tc.in, o, err)
		}
		var je *json.UnmarshalTypeError
		if tc.wantErr && !errors.As(err, &je) {
			t.Errorf("decode error %v does not wrap the JSON error", err)
		}
	}
}

func TestAttachChecksBeforeItTypes(t *testing.T) {
	srv, reqs := recorder(t, func(r *http.Request) (int, string) {
		switch r.URL.Path {
		case "/v1/sessions/s1":
			return 200, `{"id":"s1","agent":"worker","deployment_id":"d1","status":"open"}`
		case "/v1/sessions/s1/turns":
			return 201, `{"id":"t2","session_id":"s1","sequence":2,"status":"queued","input":{"issue":9}}`
		case "/v1/sessions/s1/turns/t2":
			return 200, `{"id":"t2","session_id":"s1","sequence":2,"status":"completed","input":{"issue":9},"result":{"reviewed":true}}`
		}
		return 404, `{"error":{"code":"not_found","message":"session not found"}}`
	})
	c := newTestClient(t, srv)
	ctx := context.Background()
	worker := &definition[issueInput, reviewResult]{id: "worker"}

	s, err := Attach(ctx, c, worker, "s1", "d1")
	if err != nil {
		t.Fatal(err)
	}
	turn, err := s.Enqueue(ctx, issueInput{Issue: 9}, EnqueueOptions{})
	if err != nil || turn.ID() != "t2" {
		t.Fatalf("typed enqueue: %v %v", turn, err)
	}
	if body := reqs()[1].body; body["input"].(map[string]any)["issue"] != float64(9) {
		t.Errorf("enqueue body %v", body)
	}
	st, err := s.GetTurn(ctx, "t2")
	if err != nil || !st.HasInput || st.Input.Issue != 9 || !st.HasResult || !st.Result.Reviewed {
		t.Fatalf("typed read: %+v %v", st, err)
	}

	n := len(reqs())
	for _, c2 := range []struct {
		name      string
		agent     string
		session   string
		dep       string
		code      helmrtype.Code
		detail    string
		requested bool
	}{
		{"wrong agent", "other", "s1", "d1", helmrtype.CodeConflict, "agent", true},
		{"wrong deployment", "worker", "s1", "d2", helmrtype.CodeConflict, "deployment_id", true},
		{"missing session", "worker", "s9", "d1", helmrtype.CodeNotFound, "", true},
		{"no deployment", "worker", "s1", "", helmrtype.CodeInvalidRequest, "", false},
		{"no session", "worker", "", "d1", helmrtype.CodeInvalidRequest, "", false},
	} {
		_, err := Attach(ctx, c, Ref[issueInput, reviewResult](c2.agent), c2.session, c2.dep)
		var he *helmrtype.Error
		if !errors.Is(err, c2.code) || !errors.As(err, &he) {
			t.Errorf("%s: %v, want %s", c2.name, err, c2.code)
			continue
		}
		if c2.detail != "" && he.Details[c2.detail] == nil {
			t.Errorf("%s: details %v lack %s", c2.name, he.Details, c2.detail)
		}
		if c2.requested {
			n++
		}
		if got := len(reqs()); got != n {
			t.Errorf("%s: %d requests, want %d (one read at most, no enqueue)", c2.name, got, n)
		}
	}
}
