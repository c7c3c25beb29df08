package grpcbreaker_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/grpcbreaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newManager starts a manager on a mock clock set to t0.
func newManager(t *testing.T) (*manager.Manager, *clock.Mock) {
	t.Helper()
	mock := clock.NewMock()
	mock.Set(t0)
	m := manager.Start(manager.Options{Clock: mock})
	t.Cleanup(m.Stop)
	return m, mock
}

// health is the test service: grpc's own health service, whose Check and
// Watch do what the test says.
type health struct {
	healthpb.UnimplementedHealthServer
	calls atomic.Int64
	check func(ctx context.Context) error
	watch func(ctx context.Context, send func() error) error
}

func (h *health) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.calls.Add(1)
	if h.check != nil {
		if err := h.check(ctx); err != nil {
			return nil, err
		}
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (h *health) Watch(_ *healthpb.HealthCheckRequest, ss healthpb.Health_WatchServer) error {
	h.calls.Add(1)
	send := func() error {
		return ss.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
	}
	if h.watch == nil {
		return send()
	}
	return h.watch(ss.Context(), send)
}

// serve runs h on a real gRPC server on a loopback TCP port and returns
// its address; the server stops when the test ends.
func serve(t *testing.T, h *health) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, h)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(lis)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-done
	})
	return lis.Addr().String()
}

// dial returns a health client of addr through the interceptor i.
func dial(t *testing.T, addr string, i *grpcbreaker.Interceptor) healthpb.HealthClient {
	t.Helper()
	opts := append(i.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	conn, err := grpc.NewClient(addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// consecutive is Options.Config for breakers that trip on the failures-th
// failure in a row and stay open for open.
func consecutive(failures int, open time.Duration) func(string) manager.Config {
	return func(string) manager.Config {
		return manager.Config{
			Strategy: breaker.Consecutive{Failures: failures},
			Recover:  recover.BasicTimeout{Open: open},
		}
	}
}

// newInterceptor returns an Interceptor with opts, failing the test on an
// error.
func newInterceptor(t *testing.T, m *manager.Manager, opts grpcbreaker.Options) *grpcbreaker.Interceptor {
	t.Helper()
	i, err := grpcbreaker.New(m, opts)
	require.NoError(t, err)
	return i
}

// check makes one Check call with a timeout far longer than any test takes.
func check(c healthpb.HealthClient) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// eventually waits, for a bounded time, until cond holds: for what happens
// on goroutines outside the manager (a stream's context ending).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// retryAfter is a RetryInfo detail asking for a wait of d.
func retryAfter(d time.Duration) *errdetails.RetryInfo {
	return &errdetails.RetryInfo{RetryDelay: durationpb.New(d)}
}
