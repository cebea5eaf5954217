package agent

import (
	"bytes"
	"testing"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cli/clienv"
)

func TestWriteAgentPage(t *testing.T) {
	var out, errb bytes.Buffer
	page := &helmrtype.AgentPage{DeploymentID: "d1", NextCursor: "c2", Agents: []helmrtype.AgentInfo{
		{Agent: "reviewer", Template: "repo", InputKind: "text", CloseAfterIdle: "7d"},
		{Agent: "worker", Template: "big-template", InputKind: "json", CloseAfterIdle: "never", MaxTurnDuration: "5m"},
	}}
	if err := writeAgentPage(clienv.Streams{Out: &out, Err: &errb}, page); err != nil {
		t.Fatal(err)
	}
	want := "AGENT     TEMPLATE      INPUT  CLOSE AFTER IDLE  MAX TURN\n" +
		"reviewer  repo          text   7d                -\n" +
		"worker    big-template  json   never             5m\n"
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
	if errb.String() != "More Agents: --cursor c2\n" {
		t.Errorf("stderr %q", errb.String())
	}
}
