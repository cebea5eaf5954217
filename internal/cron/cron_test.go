package cron

import (
	"testing"
	"time"
)

func TestNext(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		pattern, tz, after, want string
	}{
		{"*/15 * * * *", "", "2026-03-01T10:07:00Z", "2026-03-01T10:15:00Z"},
		{"0 9 * * 1-5", "Europe/Paris", "2026-03-06T09:00:00Z", "2026-03-09T08:00:00Z"},
		{"*/2 * * * * *", "UTC", "2026-03-01T10:00:01Z", "2026-03-01T10:00:02Z"},
		{"@daily", "America/New_York", "2026-03-01T12:00:00Z", "2026-03-02T05:00:00Z"},
		// 02:30 does not exist on 2026-03-08 in New York (the clocks go
		// from 02:00 to 03:00): that day has no occurrence.
		{"30 2 * * *", "America/New_York", "2026-03-08T05:00:00Z", "2026-03-09T06:30:00Z"},
		// 01:30 comes twice on 2026-11-01 in New York: both are
		// occurrences.
		{"30 1 * * *", "America/New_York", "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z"},
	} {
		s, err := Parse(c.pattern, c.tz)
		if err != nil {
			t.Fatalf("Parse(%q, %q): %v", c.pattern, c.tz, err)
		}
		if got := s.Next(at(c.after)); !got.Equal(at(c.want)) {
			t.Errorf("Next(%q in %q after %s) = %s, want %s", c.pattern, c.tz, c.after, got.Format(time.RFC3339), c.want)
		}
	}
	for _, bad := range [][2]string{{"* * *", ""}, {"61 * * * *", ""}, {"* * * * *", "Mars/Olympus"}, {"", ""}} {
		if _, err := Parse(bad[0], bad[1]); err == nil {
			t.Errorf("Parse(%q, %q) accepted", bad[0], bad[1])
		}
	}
}
