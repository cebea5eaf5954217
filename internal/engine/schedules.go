package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cron"
	"github.com/helmr-go/helmr/internal/store"
)

// Schedules. Publishing a Deployment reconciles the Schedules with its
// Agents' triggers, in the same transaction as it becomes current: a new
// trigger adds a Schedule, a changed one updates it (its next fire is
// computed again when its pattern or time zone changed), a removed one (or
// one of an Agent no longer deployed) is deleted, which ends its
// occurrences; Sessions already admitted keep their pinned Deployment.
//
// Every node arms a timer (sched) at each Schedule's next fire. A fire
// admits a Session pinned to the Schedule's Deployment through the
// idempotency of Session creation, keyed by the Schedule and the
// occurrence: the occurrence is recorded in the same transaction as the
// admission, so it admits once however many nodes (or retries after a
// crash) fire it. Then the Schedule moves to its next occurrence.
//
// Downtime: when a fire comes late (no control plane ran at its time), the
// occurrences due since are counted; the latest is admitted once if it is
// no older than CatchUpWindow, and the others count as missed.

// CatchUpWindow is how old a missed occurrence may be and still be
// admitted when a control plane starts after downtime.
const CatchUpWindow = time.Hour

// NoticeSchedules is the Kind of the notice that tells every node the
// Schedules changed (a Deployment was published).
const NoticeSchedules = "schedules.changed"

// retryFire is when a fire refused for a passing reason (storage pressure,
// a store error) is tried again.
const retryFire = 10 * time.Second

// maxCountedOccurrences bounds the occurrences counted after downtime.
const maxCountedOccurrences = 100000

// reconcileSchedulesTx makes the Schedules those of dep's triggers.
func (e *Engine) reconcileSchedulesTx(ctx context.Context, tx store.Tx, dep *deployment, now time.Time) error {
	rows, err := tx.ListSchedules(ctx)
	if err != nil {
		return err
	}
	have := map[[2]string]*store.Schedule{}
	for i := range rows {
		have[[2]string{rows[i].Agent, rows[i].Name}] = &rows[i]
	}
	for _, a := range dep.manifest.Agents {
		for _, tr := range a.Triggers {
			spec, err := cron.Parse(tr.Pattern, tr.Timezone)
			if err != nil {
				return invalid("agent %q: trigger %q: %v", a.ID, tr.Name, err)
			}
			k := [2]string{a.ID, tr.Name}
			cur := have[k]
			delete(have, k)
			if cur == nil {
				s := &store.Schedule{ID: NewID(), Agent: a.ID, Name: tr.Name, DeploymentID: dep.row.ID, Pattern: tr.Pattern,
					Timezone: tr.Timezone, Input: tr.Input, Overlap: tr.Overlap, CreatedAt: now, UpdatedAt: now, NextFireAt: spec.Next(now)}
				if err := tx.InsertSchedule(ctx, s); err != nil {
					return err
				}
				continue
			}
			if cur.Pattern != tr.Pattern || cur.Timezone != tr.Timezone {
				cur.NextFireAt = spec.Next(now)
			}
			cur.DeploymentID, cur.Pattern, cur.Timezone, cur.Input, cur.Overlap, cur.UpdatedAt = dep.row.ID, tr.Pattern, tr.Timezone, tr.Input, tr.Overlap, now
			if err := tx.UpdateSchedule(ctx, cur); err != nil {
				return err
			}
		}
	}
	for _, s := range have {
		if err := tx.DeleteSchedule(ctx, s.ID); err != nil {
			return err
		}
	}
	return tx.Announce(ctx, store.Notice{Kind: NoticeSchedules})
}

// ArmSchedules arms a timer at the next fire of every Schedule and cancels
// those of Schedules that are gone. The control plane calls it at start;
// a publication and other nodes' notices call it again.
func (e *Engine) ArmSchedules(ctx context.Context) error {
	var rows []store.Schedule
	err := e.store.View(ctx, func(tx store.Tx) (err error) {
		rows, err = tx.ListSchedules(ctx)
		return err
	})
	if err != nil {
		return err
	}
	e.schedMu.Lock()
	defer e.schedMu.Unlock()
	now := map[string]bool{}
	for _, s := range rows {
		now[s.ID] = true
		e.armSchedule(s.ID, s.NextFireAt)
	}
	for id := range e.armed {
		if !now[id] {
			e.sched.cancel("schedule:" + id)
		}
	}
	e.armed = now
	return nil
}

// armSchedule sets the timer of Schedule id at t.
func (e *Engine) armSchedule(id string, t time.Time) {
	e.sched.at(t, "schedule:"+id, func() { e.fireSchedule(context.Background(), id) })
}

// fireSchedule runs when a Schedule's next fire comes.
func (e *Engine) fireSchedule(ctx context.Context, id string) {
	var sc *store.Schedule
	err := e.store.View(ctx, func(tx store.Tx) (err error) {
		sc, err = tx.GetSchedule(ctx, id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return
	}
	if err != nil {
		e.log.Error("read a schedule", "schedule", id, "err", err)
		e.armSchedule(id, e.Now().Add(retryFire))
		return
	}
	now := e.Now()
	if sc.NextFireAt.After(now) {
		// Early (the timer ran ahead of the clock), or another node
		// fired it and moved it on.
		e.armSchedule(id, sc.NextFireAt)
		return
	}
	spec, err := cron.Parse(sc.Pattern, sc.Timezone)
	if err != nil {
		e.log.Error("a schedule's pattern does not parse", "schedule", id, "err", err)
		return
	}
	// The occurrences due since NextFireAt: the latest fires, the others
	// were missed.
	latest, missed := sc.NextFireAt, int64(0)
	for n := spec.Next(latest); !n.IsZero() && !n.After(now) && missed < maxCountedOccurrences; n = spec.Next(n) {
		latest, missed = n, missed+1
	}
	next := spec.Next(now)
	admit := now.Sub(latest) <= CatchUpWindow
	why := "past the catch-up window of " + CatchUpWindow.String()
	if admit && sc.Overlap != helmrtype.OverlapAllow && sc.LastSessionID != "" {
		busy, err := e.sessionBusy(ctx, sc.LastSessionID)
		if err != nil {
			e.log.Error("read a schedule's last session", "schedule", id, "err", err)
			e.armSchedule(id, now.Add(retryFire))
			return
		}
		if busy {
			admit, why = false, "the previous fire's session "+sc.LastSessionID+" still has work (overlap skip)"
		}
	}
	var sessionID string
	if admit {
		req := helmrtype.SessionCreateRequest{Agent: sc.Agent, Input: sc.Input,
			IdempotencyKey: "schedule:" + sc.ID + ":" + latest.UTC().Format(time.RFC3339Nano)}
		r, _, err := e.createSession(ctx, req, Caller{Source: helmrtype.InputSource{Kind: helmrtype.SourceSchedule}},
			createOpts{scope: "schedules.fire", deploymentID: sc.DeploymentID})
		var he *helmrtype.Error
		switch {
		case err == nil:
			sessionID = r.Session.ID
			e.log.Info("a schedule fired", "schedule", id, "agent", sc.Agent, "trigger", sc.Name, "occurrence", latest, "session", sessionID)
		case errors.As(err, &he) && he.Code != helmrtype.CodeStoragePressure && he.Code != helmrtype.CodeInternal:
			// Refused for good (the Agent or its Deployment is gone,
			// the input no longer fits): this occurrence is missed.
			admit, why = false, he.Message
		default:
			e.log.Warn("a schedule's fire is refused for now; it is tried again", "schedule", id, "err", err)
			e.armSchedule(id, now.Add(retryFire))
			return
		}
	}
	if !admit {
		missed++
		e.log.Warn("a schedule's occurrence admitted nothing", "schedule", id, "agent", sc.Agent, "trigger", sc.Name, "occurrence", latest, "reason", why)
	}
	err = e.store.Update(ctx, func(tx store.Tx) error {
		cur, err := tx.GetSchedule(ctx, id)
		if err != nil {
			return err
		}
		changed := false
		// Another node that fired the same occurrence moved it on
		// already: its count stands.
		if cur.NextFireAt.Equal(sc.NextFireAt) && cur.Pattern == sc.Pattern && cur.Timezone == sc.Timezone {
			cur.NextFireAt, cur.MissedCount, changed = next, cur.MissedCount+missed, true
		}
		if sessionID != "" && (cur.LastFireAt == nil || cur.LastFireAt.Before(latest)) {
			cur.LastFireAt, cur.LastSessionID, changed = &latest, sessionID, true
		}
		if !changed {
			return nil
		}
		cur.UpdatedAt = now
		return tx.UpdateSchedule(ctx, cur)
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return
	case err != nil:
		// The occurrence fires again and replays its admission.
		e.log.Error("record a schedule's fire", "schedule", id, "err", err)
		e.armSchedule(id, now.Add(retryFire))
		return
	}
	e.armSchedule(id, next)
}

// sessionBusy says whether a Session is open with queued or running Turns.
func (e *Engine) sessionBusy(ctx context.Context, id string) (bool, error) {
	busy := false
	err := e.store.View(ctx, func(tx store.Tx) error {
		s, err := tx.GetSession(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if s.Status == helmrtype.SessionClosed {
			return nil
		}
		_, err = tx.ActiveTurn(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		busy = err == nil
		return err
	})
	return busy, err
}

func scheduleView(s *store.Schedule) helmrtype.Schedule {
	return helmrtype.Schedule{ID: s.ID, Agent: s.Agent, Name: s.Name, Kind: helmrtype.TriggerCron, DeploymentID: s.DeploymentID,
		Pattern: s.Pattern, Timezone: s.Timezone, Input: s.Input, Overlap: s.Overlap, NextFireAt: s.NextFireAt,
		LastFireAt: s.LastFireAt, LastSessionID: s.LastSessionID, MissedCount: s.MissedCount, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
}

// ListSchedules lists the Schedules by Agent and trigger name; the cursor
// is the last Schedule ID seen.
func (e *Engine) ListSchedules(ctx context.Context, cursor string, limit int) (*helmrtype.SchedulePage, error) {
	limit, err := pageLimit(limit, 50)
	if err != nil {
		return nil, err
	}
	page := &helmrtype.SchedulePage{Schedules: []helmrtype.Schedule{}}
	err = e.store.View(ctx, func(tx store.Tx) error {
		rows, err := tx.ListSchedules(ctx)
		if err != nil {
			return err
		}
		start := 0
		if cursor != "" {
			start = -1
			for i := range rows {
				if rows[i].ID == cursor {
					start = i + 1
				}
			}
			if start < 0 {
				return invalid("cursor is not valid (its schedule is gone: list again from the start)")
			}
		}
		for i := start; i < len(rows); i++ {
			if len(page.Schedules) == limit {
				page.NextCursor = page.Schedules[limit-1].ID
				break
			}
			page.Schedules = append(page.Schedules, scheduleView(&rows[i]))
		}
		return nil
	})
	return page, err
}

// GetSchedule returns a Schedule.
func (e *Engine) GetSchedule(ctx context.Context, id string) (*helmrtype.Schedule, error) {
	var out helmrtype.Schedule
	err := e.store.View(ctx, func(tx store.Tx) error {
		s, err := tx.GetSchedule(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return notFound("schedule", id)
		}
		if err != nil {
			return err
		}
		out = scheduleView(s)
		return nil
	})
	return &out, err
}

// checkTrigger validates one trigger of Agent a in a manifest.
func checkTrigger(a *helmrtype.AgentManifest, tr *helmrtype.TriggerManifest) error {
	if !helmrtype.ValidName(tr.Name) {
		return fmt.Errorf("trigger name %q does not match %s", tr.Name, helmrtype.NamePattern)
	}
	if tr.Kind != helmrtype.TriggerCron {
		return fmt.Errorf("trigger %q: kind %q: want %q", tr.Name, tr.Kind, helmrtype.TriggerCron)
	}
	if tr.Overlap != helmrtype.OverlapSkip && tr.Overlap != helmrtype.OverlapAllow {
		return fmt.Errorf("trigger %q: overlap %q: want %q or %q", tr.Name, tr.Overlap, helmrtype.OverlapSkip, helmrtype.OverlapAllow)
	}
	if _, err := cron.Parse(tr.Pattern, tr.Timezone); err != nil {
		return fmt.Errorf("trigger %q: %v", tr.Name, err)
	}
	if hasInput(tr.Input) {
		in, err := checkInput(a, tr.Input)
		if err != nil {
			return fmt.Errorf("trigger %q: input: %v", tr.Name, err)
		}
		tr.Input = in
	}
	// A JSON Agent's input schema, when the manifest gives one the server
	// can read, checks the input now rather than at each fire.
	if a.InputKind == helmrtype.InputKindJSON && len(a.InputSchema) > 0 {
		if r, err := resolveSchema(a.InputSchema); err == nil {
			var v any
			if len(tr.Input) > 0 {
				json.Unmarshal(tr.Input, &v)
			}
			if err := r.Validate(v); err != nil {
				return fmt.Errorf("trigger %q: input does not satisfy agent %q's input schema: %v", tr.Name, a.ID, err)
			}
		}
	}
	return nil
}
