package manager_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// Stop waits for the manager's goroutine, may be called any number of
// times from any goroutine, and leaves every call with ErrStopped.
func TestStopIsIdempotentAndWaits(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	mock := clock.NewMock()
	m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger})
	b := register(t, m, "b", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	held, err := b.Acquire(context.Background())
	require.NoError(t, err)

	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); m.Stop() }()
	}
	m.Stop()
	select {
	case <-m.Done():
	default:
		t.Fatal("Done is not closed when Stop returns")
	}
	wg.Wait()
	m.Stop()
	goleak.VerifyNone(t, ignore)

	m.Sync() // returns at once after Stop
	checkStopped(t, m, b)
	held.Release(errBoom) // a permit from before Stop changes nothing
	assert.Equal(t, uint64(1), b.Stats().Stale)
	assert.Equal(t, breaker.Closed, b.State(), "the state before Stop is kept")
	_, ok := m.Breaker("b")
	assert.True(t, ok, "registrations stay readable")
}

// Stop with timers armed on the real clock leaves nothing behind.
func TestStopWithArmedTimers(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	m := manager.Start(manager.Options{Logger: quietLogger})
	for _, name := range []string{"a", "b", "c"} {
		b := register(t, m, name, manager.Config{
			Strategy: breaker.Consecutive{Failures: 1},
			Recover:  recover.BasicTimeout{Open: time.Hour},
		})
		fail(t, b, 1)
	}
	m.Sync()
	m.Stop()
	goleak.VerifyNone(t, ignore)
}

// Callers blocked on the manager return when it stops.
func TestStopReleasesWaitingCallers(t *testing.T) {
	m, _ := startMock(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m.Sync()
				_, err := m.Register("x", manager.Config{})
				if errors.Is(err, manager.ErrStopped) {
					return
				}
			}
		}()
	}
	m.Stop()
	wg.Wait()
}

// Breakers stopped in each state all answer ErrStopped.
func TestStopInEveryState(t *testing.T) {
	m, mock := startMock(t)
	cfg := manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second, ProbeTimeout: time.Minute},
	}
	closed := register(t, m, "closed", cfg)
	halfOpen := register(t, m, "half_open", cfg)
	probing := register(t, m, "probing", cfg)
	fail(t, halfOpen, 1)
	fail(t, probing, 1)
	advance(m, mock, time.Second)
	pr := probe(t, probing)
	open := register(t, m, "open", cfg)
	fail(t, open, 1)
	forced := register(t, m, "forced", cfg)
	require.NoError(t, forced.ForceOpen())
	m.Sync()

	m.Stop()
	pr.Release(nil)
	for _, b := range []*manager.Breaker{closed, open, halfOpen, probing, forced} {
		_, err := b.Acquire(context.Background())
		assert.ErrorIs(t, err, manager.ErrStopped, "Acquire on %s", b.Name())
		assert.ErrorIs(t, b.Do(context.Background(), func(context.Context) error { return nil }), manager.ErrStopped, "Do on %s", b.Name())
	}
}

// A real-clock manager runs its timers without Sync.
func TestRealClockTimer(t *testing.T) {
	m := manager.Start(manager.Options{Logger: quietLogger})
	defer m.Stop()
	b := register(t, m, "real", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: 20 * time.Millisecond},
	})
	fail(t, b, 1)
	eventually(t, "the breaker half-open after its open period", func() bool { return b.State() == breaker.HalfOpen })
	probe(t, b).Release(nil)
	requireState(t, b, breaker.Closed, "after the probe")
}
