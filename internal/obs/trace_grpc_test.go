package obs

import (
	"context"
	"net"
	"os"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
)

// grpcReceiver is an OTLP/gRPC trace collector that keeps span names.
type grpcReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (r *grpcReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.names = append(r.names, s.Name)
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// TestTracerExportsOverGRPC exports a span with
// OTEL_EXPORTER_OTLP_PROTOCOL=grpc to a real gRPC receiver.
func TestTracerExportsOverGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	rcv := &grpcReceiver{}
	coltracepb.RegisterTraceServiceServer(srv, rcv)
	go srv.Serve(ln)
	defer srv.Stop()
	// The exporter reads the process's environment itself.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	tr, err := NewTracer(context.Background(), os.Getenv, "test")
	if err != nil || !tr.Enabled() {
		t.Fatalf("NewTracer: %v", err)
	}
	_, sp := tr.StartAdmit(context.Background())
	EndSpan(sp, "s", "t", nil)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { t.Logf("otel: %v", err) }))
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.names) != 1 || rcv.names[0] != SpanAdmit {
		t.Fatalf("the gRPC receiver got %v", rcv.names)
	}
}
