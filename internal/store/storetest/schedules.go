package storetest

import (
	"context"
	"testing"

	"github.com/helmr-go/helmr/internal/store"
)

func storedSchedule(s store.Schedule) store.Schedule {
	s.CreatedAt, s.UpdatedAt, s.NextFireAt, s.LastFireAt = stored(s.CreatedAt), stored(s.UpdatedAt), stored(s.NextFireAt), storedPtr(s.LastFireAt)
	return s
}

func testSchedules(t *testing.T, s store.Store) {
	daily := &store.Schedule{ID: "sch-1", Agent: "digest", Name: "daily", DeploymentID: "dep-1", Pattern: "0 9 * * *",
		Timezone: "Europe/Paris", Input: raw(`[{"type":"text","text":"go"}]`), Overlap: "skip",
		CreatedAt: at(80), UpdatedAt: at(80), NextFireAt: at(90)}
	hourly := &store.Schedule{ID: "sch-2", Agent: "alpha", Name: "hourly", DeploymentID: "dep-1", Pattern: "0 * * * *",
		Timezone: "UTC", Overlap: "allow", CreatedAt: at(81), UpdatedAt: at(81), NextFireAt: at(91)}
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, sc := range []*store.Schedule{daily, hourly} {
			wantOK(t, "InsertSchedule("+sc.ID+")", tx.InsertSchedule(ctx, sc))
		}
		wantErr(t, "InsertSchedule(duplicate ID)", tx.InsertSchedule(ctx, daily), store.ErrDuplicate)
		same := *daily
		same.ID = "sch-3"
		wantErr(t, "InsertSchedule(duplicate agent and name)", tx.InsertSchedule(ctx, &same), store.ErrDuplicate)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetSchedule(ctx, daily.ID)
		if err != nil {
			t.Fatalf("GetSchedule: %v", err)
		}
		check(t, "GetSchedule", *got, storedSchedule(*daily))
		_, err = tx.GetSchedule(ctx, "sch-missing")
		wantErr(t, "GetSchedule(missing)", err, store.ErrNotFound)
		all, err := tx.ListSchedules(ctx)
		if err != nil {
			t.Fatalf("ListSchedules: %v", err)
		}
		check(t, "ListSchedules (by agent, name)", all, []store.Schedule{storedSchedule(*hourly), storedSchedule(*daily)})
		return nil
	})
	fired := *daily
	fired.DeploymentID, fired.Pattern, fired.Timezone, fired.Input, fired.Overlap = "dep-2", "30 9 * * 1-5", "UTC", raw(`[]`), "allow"
	fired.UpdatedAt, fired.NextFireAt, fired.LastFireAt, fired.LastSessionID, fired.MissedCount = at(95), at(99), ptr(at(90)), "ses-9", 3
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "UpdateSchedule", tx.UpdateSchedule(ctx, &fired))
		missing := fired
		missing.ID = "sch-missing"
		wantErr(t, "UpdateSchedule(missing)", tx.UpdateSchedule(ctx, &missing), store.ErrNotFound)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.GetSchedule(ctx, daily.ID)
		if err != nil {
			t.Fatalf("GetSchedule after update: %v", err)
		}
		check(t, "GetSchedule after update", *got, storedSchedule(fired))
		return nil
	})
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		wantOK(t, "DeleteSchedule", tx.DeleteSchedule(ctx, hourly.ID))
		wantErr(t, "DeleteSchedule(again)", tx.DeleteSchedule(ctx, hourly.ID), store.ErrNotFound)
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		all, err := tx.ListSchedules(ctx)
		if err != nil {
			t.Fatalf("ListSchedules after delete: %v", err)
		}
		check(t, "ListSchedules after delete", all, []store.Schedule{storedSchedule(fired)})
		return nil
	})
}
