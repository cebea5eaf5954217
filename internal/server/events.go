package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

// pingInterval keeps idle SSE connections alive through proxies.
const pingInterval = 15 * time.Second

func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	after, err := parseAfter(r.URL.Query().Get("after"))
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		page, err := s.eng.ListEvents(r.Context(), id, after, limit)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, page)
		return nil
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		if after, err = parseAfter(last); err != nil {
			return err
		}
	}
	// Check the Session exists before committing to a stream.
	if _, err := s.eng.ListEvents(r.Context(), id, after, 1); err != nil {
		return err
	}
	return s.stream(w, r, id, after)
}

func parseAfter(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > 1<<53-1 {
		return 0, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "after must be a non-negative safe integer")
	}
	return n, nil
}

// stream follows the Session's timeline over SSE: each record is one event
// with id = its sequence; a reconnect resumes with Last-Event-ID.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, id string, after int64) error {
	flusher, ok := w.(http.Flusher)
	if !ok {
		return fmt.Errorf("streaming unsupported")
	}
	// A stream outlives the server's write timeout: its heartbeats keep
	// it alive, and a client that stops reading is cut off by the
	// connection, not by a deadline.
	http.NewResponseController(w).SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s.metrics.SSESubscribers.Inc()
	defer s.metrics.SSESubscribers.Dec()
	fmt.Fprint(w, ": stream\n\n")
	flusher.Flush()
	ctx := r.Context()
	ping := time.NewTicker(pingInterval)
	defer ping.Stop()
	for {
		changed, stop := s.eng.Watch(id)
		page, err := s.eng.ListEvents(ctx, id, after, 1000)
		if err != nil {
			stop()
			return nil // the stream has started; the client reconnects
		}
		for _, ev := range page.Records {
			b, _ := json.Marshal(ev)
			fmt.Fprintf(w, "id: %d\ndata: %s\n\n", ev.Sequence, b)
			after = ev.Sequence
		}
		if len(page.Records) > 0 {
			flusher.Flush()
		}
		if page.HasMore {
			stop()
			continue
		}
		select {
		case <-changed:
		case <-ping.C:
			fmt.Fprint(w, ": ping\n\n")
			flusher.Flush()
		case <-ctx.Done():
			stop()
			return nil
		case <-s.stopping:
			stop()
			return nil
		}
		stop()
	}
}
