// Package cron reads the patterns of cron triggers and finds their
// occurrences, with github.com/robfig/cron/v3: five fields (minute, hour,
// day of month, month, day of week), an optional leading seconds field,
// and the descriptors @yearly, @monthly, @weekly, @daily and @hourly, read
// in an IANA time zone.
package cron

import (
	"fmt"
	"time"

	robfig "github.com/robfig/cron/v3"
)

// parser reads five fields, or six with seconds first.
var parser = robfig.NewParser(robfig.SecondOptional | robfig.Minute | robfig.Hour | robfig.Dom | robfig.Month | robfig.Dow | robfig.Descriptor)

// Schedule is a parsed pattern in its time zone.
type Schedule struct {
	s   robfig.Schedule
	loc *time.Location
}

// Parse reads pattern in the IANA time zone tz ("" for UTC).
func Parse(pattern, tz string) (*Schedule, error) {
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %v", tz, err)
	}
	s, err := parser.Parse(pattern)
	if err != nil {
		return nil, fmt.Errorf("cron pattern %q: %v", pattern, err)
	}
	return &Schedule{s: s, loc: loc}, nil
}

// Next returns the first occurrence after t (the zero time if there is
// none within five years). Daylight saving time is as robfig/cron handles
// it: a local time the clocks skip has no occurrence that day, and one
// they repeat has two (an hourly or finer pattern keeps its pace).
func (s *Schedule) Next(t time.Time) time.Time {
	return s.s.Next(t.In(s.loc)).UTC()
}
