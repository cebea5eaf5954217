package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

// Computers and Commands (docs/api.md, "Computers").

func (s *Server) createComputer(w http.ResponseWriter, r *http.Request) error {
	var req helmrtype.ComputerCreateRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	c, replayed, err := s.eng.CreateComputer(r.Context(), req)
	if err != nil {
		return err
	}
	writeJSON(w, createdStatus(replayed), c)
	return nil
}

// listComputers lists Computers, or finds one by ?key=.
func (s *Server) listComputers(w http.ResponseWriter, r *http.Request) error {
	if key := r.URL.Query().Get("key"); key != "" {
		c, err := s.eng.GetComputerByKey(r.Context(), key)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, helmrtype.ComputerPage{Computers: []helmrtype.ComputerState{*c}})
		return nil
	}
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	page, err := s.eng.ListComputers(r.Context(), r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) getComputer(w http.ResponseWriter, r *http.Request) error {
	c, err := s.eng.GetComputer(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) deleteComputer(w http.ResponseWriter, r *http.Request) error {
	c, err := s.eng.DeleteComputer(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) computerMembers(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	page, err := s.eng.ComputerMembers(r.Context(), r.PathValue("id"), r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) execCommand(w http.ResponseWriter, r *http.Request) error {
	var req helmrtype.CommandRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	c, replayed, err := s.eng.ExecCommand(r.Context(), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, createdStatus(replayed), c)
	return nil
}

func (s *Server) getCommand(w http.ResponseWriter, r *http.Request) error {
	c, err := s.eng.GetCommand(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) cancelCommand(w http.ResponseWriter, r *http.Request) error {
	// The body is empty or an empty object, like every control route's.
	if err := decodeOptional(w, r, &struct{}{}); err != nil {
		return err
	}
	c, err := s.eng.CancelCommand(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) waitCommand(w http.ResponseWriter, r *http.Request) error {
	d, err := parseWait(r.URL.Query().Get("timeout"))
	if err != nil {
		return err
	}
	ctx, cancel := s.untilStopping(r.Context())
	defer cancel()
	res, err := s.eng.WaitCommand(ctx, r.PathValue("id"), min(d, maxWait))
	if err != nil && r.Context().Err() == nil && ctx.Err() != nil {
		res, err = &helmrtype.CommandWaitResult{Status: helmrtype.WaitTimeout}, nil
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// untilStopping is ctx, also ended when the server begins to stop.
func (s *Server) untilStopping(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-s.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// commandLogs returns a page of a Command's output after ?after=; with
// ?follow=true it streams records as SSE (event "output", id the
// sequence) until the Command is over (event "end" with the Command).
func (s *Server) commandLogs(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var after int64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "after must be a sequence number")
		}
		after = n
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			after = n
		}
	}
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if q.Get("follow") != "true" {
		page, err := s.eng.CommandLogs(r.Context(), id, after, limit)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, page)
		return nil
	}
	// Check the Command exists before the stream starts.
	if _, err := s.eng.CommandLogs(r.Context(), id, after, 1); err != nil {
		return err
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		return helmrtype.Errorf(helmrtype.CodeInternal, "streaming is not supported")
	}
	// A stream outlives the server's write timeout, as a Session's does:
	// its keep-alives hold it, and it ends with the Command.
	http.NewResponseController(w).SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	ctx, cancel := s.untilStopping(r.Context())
	defer cancel()
	for {
		ch, stop := s.eng.Watch("command:" + id)
		page, err := s.eng.CommandLogs(ctx, id, after, 1000)
		if err != nil {
			stop()
			return nil
		}
		for _, rec := range page.Records {
			b, _ := json.Marshal(rec)
			fmt.Fprintf(w, "id: %d\nevent: output\ndata: %s\n\n", rec.Sequence, b)
		}
		after = page.NextAfter
		if page.Done {
			stop()
			c, err := s.eng.GetCommand(ctx, id)
			if err == nil {
				b, _ := json.Marshal(c)
				fmt.Fprintf(w, "event: end\ndata: %s\n\n", b)
			}
			fl.Flush()
			return nil
		}
		fl.Flush()
		if len(page.Records) == 0 {
			select {
			case <-ch:
			case <-time.After(15 * time.Second):
				fmt.Fprint(w, ": keep-alive\n\n")
				fl.Flush()
			case <-ctx.Done():
				stop()
				return nil
			}
		}
		stop()
	}
}
