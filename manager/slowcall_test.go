package manager_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// timed makes one call through b that takes d on the mock clock and ends
// with release.
func timed(t *testing.T, b *manager.Breaker, mock *clock.Mock, d time.Duration, release func(manager.Permit)) {
	t.Helper()
	p, err := b.Acquire(context.Background())
	require.NoError(t, err, "Acquire on %q in %v", b.Name(), b.State())
	mock.Add(d)
	release(p)
}

func releaseNil(p manager.Permit) { p.Release(nil) }

func TestSlowCallIsExactAtTheEdge(t *testing.T) {
	cases := []struct {
		took time.Duration
		slow bool
	}{
		{0, false},
		{999 * time.Millisecond, false},
		{time.Second - time.Nanosecond, false},
		{time.Second, true},
		{time.Second + time.Nanosecond, true},
		{time.Hour, true},
	}
	for _, c := range cases {
		m, mock := startMock(t)
		b := register(t, m, "b", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, SlowCall: time.Second})
		timed(t, b, mock, c.took, releaseNil)
		m.Sync()
		st := b.Stats()
		if c.slow {
			assert.Equal(t, breaker.Open, st.State, "a call of %v trips", c.took)
			assert.EqualValues(t, 1, st.Failures, "a call of %v is a failure", c.took)
			assert.EqualValues(t, 1, st.SlowCalls, "a call of %v is slow", c.took)
		} else {
			assert.Equal(t, breaker.Closed, st.State, "a call of %v", c.took)
			assert.EqualValues(t, 1, st.Successes, "a call of %v is a success", c.took)
			assert.Zero(t, st.SlowCalls, "a call of %v is not slow", c.took)
		}
	}
}

// A slow call is a failure whatever it returned or was released with, and
// counts once in Failures.
func TestSlowCallIsAFailureWhateverItsOutcome(t *testing.T) {
	releases := map[string]func(manager.Permit){
		"Release(nil)":              releaseNil,
		"Release(errBoom)":          func(p manager.Permit) { p.Release(errBoom) },
		"Release(context.Canceled)": func(p manager.Permit) { p.Release(context.Canceled) },
		"ReleaseOutcome(Success)":   func(p manager.Permit) { p.ReleaseOutcome(classify.Success) },
		"ReleaseOutcome(Ignore)":    func(p manager.Permit) { p.ReleaseOutcome(classify.Ignore) },
		"ReleaseWith(Success)":      func(p manager.Permit) { p.ReleaseWith(classify.Success, nil) },
	}
	for name, release := range releases {
		m, mock := startMock(t)
		b := register(t, m, "b", manager.Config{Strategy: breaker.Consecutive{Failures: 2}, SlowCall: time.Second})
		timed(t, b, mock, time.Second, release)
		st := b.Stats()
		assert.EqualValues(t, 1, st.Failures, "%s of a slow call", name)
		assert.EqualValues(t, 1, st.SlowCalls, "%s of a slow call", name)
		assert.EqualValues(t, 1, st.Calls, "%s of a slow call", name)
		assert.Zero(t, st.Successes+st.Ignored, "%s of a slow call", name)
	}
}

func TestSlowProbeReopens(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "b", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second, ProbeTimeout: time.Minute},
		SlowCall: 2 * time.Second,
	})
	fail(t, b, 1)
	advance(m, mock, time.Second)
	p := probe(t, b)
	mock.Add(2 * time.Second)
	p.Release(nil)
	m.Sync()
	requireState(t, b, breaker.Open, "after a slow probe that succeeded")
	advance(m, mock, time.Second)
	p = probe(t, b)
	mock.Add(time.Second)
	p.Release(nil)
	m.Sync()
	requireState(t, b, breaker.Closed, "after a probe within SlowCall")
	assert.EqualValues(t, 1, b.Stats().SlowCalls)
}

func TestSlowCallZeroNeverTimes(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "b", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	timed(t, b, mock, 24*time.Hour, releaseNil)
	st := b.Stats()
	assert.Equal(t, breaker.Closed, st.State)
	assert.EqualValues(t, 1, st.Successes)
	assert.Zero(t, st.SlowCalls)
}

func TestSlowCallMustNotBeNegative(t *testing.T) {
	m, _ := startMock(t)
	_, err := m.Register("payments", manager.Config{SlowCall: -time.Second})
	assert.EqualError(t, err, `fusebox: register breaker "payments": Config.SlowCall: must not be negative, got -1s`)
}

// countingClock is a mock clock that counts how often it is read.
type countingClock struct {
	*clock.Mock
	reads atomic.Int64
}

func (c *countingClock) Now() time.Time                  { c.reads.Add(1); return c.Mock.Now() }
func (c *countingClock) Since(t time.Time) time.Duration { c.reads.Add(1); return c.Mock.Since(t) }

// The clock is read for a call only when SlowCall is set (with a count-based
// strategy, which reads no clock of its own).
func TestSlowCallReadsTheClockOnlyWhenSet(t *testing.T) {
	for _, slow := range []time.Duration{0, time.Second} {
		clk := &countingClock{Mock: clock.NewMock()}
		m := manager.Start(manager.Options{Clock: clk, Logger: quietLogger})
		b := register(t, m, "b", manager.Config{SlowCall: slow})
		m.Sync()
		// The manager's goroutine is idle now: every read below is the
		// calls'.
		before := clk.reads.Load()
		for range 10 {
			p, err := b.Acquire(context.Background())
			require.NoError(t, err)
			p.Release(nil)
		}
		reads := clk.reads.Load() - before
		m.Stop()
		if slow == 0 {
			assert.Zero(t, reads, "clock reads for 10 calls with SlowCall zero")
		} else {
			assert.EqualValues(t, 20, reads, "clock reads for 10 calls with SlowCall %v: one at Acquire, one at release", slow)
		}
	}
}

// A service that hangs for three seconds before it answers, called by a
// client whose own timeout is ten: without SlowCall every call succeeds,
// late, and the callers' waits add up; with SlowCall the third slow call
// trips the breaker and the calls after it are declined at once.
func TestHangingServiceTripsBeforeTimeoutsStackUp(t *testing.T) {
	const calls = 10
	hang := 3 * time.Second
	run := func(slow time.Duration) (waited time.Duration, declined int, st manager.Stats) {
		m, mock := startMock(t)
		b := register(t, m, "replica", manager.Config{
			Strategy: breaker.Consecutive{Failures: 3},
			Recover:  recover.BasicTimeout{Open: time.Minute},
			SlowCall: slow,
		})
		start := mock.Now()
		for range calls {
			err := b.Do(context.Background(), func(ctx context.Context) error {
				mock.Add(hang) // the service answers after 3s, within the caller's 10s
				return nil
			})
			if err != nil {
				require.ErrorIs(t, err, breaker.ErrOpen)
				declined++
			}
		}
		m.Sync()
		return mock.Since(start), declined, b.Stats()
	}

	waited, declined, st := run(0)
	assert.Equal(t, calls*hang, waited, "without SlowCall, every call waits for the hanging service")
	assert.Zero(t, declined)
	assert.Equal(t, breaker.Closed, st.State)

	waited, declined, st = run(time.Second)
	assert.Equal(t, 3*hang, waited, "with SlowCall, only the three calls that trip the breaker wait")
	assert.Equal(t, calls-3, declined)
	assert.Equal(t, breaker.Open, st.State)
	assert.EqualValues(t, 3, st.SlowCalls)
}

// Register's errors say "fusebox:" once, and still match their sentinel.
func TestRegisterErrorsDoNotStutter(t *testing.T) {
	m, _ := startMock(t)
	register(t, m, "payments", manager.Config{})
	_, err := m.Register("payments", manager.Config{})
	assert.ErrorIs(t, err, manager.ErrDuplicate)
	assert.EqualError(t, err, `fusebox: register breaker "payments": a breaker with this name is already registered`)
	m.Stop()
	_, err = m.Register("orders", manager.Config{})
	assert.ErrorIs(t, err, manager.ErrStopped)
	assert.EqualError(t, err, `fusebox: register breaker "orders": manager stopped`)
}
