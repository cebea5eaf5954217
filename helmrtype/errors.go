package helmrtype

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Code is a stable, machine-readable error code.
type Code string

// Stable error codes of the REST API, the session protocol and the SDK.
const (
	CodeNotFound              Code = "not_found"
	CodeInvalidRequest        Code = "invalid_request"
	CodeInputInvalid          Code = "input_invalid"
	CodeResultInvalid         Code = "result_invalid"
	CodeOutputInvalid         Code = "output_invalid"
	CodeLimitExceeded         Code = "limit_exceeded"
	CodeResponseAlreadyStaged Code = "response_already_staged"
	CodeIdempotencyConflict   Code = "idempotency_conflict"
	CodeConflict              Code = "conflict"
	CodeSessionKeyConflict    Code = "session_key_conflict"
	CodeSessionClosed         Code = "session_closed"
	CodeTurnNotRunning        Code = "turn_not_running"
	CodeTurnSettled           Code = "turn_settled"
	CodeUnauthorized          Code = "unauthorized"
	CodeForbidden             Code = "forbidden"
	CodeNoDeployment          Code = "no_deployment"
	CodeHandlerFailed         Code = "handler_failed"
	CodeProcessExited         Code = "process_exited"
	CodeExecutionLost         Code = "execution_lost"
	CodeInterrupted           Code = "interrupted"
	CodeDeadlineExceeded      Code = "deadline_exceeded"
	CodeCallbackFailed        Code = "callback_failed"
	CodeMessageRejected       Code = "message_rejected"
	CodeCleanupFailed         Code = "cleanup_failed"
	CodeCancelled             Code = "cancelled"
	CodeStoragePressure       Code = "storage_pressure"
	CodeRateLimited           Code = "rate_limited"
	CodeUnavailable           Code = "unavailable"
	CodeInternal              Code = "internal"

	// Questions, tokens and waits.
	CodeAnswerInvalid Code = "answer_invalid"
	// CodePolicyInvalid: a runtime MCP policy is not well formed or names
	// Agents outside its manifest.
	CodePolicyInvalid Code = "policy_invalid"
	// CodeSourcesInvalid: a Deployment's sources (the files its Templates'
	// Copy steps read) are missing, name a path outside the agent package,
	// or arrived as an archive that is not a plain tar of files and
	// directories inside its root.
	CodeSourcesInvalid Code = "sources_invalid"
	// CodeLimitsUnenforced: a Deployment's Template sets resource limits
	// that the server's host cannot enforce, and the server was not
	// started with --allow-unlimited.
	CodeLimitsUnenforced Code = "limits_unenforced"
	// CodeImageBuildFailed: a Deployment's Template image could not be
	// pulled or built when it was published; the Deployment was refused.
	CodeImageBuildFailed        Code = "image_build_failed"
	CodeAskNotPending           Code = "ask_not_pending"
	CodeTokenCancelled          Code = "token_cancelled"
	CodeTokenCompletionConflict Code = "token_completion_conflict"
	CodeTokenExpired            Code = "token_expired"
	CodeWaitCancelled           Code = "wait_cancelled"
	CodeWaitTimeout             Code = "wait_timeout"
)

// Error is an error with a stable code, a human message and optional details.
// It is the body of the REST error envelope {"error":{…}}.
type Error struct {
	Code    Code           `json:"code"`
	Message string         `json:"message,omitempty"`
	Details map[string]any `json:"details,omitempty"`
	// Status is the HTTP status the error was (or will be) sent with.
	Status int `json:"-"`
	// RequestID is the X-Request-Id of the answer that carried the error
	// (set by the client), which the server's log names.
	RequestID string `json:"-"`
	// RetryAfter is the delay the answer's Retry-After header asked for
	// before the request is sent again (set by the client); 0 when none.
	RetryAfter time.Duration `json:"-"`
}

// Errorf returns an *Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error returns "code: message".
func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Message
}

// Is reports whether target is an *Error or Code with the same code, so that
// errors.Is(err, helmrtype.CodeNotFound) works.
func (e *Error) Is(target error) bool {
	var c Code
	if errors.As(target, &c) {
		return c == e.Code
	}
	var t *Error
	if errors.As(target, &t) && t != nil {
		return t.Code == e.Code
	}
	return false
}

// Error lets a Code be used as an errors.Is target.
func (c Code) Error() string { return string(c) }

// CodeOf returns the code of err, CodeInternal for an error without one, and
// "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	var c Code
	if errors.As(err, &c) {
		return c
	}
	return CodeInternal
}

// HTTPStatus is the HTTP status that goes with code.
func HTTPStatus(code Code) int {
	switch code {
	case CodeNotFound, CodeNoDeployment:
		return http.StatusNotFound
	case CodeInvalidRequest, CodeInputInvalid, CodeResultInvalid, CodeOutputInvalid, CodeAnswerInvalid, CodePolicyInvalid, CodeSourcesInvalid, CodeLimitsUnenforced, CodeImageBuildFailed:
		return http.StatusBadRequest
	case CodeLimitExceeded:
		return http.StatusRequestEntityTooLarge
	case CodeIdempotencyConflict, CodeConflict, CodeSessionKeyConflict, CodeSessionClosed,
		CodeTurnNotRunning, CodeTurnSettled, CodeResponseAlreadyStaged,
		CodeAskNotPending, CodeTokenCancelled, CodeTokenCompletionConflict, CodeTokenExpired, CodeWaitCancelled:
		return http.StatusConflict
	case CodeWaitTimeout:
		return http.StatusRequestTimeout
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeForbidden:
		return http.StatusForbidden
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	case CodeStoragePressure:
		return http.StatusInsufficientStorage
	case CodeRateLimited:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// ErrorEnvelope is the REST error body.
type ErrorEnvelope struct {
	Error *Error `json:"error"`
}
