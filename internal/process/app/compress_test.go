package app

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/mlrb/mlrb/config"
)

// encodings is a frontend's stats handler that records how each request
// it received was compressed ("": not at all).
type encodings struct {
	mu  sync.Mutex
	got []string
}

func (e *encodings) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (e *encodings) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (e *encodings) HandleConn(context.Context, stats.ConnStats)                       {}
func (e *encodings) HandleRPC(_ context.Context, s stats.RPCStats) {
	if h, ok := s.(*stats.InHeader); ok {
		e.mu.Lock()
		e.got = append(e.got, h.Compression)
		e.mu.Unlock()
	}
}

func (e *encodings) seen() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

// systemInfo answers the one call a dial makes.
type systemInfo struct {
	workflowservice.UnimplementedWorkflowServiceServer
}

func (systemInfo) GetSystemInfo(context.Context, *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	return &workflowservice.GetSystemInfoResponse{}, nil
}

// TestRequestsCompressedAsConfigured: a client dialed to a loopback
// frontend sends its requests uncompressed under temporal.compression
// auto (the SDK's default would gzip them), and gzipped when told gzip.
func TestRequestsCompressedAsConfigured(t *testing.T) {
	for _, c := range []struct {
		mode config.Compression
		want string
	}{
		{config.CompressionAuto, ""},
		{config.CompressionGzip, "gzip"},
	} {
		rec := &encodings{}
		srv := grpc.NewServer(grpc.StatsHandler(rec))
		workflowservice.RegisterWorkflowServiceServer(srv, systemInfo{})
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = srv.Serve(l) }()
		cl, err := Dial(context.Background(), &config.Config{Temporal: config.Temporal{Address: l.Addr().String(), Namespace: "default",
			ConnectTimeout: 10 * time.Second, Compression: c.mode}}, zap.NewNop())
		if err != nil {
			srv.Stop()
			t.Fatalf("%s: dial: %v", c.mode, err)
		}
		cl.Close()
		srv.Stop()
		got := rec.seen()
		if len(got) == 0 {
			t.Fatalf("%s: the frontend received no request", c.mode)
		}
		for _, enc := range got {
			if enc != c.want {
				t.Fatalf("%s to %s: requests compressed %q, want %q", c.mode, l.Addr(), got, c.want)
			}
		}
	}
}
