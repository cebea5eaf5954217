package helmrtype

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Never is the Retention value that disables an idle policy.
const Never = "never"

// ParseDuration parses a Duration string such as "500ms", "30s", "15m", "2h",
// "7d" or a sum like "1h30m". Units are ms, s, m, h and d; the value must be
// positive.
func ParseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	var total time.Duration
	rest := s
	for rest != "" {
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		if i == 0 {
			return 0, fmt.Errorf("duration %q: want a number followed by ms, s, m, h or d", s)
		}
		n, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil {
			return 0, fmt.Errorf("duration %q: %v", s, err)
		}
		rest = rest[i:]
		var unit time.Duration
		switch {
		case strings.HasPrefix(rest, "ms"):
			unit, rest = time.Millisecond, rest[2:]
		case strings.HasPrefix(rest, "s"):
			unit, rest = time.Second, rest[1:]
		case strings.HasPrefix(rest, "m"):
			unit, rest = time.Minute, rest[1:]
		case strings.HasPrefix(rest, "h"):
			unit, rest = time.Hour, rest[1:]
		case strings.HasPrefix(rest, "d"):
			unit, rest = 24*time.Hour, rest[1:]
		default:
			return 0, fmt.Errorf("duration %q: want a unit of ms, s, m, h or d", s)
		}
		if n > float64(1<<62)/float64(unit) {
			return 0, fmt.Errorf("duration %q is too long", s)
		}
		total += time.Duration(n * float64(unit))
	}
	if total <= 0 {
		return 0, fmt.Errorf("duration %q must be positive", s)
	}
	return total, nil
}

// ParseRetention parses a Duration or "never"; never yields 0 and ok=false.
func ParseRetention(s string) (d time.Duration, never bool, err error) {
	if s == Never {
		return 0, true, nil
	}
	d, err = ParseDuration(s)
	return d, false, err
}

// FormatDuration writes d in the largest whole unit (d, h, m, s, ms), or as
// Go's time.Duration string when no single unit fits.
func FormatDuration(d time.Duration) string {
	for _, u := range []struct {
		d time.Duration
		s string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if d >= u.d && d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.s
		}
	}
	return d.String()
}
