package helmr

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cron"
)

// Trigger starts work for an Agent on its own: a cron trigger (Cron) admits
// a fresh Session, on a fresh Computer, at each occurrence of its pattern.
// Give an Agent its triggers in AgentSpec.Triggers.
type Trigger struct {
	m   helmrtype.TriggerManifest
	in  any
	err error
}

// CronOptions configure a cron trigger.
type CronOptions struct {
	// Timezone is the IANA time zone the pattern is read in (default UTC).
	Timezone string
	// Input is each fire's initial Turn input: the Agent's input type (an
	// InputContent for a text Agent); nil for an empty text input.
	Input any
	// Overlap is what a fire does while the previous fire's Session still
	// has queued or running Turns: "skip" (the default; it counts as
	// missed) or "allow".
	Overlap string
}

// Cron returns a trigger named name that fires at each occurrence of the
// cron pattern: five fields (minute, hour, day of month, month, day of
// week), or six with a leading seconds field, or @yearly, @monthly,
// @weekly, @daily, @hourly. Each fire admits a Session whose first Turn has
// opts.Input and source {kind: "schedule"}. Agent panics on a bad name,
// pattern, time zone, overlap or input, as for every other field.
func Cron(name, pattern string, opts CronOptions) Trigger {
	tr := Trigger{in: opts.Input, m: helmrtype.TriggerManifest{Name: name, Kind: helmrtype.TriggerCron, Pattern: pattern,
		Timezone: opts.Timezone, Overlap: opts.Overlap}}
	if tr.m.Timezone == "" {
		tr.m.Timezone = "UTC"
	}
	if tr.m.Overlap == "" {
		tr.m.Overlap = helmrtype.OverlapSkip
	}
	switch {
	case !helmrtype.ValidName(name):
		tr.err = fmt.Errorf("trigger name %q must match %s", name, helmrtype.NamePattern)
	case tr.m.Overlap != helmrtype.OverlapSkip && tr.m.Overlap != helmrtype.OverlapAllow:
		tr.err = fmt.Errorf("trigger %q: overlap %q: want %q or %q", name, tr.m.Overlap, helmrtype.OverlapSkip, helmrtype.OverlapAllow)
	default:
		if _, err := cron.Parse(pattern, tr.m.Timezone); err != nil {
			tr.err = fmt.Errorf("trigger %q: %v", name, err)
		}
	}
	return tr
}

// checkTriggers resolves the inputs of an Agent's triggers against its
// input contract and returns their manifest entries.
func checkTriggers[I any](triggers []Trigger, text bool, input Validator[I]) ([]helmrtype.TriggerManifest, error) {
	var out []helmrtype.TriggerManifest
	seen := map[string]bool{}
	for _, tr := range triggers {
		if tr.err != nil {
			return nil, tr.err
		}
		if seen[tr.m.Name] {
			return nil, fmt.Errorf("trigger %q is declared twice", tr.m.Name)
		}
		seen[tr.m.Name] = true
		in := tr.in
		if in == nil && text {
			in = InputContent{}
		}
		raw, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("trigger %q: input: %v", tr.m.Name, err)
		}
		if text {
			if _, err := helmrtype.ParseContent(raw, helmrtype.MaxInputBytes, true); err != nil {
				return nil, fmt.Errorf("trigger %q: a text Agent's input is InputContent: %v", tr.m.Name, err)
			}
		} else if _, err := input.Validate(context.Background(), raw); err != nil {
			return nil, fmt.Errorf("trigger %q: input does not match the Agent's input type: %v", tr.m.Name, err)
		}
		m := tr.m
		m.Input = raw
		out = append(out, m)
	}
	return out, nil
}
