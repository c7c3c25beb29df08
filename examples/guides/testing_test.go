package guides_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// The tests of docs/testing.md, as shown there.

func TestOpenPeriodEnds(t *testing.T) {
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()
	b, err := m.Register("payments", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second},
	})
	require.NoError(t, err)

	p, err := b.Acquire(context.Background())
	require.NoError(t, err)
	p.Release(errors.New("boom"))
	require.Equal(t, breaker.Open, b.State(), "a trip shows at once")

	mock.Add(999 * time.Millisecond)
	m.Sync()
	assert.Equal(t, breaker.Open, b.State(), "1ms before the open period ends")

	mock.Add(time.Millisecond)
	m.Sync()
	assert.Equal(t, breaker.HalfOpen, b.State(), "when the open period ends")
}

// openBreaker returns a manager on a mock clock and its breaker, tripped at
// the mock's start: open for 1s, after which a probe may run 2s.
func openBreaker(t *testing.T) (*clock.Mock, *manager.Manager, *manager.Breaker) {
	t.Helper()
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	t.Cleanup(m.Stop)
	b, err := m.Register("payments", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second, ProbeTimeout: 2 * time.Second},
	})
	require.NoError(t, err)
	p, err := b.Acquire(context.Background())
	require.NoError(t, err)
	p.Release(errors.New("boom"))
	m.Sync() // the manager has handled the trip
	require.Equal(t, breaker.Open, b.State())
	return mock, m, b
}

func TestProbe(t *testing.T) {
	mock, m, b := openBreaker(t)
	mock.Add(time.Second)
	m.Sync()
	require.Equal(t, breaker.HalfOpen, b.State())

	probe, err := b.Acquire(context.Background())
	require.NoError(t, err)
	assert.True(t, probe.Probe(), "the first caller in half_open is the probe")

	_, err = b.Acquire(context.Background())
	var open *breaker.OpenError
	require.ErrorAs(t, err, &open, "every other caller is declined while the probe runs")
	assert.Equal(t, breaker.Probing, open.State)

	probe.Release(nil)
	assert.Equal(t, breaker.Closed, b.State(), "a successful probe closes the breaker")
}

func TestProbeRunsOutOfTime(t *testing.T) {
	mock, m, b := openBreaker(t)
	mock.Add(time.Second)
	m.Sync()
	probe, err := b.Acquire(context.Background())
	require.NoError(t, err)
	require.True(t, probe.Probe())

	mock.Add(2 * time.Second) // the probe's time
	m.Sync()
	require.Equal(t, breaker.HalfOpen, b.State(), "another caller may probe")

	probe.Release(errors.New("too late")) // stale: changes nothing
	assert.Equal(t, breaker.HalfOpen, b.State())
	assert.Equal(t, uint64(1), b.Stats().Stale)
}

func TestTransitions(t *testing.T) {
	mock, m, b := openBreaker(t)
	events, unsubscribe := m.Subscribe(16)
	defer unsubscribe()

	mock.Add(time.Second)
	m.Sync()
	probe, err := b.Acquire(context.Background())
	require.NoError(t, err)
	probe.Release(errors.New("still down"))
	m.Sync()

	assert.Equal(t, []breaker.Transition{
		{From: breaker.Open, To: breaker.HalfOpen},
		{From: breaker.HalfOpen, To: breaker.Probing},
		{From: breaker.Probing, To: breaker.Open},
	}, transitions(events))
}

// transitions returns the events delivered so far, without waiting for
// more. After Sync, that is every transition the manager has handled.
func transitions(events <-chan manager.Event) []breaker.Transition {
	var got []breaker.Transition
	for {
		select {
		case ev := <-events:
			got = append(got, ev.Transition)
		default:
			return got
		}
	}
}

func TestHangingCall(t *testing.T) {
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock})
	defer m.Stop()
	b, err := m.Register("payments", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	require.NoError(t, err)

	ctx, cancel := mock.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error)
	go func() {
		done <- b.Do(ctx, func(ctx context.Context) error {
			<-ctx.Done() // the service hangs
			return ctx.Err()
		})
	}()

	mock.Add(300 * time.Millisecond)
	assert.ErrorIs(t, <-done, context.DeadlineExceeded)
	assert.Equal(t, breaker.Open, b.State(), "a call that timed out is a failure")
}

func TestStopsItsManager(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := manager.Start(manager.Options{})
	defer m.Stop() // deferred calls run last first: Stop, then VerifyNone

	_, err := m.Register("payments", manager.Config{})
	require.NoError(t, err)
}
