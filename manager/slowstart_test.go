package manager_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// slowStartConfig trips on 5 failures in a row, stays open 1s, and ramps
// up over slow after a recovery.
func slowStartConfig(slow time.Duration) manager.Config {
	return manager.Config{
		Strategy:  breaker.Consecutive{Failures: 5},
		Recover:   recover.BasicTimeout{Open: time.Second},
		SlowStart: slow,
	}
}

// recover trips b, waits for its open period to end and makes a
// successful probe: b has just recovered, at mock.Now().
func recoverBreaker(t *testing.T, m *manager.Manager, mock *clock.Mock, b *manager.Breaker) {
	t.Helper()
	fail(t, b, 5)
	requireState(t, b, breaker.Open, "after 5 failures")
	advance(m, mock, time.Second)
	probe(t, b).Release(nil)
	m.Sync()
	requireState(t, b, breaker.Closed, "after the probe succeeded")
}

// admitted makes n calls through b at the mock's instant, releases the
// admitted ones with err, and returns how many went through. Every declined
// call must get a slow start's *breaker.OpenError ending at until.
func admitted(t *testing.T, b *manager.Breaker, n int, err error, until time.Time) int {
	t.Helper()
	in := 0
	for range n {
		p, aerr := b.Acquire(context.Background())
		if aerr == nil {
			in++
			p.Release(err)
			continue
		}
		var oe *breaker.OpenError
		require.ErrorAs(t, aerr, &oe)
		require.ErrorIs(t, aerr, breaker.ErrOpen)
		require.Equal(t, breaker.Closed, oe.State, "a slow start declines in the closed state")
		require.Equal(t, until, oe.Until, "a declined call is told when the slow start ends")
	}
	return in
}

// TestSlowStartLocal is the acceptance for a local breaker: with
// SlowStart 10s it admits 10 % ± 7 % of 4,000 calls 1s after its recovery,
// 50 % ± 7 % at 5s, and all of them after 10s.
func TestSlowStartLocal(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "db", slowStartConfig(10*time.Second))
	recoverBreaker(t, m, mock, b)
	closedAt := mock.Now()
	until := closedAt.Add(10 * time.Second)

	st := b.Stats()
	assert.Equal(t, 0.0, st.Admitted, "nothing is admitted at the closing")
	assert.Equal(t, until, st.SlowStartUntil)
	assert.Equal(t, until, b.Snapshot().SlowStart.Until)
	assert.Equal(t, 0, admitted(t, b, 100, nil, until), "at the closing")

	declinedBefore := b.Stats().Declined
	for _, c := range []struct {
		at   time.Duration
		want float64
	}{{time.Second, 0.10}, {5 * time.Second, 0.50}, {10 * time.Second, 1}, {11 * time.Second, 1}} {
		mock.Set(closedAt.Add(c.at))
		m.Sync()
		st := b.Stats()
		assert.InDelta(t, c.want, st.Admitted, 1e-9, "Stats.Admitted %v after the recovery", c.at)
		in := admitted(t, b, 4000, nil, until)
		assert.InDelta(t, c.want, float64(in)/4000, 0.07, "%v after the recovery: %d of 4,000 calls admitted", c.at, in)
		if c.at < 10*time.Second {
			assert.Equal(t, until, st.SlowStartUntil)
		} else {
			assert.Equal(t, 4000, in, "every call %v after the recovery", c.at)
			assert.True(t, b.Stats().SlowStartUntil.IsZero())
			assert.Nil(t, b.Snapshot().SlowStart, "the manager ended it")
		}
		declinedBefore += uint64(4000 - in)
		assert.Equal(t, declinedBefore, b.Stats().Declined, "declined calls are counted")
	}
	requireState(t, b, breaker.Closed, "all along")
}

// TestSlowStartZero: without a SlowStart, a recovered breaker admits every
// call at once.
func TestSlowStartZero(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "db", slowStartConfig(0))
	recoverBreaker(t, m, mock, b)
	assert.Equal(t, 4000, admitted(t, b, 4000, nil, time.Time{}))
	assert.Equal(t, 1.0, b.Stats().Admitted)
	assert.Nil(t, b.Snapshot().SlowStart)
}

// TestSlowStartTripsAgain: five admitted failures during the slow start
// open the breaker again (Consecutive{5}).
func TestSlowStartTripsAgain(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "db", slowStartConfig(10*time.Second))
	events, unsubscribe := m.Subscribe(16)
	defer unsubscribe()
	recoverBreaker(t, m, mock, b)
	until := mock.Now().Add(10 * time.Second)
	drain(events)
	advance(m, mock, 3*time.Second)
	failures := 0
	for failures < 5 {
		p, err := b.Acquire(context.Background())
		if err != nil {
			var oe *breaker.OpenError
			require.ErrorAs(t, err, &oe)
			require.Equal(t, breaker.Closed, oe.State, "declined by the slow start, after %d failures", failures)
			require.Equal(t, until, oe.Until)
			continue
		}
		p.Release(errBoom)
		failures++
		if failures < 5 {
			requireState(t, b, breaker.Closed, "after an admitted failure")
		}
	}
	requireState(t, b, breaker.Open, "after 5 admitted failures")
	m.Sync()
	evs := drain(events)
	require.NotEmpty(t, evs)
	assert.Equal(t, breaker.Transition{From: breaker.Closed, To: breaker.Open}, evs[len(evs)-1].Transition)
	assert.Equal(t, 0.0, b.Stats().Admitted)
	oe := declined(t, b)
	assert.Equal(t, breaker.Open, oe.State)
}

// TestSlowStartNotAfterReset: Reset during a slow start, and a Reset of an
// open breaker, admit every call at once.
func TestSlowStartNotAfterReset(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "db", slowStartConfig(10*time.Second))
	recoverBreaker(t, m, mock, b)
	advance(m, mock, time.Second)
	require.NoError(t, b.Reset())
	assert.Equal(t, 1000, admitted(t, b, 1000, nil, time.Time{}), "after a Reset during the slow start")

	fail(t, b, 5)
	require.NoError(t, b.Reset())
	assert.Equal(t, 1000, admitted(t, b, 1000, nil, time.Time{}), "after a Reset of the open breaker")
	assert.Equal(t, 1.0, b.Stats().Admitted)
}

// TestSlowStartReconfigure: a Reconfigure may change the SlowStart; one
// that runs is measured against the new length from its start.
func TestSlowStartReconfigure(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "db", slowStartConfig(10*time.Second))
	recoverBreaker(t, m, mock, b)
	closedAt := mock.Now()
	advance(m, mock, 5*time.Second)

	// A new Strategy is a new window, not a recovery: the slow start goes on.
	cfg := slowStartConfig(20 * time.Second)
	cfg.Strategy = breaker.Consecutive{Failures: 6}
	require.NoError(t, b.Reconfigure(cfg))
	st := b.Stats()
	assert.Equal(t, closedAt.Add(20*time.Second), st.SlowStartUntil)
	assert.InDelta(t, 0.25, st.Admitted, 1e-9)

	cfg.SlowStart = 0
	require.NoError(t, b.Reconfigure(cfg))
	assert.Equal(t, 1.0, b.Stats().Admitted)
	assert.Equal(t, 1000, admitted(t, b, 1000, nil, time.Time{}))

	// From zero, the next recovery ramps with the new SlowStart.
	cfg.SlowStart = 4 * time.Second
	require.NoError(t, b.Reconfigure(cfg))
	fail(t, b, 6)
	requireState(t, b, breaker.Open, "after 6 failures")
	advance(m, mock, time.Second)
	probe(t, b).Release(nil)
	m.Sync()
	assert.Equal(t, mock.Now().Add(4*time.Second), b.Stats().SlowStartUntil)
}

func TestSlowStartNegative(t *testing.T) {
	m, _ := startMock(t)
	_, err := m.Register("db", manager.Config{SlowStart: -time.Second})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"db"`)
	assert.Contains(t, err.Error(), "Config.SlowStart")
	b := register(t, m, "db", manager.Config{})
	err = b.Reconfigure(manager.Config{SlowStart: -time.Second})
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "Config.SlowStart") && strings.Contains(err.Error(), `"db"`), err.Error())
	assert.False(t, errors.Is(err, breaker.ErrOpen))
}
