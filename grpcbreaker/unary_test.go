package grpcbreaker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/grpcbreaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

func unavailable(context.Context) error { return status.Error(codes.Unavailable, "down") }

func TestUnaryTripsThenDeclinesWithUnavailable(t *testing.T) {
	m, _ := newManager(t)
	h := &health{check: unavailable}
	addr := serve(t, h)
	i := newInterceptor(t, m, grpcbreaker.Options{Config: consecutive(3, time.Minute)})
	c := dial(t, addr, i)

	for n := 1; n <= 3; n++ {
		err := check(c)
		assert.Equal(t, codes.Unavailable, status.Code(err), "call %d", n)
		assert.NotErrorIs(t, err, breaker.ErrOpen, "call %d reached the server", n)
	}
	m.Sync()
	b, ok := m.Breaker(addr)
	require.True(t, ok, "the breaker is named after the target")
	require.Equal(t, breaker.Open, b.State())

	err := check(c)
	assert.Equal(t, codes.Unavailable, status.Code(err), "a declined call's status")
	assert.ErrorIs(t, err, breaker.ErrOpen)
	var oe *breaker.OpenError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, addr, oe.Name)
	assert.Contains(t, status.Convert(err).Message(), `breaker "`+addr+`" is open`)
	assert.EqualValues(t, 3, h.calls.Load(), "the declined call did not reach the server")
	st := b.Stats()
	assert.EqualValues(t, 3, st.Failures)
	assert.EqualValues(t, 1, st.Declined)
}

func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want classify.Outcome
	}{
		{nil, classify.Success},
		{status.Error(codes.OK, ""), classify.Success},
		{status.Error(codes.Canceled, ""), classify.Ignore},
		{status.Error(codes.Unavailable, ""), classify.Failure},
		{status.Error(codes.DeadlineExceeded, ""), classify.Failure},
		{status.Error(codes.ResourceExhausted, ""), classify.Failure},
		{status.Error(codes.Internal, ""), classify.Failure},
		{status.Error(codes.Unknown, ""), classify.Failure},
		{status.Error(codes.DataLoss, ""), classify.Failure},
		{errors.New("not a status: a transport or codec error"), classify.Failure},
		{status.Error(codes.Code(99), ""), classify.Failure},
		{status.Error(codes.InvalidArgument, ""), classify.Success},
		{status.Error(codes.NotFound, ""), classify.Success},
		{status.Error(codes.AlreadyExists, ""), classify.Success},
		{status.Error(codes.PermissionDenied, ""), classify.Success},
		{status.Error(codes.Unauthenticated, ""), classify.Success},
		{status.Error(codes.FailedPrecondition, ""), classify.Success},
		{status.Error(codes.OutOfRange, ""), classify.Success},
		{status.Error(codes.Aborted, ""), classify.Success},
		{status.Error(codes.Unimplemented, ""), classify.Success},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, grpcbreaker.Classify(c.err), "Classify(%v)", c.err)
	}
}

func TestCallerMistakesDoNotTrip(t *testing.T) {
	m, _ := newManager(t)
	addr := serve(t, &health{check: func(context.Context) error { return status.Error(codes.NotFound, "no such service") }})
	c := dial(t, addr, newInterceptor(t, m, grpcbreaker.Options{Config: consecutive(1, time.Minute)}))
	for n := 0; n < 5; n++ {
		assert.Equal(t, codes.NotFound, status.Code(check(c)))
	}
	m.Sync()
	b, _ := m.Breaker(addr)
	assert.Equal(t, breaker.Closed, b.State())
	assert.EqualValues(t, 5, b.Stats().Successes)
}

func TestClassifyOverride(t *testing.T) {
	m, _ := newManager(t)
	addr := serve(t, &health{check: func(context.Context) error { return status.Error(codes.NotFound, "gone") }})
	notFoundFails := func(err error) classify.Outcome {
		if status.Code(err) == codes.NotFound {
			return classify.Failure
		}
		return grpcbreaker.Classify(err)
	}
	t.Run("Options.Classify", func(t *testing.T) {
		c := dial(t, addr, newInterceptor(t, m, grpcbreaker.Options{
			Key:      func(string, string) string { return "options" },
			Config:   consecutive(2, time.Minute),
			Classify: notFoundFails,
		}))
		check(c)
		check(c)
		m.Sync()
		b, _ := m.Breaker("options")
		assert.Equal(t, breaker.Open, b.State())
	})
	t.Run("Config.Classify", func(t *testing.T) {
		c := dial(t, addr, newInterceptor(t, m, grpcbreaker.Options{
			Key: func(string, string) string { return "config" },
			Config: func(string) manager.Config {
				return manager.Config{Strategy: breaker.Consecutive{Failures: 2}, Classify: notFoundFails}
			},
		}))
		check(c)
		check(c)
		m.Sync()
		b, _ := m.Breaker("config")
		assert.Equal(t, breaker.Open, b.State(), "the breaker's own Classify is honoured")
	})
}

func TestCancelledCallsAreIgnored(t *testing.T) {
	m, _ := newManager(t)
	entered := make(chan struct{}, 1)
	addr := serve(t, &health{check: func(ctx context.Context) error {
		entered <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}})
	c := dial(t, addr, newInterceptor(t, m, grpcbreaker.Options{Config: consecutive(1, time.Minute)}))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-entered
		cancel()
	}()
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	assert.Equal(t, codes.Canceled, status.Code(err))
	m.Sync()
	b, _ := m.Breaker(addr)
	assert.Equal(t, breaker.Closed, b.State())
	assert.EqualValues(t, 1, b.Stats().Ignored)
}

// A server that hangs trips its breaker with the callers' deadlines; the
// calls after that are declined at once instead of each waiting out its
// deadline.
func TestHangingServerTripsTheBreaker(t *testing.T) {
	m, _ := newManager(t)
	release := make(chan struct{})
	defer close(release)
	h := &health{check: func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-release:
			return nil
		}
	}}
	addr := serve(t, h)
	c := dial(t, addr, newInterceptor(t, m, grpcbreaker.Options{Config: consecutive(3, time.Minute)}))
	call := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	for n := 1; n <= 3; n++ {
		assert.Equal(t, codes.DeadlineExceeded, status.Code(call()), "call %d", n)
	}
	m.Sync()
	b, _ := m.Breaker(addr)
	require.Equal(t, breaker.Open, b.State())
	// (A call whose 20ms ran out before it reached the server, on a busy
	// machine, tripped the breaker all the same: count from here.)
	reached := h.calls.Load()
	assert.LessOrEqual(t, reached, int64(3))
	for n := 0; n < 10; n++ {
		err := call()
		assert.ErrorIs(t, err, breaker.ErrOpen)
		assert.Equal(t, codes.Unavailable, status.Code(err))
	}
	assert.Equal(t, reached, h.calls.Load(), "declined calls never reached the hanging server")
}

// retryInfo returns an Unavailable status whose RetryInfo detail asks the
// client to wait d.
func retryInfo(t *testing.T, d time.Duration) error {
	st, err := status.New(codes.Unavailable, "overloaded").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
	require.NoError(t, err)
	return st.Err()
}

func TestRetryHintsLengthenTheOpenPeriod(t *testing.T) {
	cases := []struct {
		name   string
		check  func(t *testing.T) func(context.Context) error
		opts   grpcbreaker.Options
		period time.Duration
	}{
		{"RetryInfo longer than the open period", func(t *testing.T) func(context.Context) error {
			return func(context.Context) error { return retryInfo(t, 90*time.Second) }
		}, grpcbreaker.Options{}, 90 * time.Second},
		{"RetryInfo shorter than the open period", func(t *testing.T) func(context.Context) error {
			return func(context.Context) error { return retryInfo(t, time.Second) }
		}, grpcbreaker.Options{}, 5 * time.Second},
		{"RetryInfo capped by MaxRetryDelay", func(t *testing.T) func(context.Context) error {
			return func(context.Context) error { return retryInfo(t, time.Hour) }
		}, grpcbreaker.Options{MaxRetryDelay: 2 * time.Minute}, 2 * time.Minute},
		{"RetryInfo ignored", func(t *testing.T) func(context.Context) error {
			return func(context.Context) error { return retryInfo(t, 90*time.Second) }
		}, grpcbreaker.Options{IgnoreRetryInfo: true}, 5 * time.Second},
		{"grpc-retry-pushback-ms", func(t *testing.T) func(context.Context) error {
			return func(ctx context.Context) error {
				require.NoError(t, grpc.SetTrailer(ctx, metadata.Pairs(grpcbreaker.PushbackKey, "30000")))
				return status.Error(codes.ResourceExhausted, "slow down")
			}
		}, grpcbreaker.Options{}, 30 * time.Second},
		{"grpc-retry-pushback-ms saying never", func(t *testing.T) func(context.Context) error {
			return func(ctx context.Context) error {
				require.NoError(t, grpc.SetTrailer(ctx, metadata.Pairs(grpcbreaker.PushbackKey, "-1")))
				return status.Error(codes.Unavailable, "go away")
			}
		}, grpcbreaker.Options{MaxRetryDelay: 7 * time.Minute}, 7 * time.Minute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, mock := newManager(t)
			addr := serve(t, &health{check: c.check(t)})
			opts := c.opts
			opts.Config = consecutive(1, 5*time.Second)
			cl := dial(t, addr, newInterceptor(t, m, opts))
			require.Equal(t, codes.Code(0), status.Code(nil))
			require.NotNil(t, check(cl))
			m.Sync()
			b, _ := m.Breaker(addr)
			st := b.Stats()
			require.Equal(t, breaker.Open, st.State)
			assert.Equal(t, c.period, st.Until.Sub(st.Since), "open period")

			mock.Add(c.period - time.Millisecond)
			m.Sync()
			assert.Equal(t, breaker.Open, b.State(), "1ms before the period ends")
			mock.Add(time.Millisecond)
			m.Sync()
			assert.Equal(t, breaker.HalfOpen, b.State(), "when the period ends")
		})
	}
}

// The hint reaches the recovery policy of a breaker registered by hand,
// in recover.Context.Err, which any policy can read.
func TestRetryHintReachesAPolicyInContextErr(t *testing.T) {
	m, _ := newManager(t)
	addr := serve(t, &health{check: func(context.Context) error { return retryInfo(t, 42*time.Second) }})
	var seen time.Duration
	var code codes.Code
	_, err := m.Register("by-hand", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover: recover.Func(nil, func(c recover.Context, _ struct{}) (time.Duration, struct{}) {
			if c.Transition.To == breaker.Open {
				var h recover.Hint
				if errors.As(c.Err, &h) {
					seen = h.RetryAfter()
				}
				code = status.Code(c.Err)
			}
			return time.Minute, struct{}{}
		}),
	})
	require.NoError(t, err)
	c := dial(t, addr, newInterceptor(t, m, grpcbreaker.Options{Key: func(string, string) string { return "by-hand" }}))
	check(c)
	m.Sync()
	assert.Equal(t, 42*time.Second, seen)
	assert.Equal(t, codes.Unavailable, code)
}

func TestMethodKeyGivesABreakerPerMethod(t *testing.T) {
	m, _ := newManager(t)
	addr := serve(t, &health{check: unavailable})
	i := newInterceptor(t, m, grpcbreaker.Options{Key: grpcbreaker.MethodKey, Config: consecutive(1, time.Minute)})
	c := dial(t, addr, i)
	check(c)
	m.Sync()
	b, ok := m.Breaker(addr + "/grpc.health.v1.Health/Check")
	require.True(t, ok)
	assert.Equal(t, breaker.Open, b.State())

	// Watch has a breaker of its own, still closed.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = s.Recv()
	require.NoError(t, err)
}

// A classifier that panics releases the call as a failure: a probe does not
// hold its slot until the probe timeout.
func TestPanickingClassifierReleasesTheProbe(t *testing.T) {
	m, mock := newManager(t)
	addr := serve(t, &health{})
	var panics bool
	i := newInterceptor(t, m, grpcbreaker.Options{
		Config: func(string) manager.Config {
			return manager.Config{
				Strategy: breaker.Consecutive{Failures: 1},
				Recover:  recover.BasicTimeout{Open: time.Second, ProbeTimeout: time.Hour},
			}
		},
		Classify: func(err error) classify.Outcome {
			if panics {
				panic("classifier")
			}
			return classify.Failure
		},
	})
	c := dial(t, addr, i)
	check(c)
	m.Sync()
	b, _ := m.Breaker(addr)
	require.Equal(t, breaker.Open, b.State())
	mock.Add(time.Second)
	m.Sync()
	require.Equal(t, breaker.HalfOpen, b.State())

	panics = true
	assert.PanicsWithValue(t, "classifier", func() { check(c) })
	m.Sync()
	assert.Equal(t, breaker.Open, b.State(), "the probe was released as a failure")
}

func TestDeclineAllocatesNothing(t *testing.T) {
	m, _ := newManager(t)
	i := newInterceptor(t, m, grpcbreaker.Options{Key: func(string, string) string { return "k" }})
	b, err := m.Register("k", manager.Config{})
	require.NoError(t, err)
	require.NoError(t, b.ForceOpen())
	m.Sync()
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		t.Fatal("a declined call was sent")
		return nil
	}
	ctx := context.Background()
	require.ErrorIs(t, i.Unary(ctx, "/s/M", nil, nil, nil, invoker), breaker.ErrOpen)
	allocs := testing.AllocsPerRun(100, func() { _ = i.Unary(ctx, "/s/M", nil, nil, nil, invoker) })
	assert.Zero(t, allocs)
}

func TestStoppedManager(t *testing.T) {
	m, _ := newManager(t)
	addr := serve(t, &health{})
	c := dial(t, addr, newInterceptor(t, m, grpcbreaker.Options{}))
	require.NoError(t, check(c))
	m.Stop()
	err := check(c)
	assert.ErrorIs(t, err, manager.ErrStopped)
	assert.Equal(t, codes.Unavailable, status.Code(err))
}

func TestNewRejectsBadOptions(t *testing.T) {
	_, err := grpcbreaker.New(nil, grpcbreaker.Options{})
	assert.ErrorContains(t, err, "manager is nil")
	m, _ := newManager(t)
	_, err = grpcbreaker.New(m, grpcbreaker.Options{MaxRetryDelay: -time.Second})
	assert.ErrorContains(t, err, "Options.MaxRetryDelay must not be negative")
	i := newInterceptor(t, m, grpcbreaker.Options{Key: func(string, string) string { return "" }})
	err = i.Unary(context.Background(), "/s/M", nil, nil, nil, nil)
	assert.ErrorContains(t, err, "empty key for /s/M")
}

// A server that answers, but slowly, within its callers' generous
// deadlines: without SlowCall every call succeeds and waits; with it, the
// slow calls trip the breaker and the calls after them are declined at
// once. The manager runs on the real clock here, since the server's delay
// is real.
func TestSlowServerTripsWithSlowCall(t *testing.T) {
	m := manager.Start(manager.Options{})
	t.Cleanup(m.Stop)
	h := &health{check: func(ctx context.Context) error {
		select {
		case <-time.After(100 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	addr := serve(t, h)
	c := dial(t, addr, newInterceptor(t, m, grpcbreaker.Options{
		Config: func(string) manager.Config {
			return manager.Config{
				Strategy: breaker.Consecutive{Failures: 3},
				Recover:  recover.BasicTimeout{Open: time.Minute},
				SlowCall: 50 * time.Millisecond,
			}
		},
	}))
	for n := 1; n <= 3; n++ {
		require.NoError(t, check(c), "call %d succeeds, slowly", n)
	}
	m.Sync()
	b, _ := m.Breaker(addr)
	require.Equal(t, breaker.Open, b.State())
	assert.EqualValues(t, 3, b.Stats().SlowCalls)
	for n := 0; n < 5; n++ {
		assert.ErrorIs(t, check(c), breaker.ErrOpen)
	}
	assert.EqualValues(t, 3, h.calls.Load(), "declined calls did not wait for the slow server")
}
