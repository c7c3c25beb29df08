package tally_test

import (
	"testing"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/metrics/internal/tally"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	closedOpen = breaker.Transition{From: breaker.Closed, To: breaker.Open}
	openClosed = breaker.Transition{From: breaker.Open, To: breaker.Closed}
)

// counts returns the counts of one of each transition given.
func counts(trs ...breaker.Transition) tally.Counts {
	var c tally.Counts
	for _, tr := range trs {
		c.Transitions[tr.From][tr.To]++
	}
	return c
}

// Transitions made before Start are not counted and are no gap; those of a
// breaker registered after Start are counted from its registration.
func TestCountsFromStart(t *testing.T) {
	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	defer m.Stop()
	early, err := m.Register("early", manager.Config{})
	require.NoError(t, err)
	require.NoError(t, early.ForceOpen())
	m.Sync()

	tl, err := tally.Start(m, 0)
	require.NoError(t, err)
	defer tl.Close()
	require.NoError(t, early.Reset())
	late, err := m.Register("late", manager.Config{})
	require.NoError(t, err)
	require.NoError(t, late.ForceOpen())
	m.Sync()

	assert.Equal(t, map[string]tally.Counts{
		"early": counts(openClosed),
		"late":  counts(closedOpen),
	}, tl.Counts())
}

// Counts keeps answering after Close and after the manager stops, with
// the last counts; Close is idempotent.
func TestCountsAfterClose(t *testing.T) {
	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	b, err := m.Register("b", manager.Config{})
	require.NoError(t, err)
	tl, err := tally.Start(m, 1)
	require.NoError(t, err)
	require.NoError(t, b.ForceOpen())
	m.Sync()
	m.Stop()
	want := map[string]tally.Counts{"b": counts(closedOpen)}
	assert.Equal(t, want, tl.Counts())
	tl.Close()
	tl.Close()
	assert.Equal(t, want, tl.Counts())
}

// A removed breaker's counts go with it: registered again, it counts from
// zero.
func TestRemovedBreakerForgotten(t *testing.T) {
	m := manager.Start(manager.Options{Clock: clock.NewMock()})
	defer m.Stop()
	tl, err := tally.Start(m, 0)
	require.NoError(t, err)
	defer tl.Close()
	b, err := m.Register("b", manager.Config{})
	require.NoError(t, err)
	require.NoError(t, b.ForceOpen())
	m.Sync()
	assert.Equal(t, counts(closedOpen), tl.Counts()["b"])
	require.True(t, m.Remove("b"))
	m.Sync()
	assert.NotContains(t, tl.Counts(), "b")
	b, err = m.Register("b", manager.Config{})
	require.NoError(t, err)
	require.NoError(t, b.ForceOpen())
	m.Sync()
	tl.Sync()
	assert.Equal(t, counts(closedOpen), tl.Get("b"))
}
