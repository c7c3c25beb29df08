package grpcbreaker_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/grpcbreaker"
	"github.com/fusebox-go/fusebox/manager"
)

// watch opens a Watch stream through c.
func watch(t *testing.T, ctx context.Context, c healthpb.HealthClient) healthpb.Health_WatchClient {
	t.Helper()
	s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	return s
}

// drain reads s until it ends and returns how many messages came and the
// error it ended with (nil for io.EOF).
func drain(s healthpb.Health_WatchClient) (int, error) {
	for n := 0; ; n++ {
		if _, err := s.Recv(); err != nil {
			if err == io.EOF {
				return n, nil
			}
			return n, err
		}
	}
}

// counts returns the breaker's released calls by outcome.
func counts(b *manager.Breaker) [3]uint64 {
	st := b.Stats()
	return [3]uint64{st.Successes, st.Failures, st.Ignored}
}

func TestStreamCountsOnceWhenItEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cases := []struct {
		name  string
		watch func(ctx context.Context, send func() error) error
		want  [3]uint64 // successes, failures, ignored
	}{
		{"three messages, then OK", func(_ context.Context, send func() error) error {
			for n := 0; n < 3; n++ {
				if err := send(); err != nil {
					return err
				}
			}
			return nil
		}, [3]uint64{1, 0, 0}},
		{"two messages, then Unavailable", func(_ context.Context, send func() error) error {
			send()
			send()
			return status.Error(codes.Unavailable, "lost the backend")
		}, [3]uint64{0, 1, 0}},
		{"NotFound at once", func(context.Context, func() error) error {
			return status.Error(codes.NotFound, "no such service")
		}, [3]uint64{1, 0, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, _ := newManager(t)
			addr := serve(t, &health{watch: c.watch})
			cl := dial(t, addr, newInterceptor(t, m, grpcbreaker.Options{}))
			s := watch(t, ctx, cl)
			b, _ := m.Breaker(addr)
			assert.Equal(t, [3]uint64{}, counts(b), "nothing counted while the stream runs")
			drain(s)
			assert.Equal(t, c.want, counts(b), "counted once, at the end")
			// Reading past the end counts nothing more.
			_, err := s.Recv()
			assert.Error(t, err)
			assert.Equal(t, c.want, counts(b))
		})
	}
}

func TestStreamEndedByItsContext(t *testing.T) {
	cases := []struct {
		name   string
		end    func() (context.Context, context.CancelFunc)
		cancel bool // the caller cancels; otherwise the deadline passes
		want   [3]uint64
	}{
		{"cancelled by the caller", func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}, true, [3]uint64{0, 0, 1}},
		{"deadline on a hanging server", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 20*time.Millisecond)
		}, false, [3]uint64{0, 1, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, _ := newManager(t)
			addr := serve(t, &health{watch: func(ctx context.Context, send func() error) error {
				send()
				<-ctx.Done()
				return ctx.Err()
			}})
			cl := dial(t, addr, newInterceptor(t, m, grpcbreaker.Options{}))
			ctx, cancel := c.end()
			defer cancel()
			s := watch(t, ctx, cl)
			_, err := s.Recv()
			require.NoError(t, err)
			b, _ := m.Breaker(addr)
			// The caller does not read on: the stream ends with its context.
			if c.cancel {
				cancel()
			}
			eventually(t, "the stream is released", func() bool { return counts(b) != [3]uint64{} })
			assert.Equal(t, c.want, counts(b))
		})
	}
}

func TestStreamsTripAndAreDeclined(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, _ := newManager(t)
	h := &health{watch: func(context.Context, func() error) error { return status.Error(codes.Internal, "broken") }}
	addr := serve(t, h)
	cl := dial(t, addr, newInterceptor(t, m, grpcbreaker.Options{Config: consecutive(2, time.Minute)}))
	for n := 0; n < 2; n++ {
		_, err := drain(watch(t, ctx, cl))
		assert.Equal(t, codes.Internal, status.Code(err))
	}
	m.Sync()
	_, err := cl.Watch(ctx, &healthpb.HealthCheckRequest{})
	assert.ErrorIs(t, err, breaker.ErrOpen)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.EqualValues(t, 2, h.calls.Load())
}
