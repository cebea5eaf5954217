package helmrtype

import (
	"testing"
	"time"
)

const day = 24 * time.Hour

func TestParseDuration(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"1ms", time.Millisecond},
		{"500ms", 500 * time.Millisecond},
		{"30s", 30 * time.Second},
		{"15m", 15 * time.Minute},
		{"2h", 2 * time.Hour},
		{"7d", 7 * day},
		{"1h30m", 90 * time.Minute},
		{"1d12h", 36 * time.Hour},
		{"1m30s500ms", 90*time.Second + 500*time.Millisecond},
		{"30m1h", 90 * time.Minute},
		{"0s1ms", time.Millisecond},
		{"1.5h", 90 * time.Minute},
		{"0.5s", 500 * time.Millisecond},
		{"0.3s", 300 * time.Millisecond},
		{"0.1ms", 100 * time.Microsecond},
		{".5m", 30 * time.Second},
		{"2.m", 2 * time.Minute},
		{"007s", 7 * time.Second},
		{"1.000000000000000000001s", time.Second},
		// Large values are exact, not rounded through float64.
		{"4611686018427ms", 4611686018427 * time.Millisecond},
		{"53375d", 53375 * day},
		{"4611686018s", 4611686018 * time.Second},
	} {
		got, err := ParseDuration(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseDuration(%q) = %v (%d), %v; want %v (%d)", c.in, got, int64(got), err, c.want, int64(c.want))
		}
	}
}

func TestParseDurationRefused(t *testing.T) {
	for _, in := range []string{
		"", "0", "1", "0s", "0ms", "0d0h", "0.0000000001ms", "-1s", "+1s", "s", "ms", ".s", ".", "1.2.3s",
		"1x", "1 s", " 1s", "1s ", "1S", "1H", "1hour", "1sec", "1e3s", "1_000s", "1µs", "1us", "1ns", "1sm", "1h-30m",
		"never", "Never", "inf", "NaN", "0x10s",
		// Too long, one term or summed; a sum must not wrap around.
		"53376d", "4611686018428ms", "99999999999999999999999ms", "53375d53375d", "53375d53375d53375d53375d53375d",
	} {
		if got, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v (%d), want an error", in, got, int64(got))
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for _, c := range []struct {
		in   time.Duration
		want string
	}{
		{time.Millisecond, "1ms"},
		{1500 * time.Millisecond, "1500ms"},
		{time.Second, "1s"},
		{90 * time.Second, "90s"},
		{time.Minute, "1m"},
		{90 * time.Minute, "90m"},
		{time.Hour, "1h"},
		{36 * time.Hour, "36h"},
		{day, "1d"},
		{7 * day, "7d"},
		{1500 * time.Microsecond, "1.5ms"},
		{100 * time.Microsecond, "100µs"},
		{0, "0s"},
	} {
		if got := FormatDuration(c.in); got != c.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", c.in, got, c.want)
		}
	}
	// Whole milliseconds survive a round trip.
	for _, d := range []time.Duration{time.Millisecond, 61 * time.Second, 25 * time.Hour, 7 * day, 4611686018427 * time.Millisecond, 1500 * time.Microsecond} {
		got, err := ParseDuration(FormatDuration(d))
		if err != nil || got != d {
			t.Errorf("ParseDuration(FormatDuration(%v)) = %v, %v", d, got, err)
		}
	}
}

func TestParseRetention(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    time.Duration
		never   bool
		wantErr bool
	}{
		{"never", 0, true, false},
		{"7d", 7 * day, false, false},
		{"30s", 30 * time.Second, false, false},
		{"Never", 0, false, true},
		{"", 0, false, true},
		{"0s", 0, false, true},
		{"never1s", 0, false, true},
	} {
		got, never, err := ParseRetention(c.in)
		if got != c.want || never != c.never || (err != nil) != c.wantErr {
			t.Errorf("ParseRetention(%q) = %v, %t, %v; want %v, %t, error %t", c.in, got, never, err, c.want, c.never, c.wantErr)
		}
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, seed := range []string{"1ms", "30s", "1h30m", "7d", "1.5h", ".5m", "0.3s", "53375d", "53375d53375d", "4611686018427ms",
		"", "0s", "-1s", "1x", "never", "1.2.3s", "99999999999999999999ms"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		r, never, rerr := ParseRetention(s)
		if s != Never && (r != d || never || (rerr == nil) != (err == nil)) {
			t.Fatalf("ParseRetention(%q) = %v, %t, %v; ParseDuration = %v, %v", s, r, never, rerr, d, err)
		}
		if err != nil {
			return
		}
		if d <= 0 || d > 1<<62 {
			t.Fatalf("ParseDuration(%q) = %d, out of range", s, int64(d))
		}
		if d%time.Millisecond != 0 {
			return
		}
		f := FormatDuration(d)
		d2, err := ParseDuration(f)
		if err != nil || d2 != d {
			t.Fatalf("ParseDuration(%q) = %d; FormatDuration = %q, which parses to %d, %v", s, int64(d), f, int64(d2), err)
		}
	})
}
