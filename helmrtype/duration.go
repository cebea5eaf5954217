package helmrtype

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Never is the Retention value that disables an idle policy.
const Never = "never"

// maxDuration bounds a parsed Duration (about 146 years).
const maxDuration = time.Duration(1 << 62)

// ParseDuration parses a Duration string such as "500ms", "30s", "15m", "2h",
// "7d" or a sum like "1h30m". Units are ms, s, m, h and d; a number may have
// a decimal fraction ("1.5h"); the value must be positive.
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
		whole, frac, _ := strings.Cut(rest[:i], ".")
		if whole == "" && frac == "" || strings.Contains(frac, ".") {
			return 0, fmt.Errorf("duration %q: want a number followed by ms, s, m, h or d", s)
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
		// Whole units exactly, in integers; the fraction as Go's
		// time.ParseDuration does, from at most 18 digits.
		var term time.Duration
		if whole != "" {
			n, err := strconv.ParseUint(whole, 10, 64)
			if err != nil || n > uint64(maxDuration/unit) {
				return 0, fmt.Errorf("duration %q is too long", s)
			}
			term = time.Duration(n) * unit
		}
		if frac = frac[:min(len(frac), 18)]; frac != "" {
			f, _ := strconv.ParseUint(frac, 10, 64) // digits only, < 10^18
			scale := math.Pow10(len(frac))
			term += time.Duration(float64(f) * (float64(unit) / scale))
		}
		if term > maxDuration-total {
			return 0, fmt.Errorf("duration %q is too long", s)
		}
		total += term
	}
	if total <= 0 {
		return 0, fmt.Errorf("duration %q must be positive", s)
	}
	return total, nil
}

// ParseRetention parses a Duration or "never"; "never" yields 0 and never=true.
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
