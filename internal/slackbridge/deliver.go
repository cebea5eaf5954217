package slackbridge

import (
	"context"
	"errors"
	"time"

	"github.com/slack-go/slack"
)

// permanentError is a Slack call that will not succeed by trying again
// (channel_not_found, not_in_channel, invalid_auth …, or transient
// failures past MaxAttempts).
type permanentError struct {
	Code string
}

func (e *permanentError) Error() string { return "slack: " + e.Code }

// call runs one Web API call until it succeeds: a 429 waits its
// Retry-After, a 5xx or network failure backs off (250 ms doubling to
// 10 s), for at most MaxAttempts tries; a Slack error answer is
// permanent at once.
func (b *Bridge) call(ctx context.Context, fn func() error) error {
	backoff := 250 * time.Millisecond
	var last string
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := backoff
		var rl *slack.RateLimitedError
		var se slack.SlackErrorResponse
		var sc slack.StatusCodeError
		switch {
		case errors.As(err, &rl):
			wait, last = max(rl.RetryAfter, 100*time.Millisecond), "ratelimited"
		case errors.As(err, &se):
			if se.Err != "ratelimited" && se.Err != "internal_error" && se.Err != "fatal_error" && se.Err != "service_unavailable" {
				return &permanentError{Code: se.Err}
			}
			last = se.Err
			backoff = min(backoff*2, 10*time.Second)
		case errors.As(err, &sc) && sc.Code < 500:
			return &permanentError{Code: sc.Status}
		default:
			last = err.Error()
			backoff = min(backoff*2, 10*time.Second)
		}
		if attempt >= b.opts.MaxAttempts {
			return &permanentError{Code: "retries_exhausted: " + last}
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// sleep waits d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
