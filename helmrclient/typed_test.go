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
