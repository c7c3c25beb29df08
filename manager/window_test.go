package manager_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
)

// Stats shows the window a windowed strategy trips on, and while the
// breaker is open, the window it tripped on; a reset starts a fresh one.
func TestStatsWindow(t *testing.T) {
	m, _ := startMock(t)
	b := register(t, m, "b", manager.Config{Strategy: breaker.FailureRate{Rate: 0.5, Window: 10, MinCalls: 4}})
	window := func() [2]uint64 {
		st := b.Stats()
		require.True(t, st.Windowed)
		return [2]uint64{st.WindowCalls, st.WindowFailures}
	}
	assert.Equal(t, [2]uint64{0, 0}, window(), "new")
	release(t, b, nil)
	release(t, b, nil)
	fail(t, b, 1)
	assert.Equal(t, [2]uint64{3, 1}, window(), "closed")
	fail(t, b, 1) // 2 of 4: trips
	m.Sync()
	require.Equal(t, breaker.Open, b.State())
	assert.Equal(t, [2]uint64{4, 2}, window(), "open: the window it tripped on")
	require.NoError(t, b.Reset())
	assert.Equal(t, [2]uint64{0, 0}, window(), "after a reset")

	c := register(t, m, "c", manager.Config{})
	assert.False(t, c.Stats().Windowed, "Consecutive keeps no window")
}

// A breaker registered with TimeCalls keeps a histogram of its calls'
// durations on the manager's clock; one without keeps none.
func TestStatsDurations(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "b", manager.Config{TimeCalls: true})
	call := func(d time.Duration, err error) {
		p, aerr := b.Acquire(context.Background())
		require.NoError(t, aerr)
		mock.Add(d)
		p.Release(err)
	}
	call(0, nil)
	call(5*time.Millisecond, nil)      // at most 5ms: the first bucket
	call(30*time.Millisecond, errBoom) // 25ms < d <= 50ms
	call(time.Minute, nil)             // beyond every bound
	d := b.Stats().Durations
	require.NotNil(t, d)
	want := manager.Durations{Count: 4, Sum: time.Minute + 35*time.Millisecond}
	want.Buckets[0] = 2
	want.Buckets[3] = 1
	want.Buckets[len(want.Buckets)-1] = 1
	assert.Equal(t, want, *d)

	c := register(t, m, "c", manager.Config{})
	assert.Nil(t, c.Stats().Durations)
}

// Reconfigure turns the histogram on and off; a permit granted before
// keeps the timing it was granted with.
func TestReconfigureTimeCalls(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "b", manager.Config{})
	early, err := b.Acquire(context.Background())
	require.NoError(t, err)
	require.NoError(t, b.Reconfigure(manager.Config{TimeCalls: true}))
	early.Release(nil) // granted untimed
	p, err := b.Acquire(context.Background())
	require.NoError(t, err)
	mock.Add(time.Millisecond)
	p.Release(nil)
	d := b.Stats().Durations
	require.NotNil(t, d)
	assert.Equal(t, uint64(1), d.Count)
	require.NoError(t, b.Reconfigure(manager.Config{}))
	assert.Nil(t, b.Stats().Durations)
}
