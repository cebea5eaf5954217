package helmr

import (
	"context"
	"testing"
)

type digestIn struct {
	Topic string `json:"topic"`
}

func TestCronTriggers(t *testing.T) {
	typedTurn := func(ctx context.Context, t *Turn[digestIn], ac *AgentContext[struct{}]) (any, error) { return nil, nil }
	a := Agent(AgentSpec[digestIn, any, struct{}]{ID: "digest", Template: testBox, Turn: typedTurn,
		Triggers: []Trigger{
			Cron("often", "*/5 * * * * *", CronOptions{Input: digestIn{Topic: "x"}}),
			Cron("daily", "@daily", CronOptions{Timezone: "Asia/Tokyo", Input: digestIn{}, Overlap: "allow"}),
		}})
	m := a.manifest()
	if len(m.Triggers) != 2 || m.Triggers[0].Name != "often" || m.Triggers[0].Timezone != "UTC" || m.Triggers[0].Overlap != "skip" ||
		string(m.Triggers[0].Input) != `{"topic":"x"}` || m.Triggers[1].Kind != "cron" || m.Triggers[1].Timezone != "Asia/Tokyo" || m.Triggers[1].Overlap != "allow" {
		t.Fatalf("trigger manifests: %+v", m.Triggers)
	}
	// A text Agent's trigger without input fires with empty content.
	e := Agent(AgentSpec[InputContent, any, struct{}]{ID: "e", Template: testBox, Turn: textTurn,
		Triggers: []Trigger{Cron("t", "0 * * * *", CronOptions{})}})
	if got := string(e.manifest().Triggers[0].Input); got != `[]` {
		t.Fatalf("a text trigger without input: %s", got)
	}
	for want, tr := range map[string]Trigger{
		"must match":           Cron("bad name", "* * * * *", CronOptions{Input: digestIn{}}),
		"cron pattern":         Cron("p", "* * *", CronOptions{Input: digestIn{}}),
		"time zone":            Cron("z", "* * * * *", CronOptions{Timezone: "Nowhere/Else", Input: digestIn{}}),
		"overlap":              Cron("o", "* * * * *", CronOptions{Overlap: "queue", Input: digestIn{}}),
		"input does not match": Cron("i", "* * * * *", CronOptions{Input: map[string]int{"topic": 3}}),
	} {
		mustPanic(t, want, func() {
			Agent(AgentSpec[digestIn, any, struct{}]{ID: "digest", Template: testBox, Turn: typedTurn, Triggers: []Trigger{tr}})
		})
	}
	mustPanic(t, "InputContent", func() {
		Agent(AgentSpec[InputContent, any, struct{}]{ID: "e", Template: testBox, Turn: textTurn,
			Triggers: []Trigger{Cron("t", "0 * * * *", CronOptions{Input: "plain string"})}})
	})
	mustPanic(t, "declared twice", func() {
		Agent(AgentSpec[InputContent, any, struct{}]{ID: "e", Template: testBox, Turn: textTurn,
			Triggers: []Trigger{Cron("t", "0 * * * *", CronOptions{}), Cron("t", "1 * * * *", CronOptions{})}})
	})
}
