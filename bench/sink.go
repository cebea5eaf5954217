package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// sink is an OTLP/HTTP trace receiver that counts what it gets, for -trace.
type sink struct {
	url                    string
	requests, spans, bytes atomic.Int64
}

func startSink() (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &sink{url: "http://" + ln.Addr().String()}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ex coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &ex); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		n := 0
		for _, rs := range ex.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				n += len(ss.Spans)
			}
		}
		s.requests.Add(1)
		s.spans.Add(int64(n))
		s.bytes.Add(int64(len(body)))
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	return s, nil
}

// report prints what the sink received (after the server stopped and
// exported the rest).
func (s *sink) report() {
	fmt.Printf("tracing: the sink got %d spans in %d exports (%d bytes)\n", s.spans.Load(), s.requests.Load(), s.bytes.Load())
}
