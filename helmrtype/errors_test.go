package helmrtype

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
)

func TestErrorMessage(t *testing.T) {
	if got := Errorf(CodeNotFound, "session %s", "ses-1").Error(); got != "not_found: session ses-1" {
		t.Errorf("Error() = %q", got)
	}
	if got := (&Error{Code: CodeConflict}).Error(); got != "conflict" {
		t.Errorf("Error() without message = %q", got)
	}
	if got := CodeTurnSettled.Error(); got != "turn_settled" {
		t.Errorf("Code.Error() = %q", got)
	}
}

func TestErrorIs(t *testing.T) {
	notFound := Errorf(CodeNotFound, "no session ses-1")
	wrapped := fmt.Errorf("get: %w", notFound)
	for _, c := range []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"same code", notFound, CodeNotFound, true},
		{"wrapped, code", wrapped, CodeNotFound, true},
		{"other code", notFound, CodeConflict, false},
		{"error target", notFound, &Error{Code: CodeNotFound, Message: "other message"}, true},
		{"wrapped, error target", wrapped, &Error{Code: CodeNotFound}, true},
		{"error target, other code", notFound, &Error{Code: CodeConflict}, false},
		{"wrapped error target", notFound, fmt.Errorf("x: %w", CodeNotFound), true},
		{"nil *Error target", notFound, (*Error)(nil), false},
		{"code itself", CodeNotFound, CodeNotFound, true},
		{"wrapped code", fmt.Errorf("x: %w", CodeConflict), CodeConflict, true},
		{"joined", errors.Join(errors.New("a"), Errorf(CodeConflict, "b")), CodeConflict, true},
		// Codes are never matched by their text.
		{"plain error with the code's text", errors.New("not_found"), CodeNotFound, false},
		{"plain error", errors.New("boom"), CodeInternal, false},
	} {
		if got := errors.Is(c.err, c.target); got != c.want {
			t.Errorf("%s: errors.Is(%v, %v) = %t, want %t", c.name, c.err, c.target, got, c.want)
		}
	}
	var e *Error
	if !errors.As(wrapped, &e) || e != notFound {
		t.Errorf("errors.As(wrapped, *Error) = %v", e)
	}
}

func TestCodeOf(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want Code
	}{
		{"nil", nil, ""},
		{"error", Errorf(CodeInputInvalid, "bad"), CodeInputInvalid},
		{"wrapped error", fmt.Errorf("x: %w", Errorf(CodeSessionClosed, "closed")), CodeSessionClosed},
		{"code", CodeUnauthorized, CodeUnauthorized},
		{"wrapped code", fmt.Errorf("x: %w", CodeForbidden), CodeForbidden},
		{"joined", errors.Join(errors.New("a"), Errorf(CodeConflict, "b")), CodeConflict},
		{"plain", errors.New("boom"), CodeInternal},
		{"plain with a code's text", errors.New("not_found"), CodeInternal},
	} {
		if got := CodeOf(c.err); got != c.want {
			t.Errorf("%s: CodeOf(%v) = %q, want %q", c.name, c.err, got, c.want)
		}
	}
}

func TestHTTPStatus(t *testing.T) {
	for code, want := range map[Code]int{
		CodeNotFound:              http.StatusNotFound,
		CodeNoDeployment:          http.StatusNotFound,
		CodeInputInvalid:          http.StatusBadRequest,
		CodeLimitExceeded:         http.StatusRequestEntityTooLarge,
		CodeIdempotencyConflict:   http.StatusConflict,
		CodeResponseAlreadyStaged: http.StatusConflict,
		CodeUnauthorized:          http.StatusUnauthorized,
		CodeForbidden:             http.StatusForbidden,
		CodeUnavailable:           http.StatusServiceUnavailable,
		CodeInternal:              http.StatusInternalServerError,
		Code("made_up"):           http.StatusInternalServerError,
	} {
		if got := HTTPStatus(code); got != want {
			t.Errorf("HTTPStatus(%s) = %d, want %d", code, got, want)
		}
	}
}
