package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store"
)

// createdStatus is 201 for a new resource and 200 for an idempotent replay.
func createdStatus(replayed bool) int {
	if replayed {
		return http.StatusOK
	}
	return http.StatusCreated
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if he := s.apiError(r, err); he != nil {
		setRetryAfter(w, err)
		writeJSON(w, helmrtype.HTTPStatus(he.Code), helmrtype.ErrorEnvelope{Error: he})
	}
}

// unreachableRetryAfter is the Retry-After of an answer that the database
// is unreachable: long enough not to hammer a recovering database, short
// enough that an outage of seconds costs a client about as much.
const unreachableRetryAfter = 2 * time.Second

// setRetryAfter sets the Retry-After header (whole seconds) of an answer
// to err when err says the database is unreachable: the request may be
// sent again then.
func setRetryAfter(w http.ResponseWriter, err error) {
	if errors.Is(err, store.ErrUnavailable) {
		w.Header().Set("Retry-After", strconv.Itoa(int(unreachableRetryAfter/time.Second)))
	}
}

// apiError is the error a failed request answers with: unavailable when
// the store could not reach the database, else err itself when it has a
// code, else one chosen (and logged) for it; nil when the client is gone
// and nothing is to be answered.
func (s *Server) apiError(r *http.Request, err error) *helmrtype.Error {
	var he *helmrtype.Error
	switch {
	case errors.Is(err, store.ErrUnavailable):
		// Whatever the handler concluded, it could not reach the
		// database. The store logs the outage once (store.Monitor), not
		// each request that meets it.
		if r.Context().Err() != nil {
			return nil // the client is gone
		}
		he = &helmrtype.Error{Code: helmrtype.CodeUnavailable, Message: "the database is unreachable; try again"}
	case errors.As(err, &he):
	case errors.Is(err, store.ErrNoSpace), errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		// A write that found the disk full: nothing was stored, and the
		// client may retry once space is back.
		s.log.ErrorContext(r.Context(), "storage full", "method", r.Method, "path", r.URL.Path, "err", err)
		he = &helmrtype.Error{Code: helmrtype.CodeStoragePressure, Message: "the control plane's disk is full; nothing was stored, retry once space is freed"}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		if r.Context().Err() != nil {
			return nil // the client is gone
		}
		he = &helmrtype.Error{Code: helmrtype.CodeUnavailable, Message: "the request timed out"}
	default:
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		he = &helmrtype.Error{Code: helmrtype.CodeInternal, Message: "internal error"}
	}
	return he
}

// decode reads a JSON body strictly: unknown fields and trailing data are errors.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxJSONBody)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return helmrtype.Errorf(helmrtype.CodeLimitExceeded, "the request body is larger than %d bytes", maxJSONBody)
		}
		if errors.Is(err, io.EOF) {
			return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "the request body is empty; send a JSON object")
		}
		return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "the request body is not valid: %v", err)
	}
	if dec.More() {
		return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "the request body has data after the JSON object")
	}
	return nil
}

// decodeOptional is decode for bodies that may be empty.
func decodeOptional(w http.ResponseWriter, r *http.Request, v any) error {
	if r.ContentLength == 0 {
		return nil
	}
	err := decode(w, r, v)
	var he *helmrtype.Error
	if errors.As(err, &he) && strings.Contains(he.Message, "body is empty") {
		return nil
	}
	return err
}

// queryInt reads a positive integer query parameter such as limit; 0 means
// absent (the default applies).
func queryInt(r *http.Request, name string) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "%s must be a positive integer", name)
	}
	return n, nil
}
