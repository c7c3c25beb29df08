package manager_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// A breaker forced open declines every call, and no timer undoes that,
// whatever state it was forced from.
func TestForceOpenNoTimerUndoesIt(t *testing.T) {
	for _, from := range []breaker.State{breaker.Closed, breaker.Open, breaker.HalfOpen, breaker.Probing} {
		t.Run(from.String(), func(t *testing.T) {
			m, mock := startMock(t)
			b := register(t, m, "forced", manager.Config{
				Strategy: breaker.Consecutive{Failures: 1},
				Recover:  recover.BasicTimeout{Open: time.Second, ProbeTimeout: time.Second},
			})
			var pr manager.Permit
			switch from {
			case breaker.Open:
				fail(t, b, 1)
			case breaker.HalfOpen:
				fail(t, b, 1)
				advance(m, mock, time.Second)
			case breaker.Probing:
				fail(t, b, 1)
				advance(m, mock, time.Second)
				pr = probe(t, b)
			}
			m.Sync()
			requireState(t, b, from, "before ForceOpen")

			require.NoError(t, b.ForceOpen())
			require.NoError(t, b.ForceOpen(), "forcing twice does nothing")
			requireState(t, b, breaker.Open, "after ForceOpen")
			oe := declined(t, b)
			assert.Equal(t, breaker.Open, oe.State)
			assert.True(t, oe.Until.IsZero(), "a forced breaker has no end: %v", oe.Until)
			assert.True(t, b.Stats().Forced)

			pr.Release(nil) // a probe from before is stale
			advance(m, mock, 24*time.Hour)
			requireState(t, b, breaker.Open, "a day after ForceOpen")
			declined(t, b)
			assert.True(t, b.Stats().Forced)

			require.NoError(t, b.Reset())
			requireState(t, b, breaker.Closed, "after Reset")
			assert.False(t, b.Stats().Forced)
			release(t, b, nil)
			// The strategy counts afresh: one failure trips, and the
			// normal timer runs again.
			fail(t, b, 1)
			advance(m, mock, time.Second)
			requireState(t, b, breaker.HalfOpen, "one open period after a trip following Reset")
		})
	}
}

// Reset closes a breaker from any state and clears its strategy's count.
func TestReset(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "reset", manager.Config{
		Strategy: breaker.Consecutive{Failures: 3},
		Recover:  recover.BasicTimeout{Open: time.Second},
	})
	fail(t, b, 2)
	require.NoError(t, b.Reset(), "Reset of a closed breaker")
	requireState(t, b, breaker.Closed, "after Reset in closed")
	fail(t, b, 2)
	requireState(t, b, breaker.Closed, "Reset cleared the count of two failures")
	fail(t, b, 1)
	requireState(t, b, breaker.Open, "after three failures")

	require.NoError(t, b.Reset())
	requireState(t, b, breaker.Closed, "after Reset in open")
	advance(m, mock, time.Second)
	requireState(t, b, breaker.Closed, "the open period's timer is stale after Reset")

	fail(t, b, 3)
	advance(m, mock, time.Second)
	requireState(t, b, breaker.HalfOpen, "before the second Reset")
	require.NoError(t, b.Reset())
	requireState(t, b, breaker.Closed, "after Reset in half_open")
	_, err := b.Acquire(context.Background())
	require.NoError(t, err)
}

// ForceOpen and Reset on another breaker leave this one alone.
func TestForceOpenIsPerBreaker(t *testing.T) {
	m, _ := startMock(t)
	a := register(t, m, "a", manager.Config{})
	b := register(t, m, "b", manager.Config{})
	require.NoError(t, a.ForceOpen())
	requireState(t, b, breaker.Closed, "while a is forced open")
	release(t, b, nil)
	require.NoError(t, b.Reset())
	requireState(t, a, breaker.Open, "after b was reset")
}

// Resetting a closed breaker clears its count but makes no transition:
// permits granted before it still count toward the strategy.
func TestResetClosedKeepsPermitsCurrent(t *testing.T) {
	m, _ := startMock(t)
	b := register(t, m, "b", manager.Config{Strategy: breaker.Consecutive{Failures: 2}})
	events, unsubscribe := m.Subscribe(4)
	defer unsubscribe()
	p, err := b.Acquire(context.Background())
	require.NoError(t, err)
	fail(t, b, 1)
	require.NoError(t, b.Reset())
	m.Sync()
	assert.Empty(t, drain(events), "no transition")
	p.Release(errBoom)
	assert.Zero(t, b.Stats().Stale)
	requireState(t, b, breaker.Closed, "one failure after the reset")
	fail(t, b, 1)
	requireState(t, b, breaker.Open, "the permit from before the reset counted")
}
