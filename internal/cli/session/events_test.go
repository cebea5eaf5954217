package session

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

func TestWriteEvent(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	turn := "t1"
	tests := []struct {
		ev   helmrtype.SessionEvent
		want string
	}{
		{
			helmrtype.SessionEvent{Sequence: 7, CreatedAt: at, Kind: "turn.output", TurnID: &turn,
				Data: json.RawMessage(`{"content":[{"type":"text","text":"line one\nline two\n"}]}`)},
			"     7  2025-01-02T03:04:05Z  turn.output             line one\n" +
				"                                                      line two\n",
		},
		{
			helmrtype.SessionEvent{Sequence: 8, CreatedAt: at, Kind: "turn.completed", TurnID: &turn, Data: json.RawMessage(`{}`)},
			"     8  2025-01-02T03:04:05Z  turn.completed          turn t1\n",
		},
		{
			helmrtype.SessionEvent{Sequence: 9, CreatedAt: at, Kind: "session.process_failed", Data: json.RawMessage(`{"reason": "exit 2"}`)},
			"     9  2025-01-02T03:04:05Z  session.process_failed  {\"reason\":\"exit 2\"}\n",
		},
		{
			helmrtype.SessionEvent{Sequence: 10, CreatedAt: at, Kind: "session.created"},
			"    10  2025-01-02T03:04:05Z  session.created\n",
		},
	}
	for _, tc := range tests {
		var b bytes.Buffer
		writeEvent(&b, tc.ev)
		if b.String() != tc.want {
			t.Errorf("writeEvent(%d):\n%q\nwant\n%q", tc.ev.Sequence, b.String(), tc.want)
		}
	}
}

func TestWriteSession(t *testing.T) {
	created := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	hold, comp := "h1", "c1"
	s := &helmrtype.Session{
		ID: "s1", RootSessionID: "s1", DeploymentID: "d1", Agent: "reviewer", Template: "repo",
		ComputerID: &comp, Status: "open", Key: "pr-42", CloseAfterIdle: "7d", HibernateAfterIdle: "never",
		InitialTurn: &helmrtype.TurnBrief{ID: "t1", Status: "running"},
		Holds:       []helmrtype.Hold{{ID: &hold, SessionID: &s1ID, Kind: "interrupt", CanRelease: true}},
		CreatedAt:   created,
	}
	var b bytes.Buffer
	if err := writeSession(&b, s); err != nil {
		t.Fatal(err)
	}
	want := "Session:              s1\n" +
		"Agent:                reviewer\n" +
		"Template:             repo\n" +
		"Status:               open\n" +
		"Key:                  pr-42\n" +
		"Deployment:           d1\n" +
		"Computer:             c1\n" +
		"Initial Turn:         t1 (running)\n" +
		"Holds:                1: interrupt h1 on s1\n" +
		"Close after idle:     7d\n" +
		"Hibernate after idle: never\n" +
		"Created:              2025-01-02T03:04:05Z\n"
	if b.String() != want {
		t.Errorf("writeSession:\n%s\nwant:\n%s", b.String(), want)
	}
}

var s1ID = "s1"
