package supervisor

import "time"

// Clock tells the time and runs functions later: the supervisor's timers
// (hello, idle, deadline, cleanup, retirement) all run on it, so that tests
// can inject their own.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending call of Clock.AfterFunc.
type Timer interface {
	// Stop prevents the call; false when it already ran or was stopped.
	Stop() bool
	// Reset makes the call happen after d from now instead.
	Reset(d time.Duration) bool
}

// SystemClock is the wall clock.
var SystemClock Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
