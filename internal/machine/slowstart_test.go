package machine_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/machine"
)

// TestSlowStartAdmits is the admission rule from fixed instants: a slow
// start of 10s from t0, and draws r at the edges of [0, 2^64).
func TestSlowStartAdmits(t *testing.T) {
	from, until := t0, at(10*time.Second)
	const top = math.MaxUint64
	for _, c := range []struct {
		now   time.Time
		r     uint64
		admit bool
		share float64
	}{
		{at(-time.Second), 0, false, 0},
		{t0, 0, false, 0},
		{at(time.Nanosecond), 0, true, 1e-10},
		{at(time.Nanosecond), top, false, 1e-10},
		{at(time.Second), 0, true, 0.1},
		{at(time.Second), top/10 - 1, true, 0.1},  // just under a tenth of the draws
		{at(time.Second), top/10 + 1, false, 0.1}, // just over
		{at(time.Second), top, false, 0.1},
		{at(5 * time.Second), top / 2, true, 0.5},
		{at(5 * time.Second), top/2 + 1, false, 0.5},
		{at(9999 * time.Millisecond), top - top/10000 - 2, true, 0.9999},
		{at(9999 * time.Millisecond), top, false, 0.9999},
		{until, top, true, 1},
		{at(time.Hour), top, true, 1},
	} {
		assert.Equal(t, c.admit, machine.SlowStartAdmits(from, until, c.now, c.r),
			"SlowStartAdmits(t0, t0+10s, %s, %#x)", when(c.now), c.r)
		assert.InDelta(t, c.share, machine.SlowStartShare(from, until, c.now), 1e-12,
			"SlowStartShare(t0, t0+10s, %s)", when(c.now))
	}
	// A slow start of no length admits every call, even at its start.
	assert.True(t, machine.SlowStartAdmits(t0, t0, t0, math.MaxUint64))
	assert.Equal(t, 1.0, machine.SlowStartShare(t0, t0, t0))
}

// recovered returns a machine with a slow start of slow that tripped at t0
// and whose probe, taken at t0+30s, succeeded at t0+31s.
func recovered(t *testing.T, slow time.Duration) *machine.Machine {
	t.Helper()
	m := new(machine.Machine)
	require.NoError(t, m.InitSlow("db", breaker.Consecutive{Failures: 2}, slow, t0))
	_, ok := m.Trip(1, classify.Failure, nil, t0)
	require.True(t, ok)
	_, ok = m.Expire(2, at(30*time.Second))
	require.True(t, ok)
	tk, _, _ := m.Acquire(at(30 * time.Second))
	require.True(t, tk.Probe)
	step, r := m.EndProbe(tk, classify.Success, nil, at(31*time.Second))
	require.Equal(t, machine.Counted, r)
	require.Equal(t, tr(probing, closed), step.Transition)
	return m
}

func TestMachineSlowStartAfterRecovery(t *testing.T) {
	m := recovered(t, 10*time.Second)
	s := m.Snapshot()
	assert.False(t, s.Admits(), "a slow start is not a plain closed snapshot")
	assert.True(t, s.SlowStarting())
	assert.False(t, s.Declines())
	assert.Equal(t, closed, s.State)
	assert.Equal(t, at(31*time.Second), s.SlowStart.From)
	assert.Equal(t, at(41*time.Second), s.SlowStart.Until)
	require.NotNil(t, s.Err, "the declined calls' error is built with the snapshot")
	assert.Equal(t, closed, s.Err.State)
	assert.Equal(t, at(41*time.Second), s.Err.Until)
	assert.True(t, errors.Is(s.Err, breaker.ErrOpen))
	assert.Contains(t, s.Err.Error(), "slow start")
	assert.False(t, s.SlowStartAdmits(0), "nothing goes through at the closing")
	assert.Equal(t, 0.0, s.Admitted())

	// Each tick works the share out again.
	next, ok := m.SlowStartTick(s.Gen, at(36*time.Second))
	require.True(t, ok)
	assert.Equal(t, at(36100*time.Millisecond), next)
	s = m.Snapshot()
	assert.Equal(t, 0.5, s.Admitted())
	assert.True(t, s.SlowStartAdmits(math.MaxUint64/2))
	assert.False(t, s.SlowStartAdmits(math.MaxUint64/2+1))

	// Calls admitted in it count: two failures trip it again.
	tk, _, err := m.Acquire(at(32 * time.Second))
	require.Nil(t, err)
	assert.Equal(t, s.Gen, tk.Gen)
	trip, r := m.Record(tk, classify.Failure, at(32*time.Second))
	assert.False(t, trip)
	assert.Equal(t, machine.Counted, r)
	trip, _ = m.Record(tk, classify.Failure, at(32*time.Second))
	assert.True(t, trip)
	step, ok := m.Trip(s.Gen, classify.Failure, nil, at(32*time.Second))
	require.True(t, ok)
	assert.Equal(t, tr(closed, open), step.Transition)
	assert.True(t, step.NeedsTimer())
	assert.False(t, m.Snapshot().SlowStarting())
}

func TestMachineSlowStartEnds(t *testing.T) {
	m := recovered(t, 10*time.Second)
	s := m.Snapshot()
	tk, _, _ := m.Acquire(at(35 * time.Second))
	next, ok := m.SlowStartTick(s.Gen, at(40950*time.Millisecond))
	require.True(t, ok)
	assert.Equal(t, at(41*time.Second), next, "the last tick is the end")
	_, ok = m.SlowStartTick(s.Gen, at(41*time.Second))
	require.False(t, ok, "the slow start is over")
	_, ok = m.SlowStartTick(s.Gen, at(42*time.Second))
	assert.False(t, ok, "only once")
	after := m.Snapshot()
	assert.Equal(t, 1.0, after.Admitted())
	assert.True(t, after.Admits())
	assert.False(t, after.SlowStarting())
	assert.Nil(t, after.Err)
	assert.Equal(t, s.Gen, after.Gen, "the same closed period")
	assert.True(t, after.SlowStart == nil)
	_, r := m.Record(tk, classify.Failure, at(42*time.Second))
	assert.Equal(t, machine.Counted, r, "a call admitted in the slow start still counts")
	trip, _ := m.Record(tk, classify.Failure, at(42*time.Second))
	require.True(t, trip, "in the same counter")
	_, ok = m.Trip(s.Gen, classify.Failure, nil, at(42*time.Second))
	assert.True(t, ok)
}

func TestMachineNoSlowStart(t *testing.T) {
	for _, c := range []struct {
		desc string
		m    func(t *testing.T) *machine.Machine
	}{
		{"zero SlowStart", func(t *testing.T) *machine.Machine { return recovered(t, 0) }},
		{"Reset during the slow start", func(t *testing.T) *machine.Machine {
			m := recovered(t, 10*time.Second)
			_, ok := m.Reset(at(32*time.Second), breaker.CauseReset)
			assert.False(t, ok, "a closed breaker stays in its generation")
			return m
		}},
		{"restart during the slow start", func(t *testing.T) *machine.Machine {
			m := recovered(t, 10*time.Second)
			m.Reset(at(32*time.Second), breaker.CauseRestart)
			return m
		}},
		{"Reset of an open breaker", func(t *testing.T) *machine.Machine {
			m := new(machine.Machine)
			require.NoError(t, m.InitSlow("db", breaker.Consecutive{Failures: 2}, 10*time.Second, t0))
			m.Trip(1, classify.Failure, nil, t0)
			_, ok := m.Reset(at(time.Second), breaker.CauseReset)
			require.True(t, ok)
			return m
		}},
		{"Mirror to closed", func(t *testing.T) *machine.Machine {
			m := new(machine.Machine)
			require.NoError(t, m.InitSlow("db", breaker.Consecutive{Failures: 2}, 10*time.Second, t0))
			m.Trip(1, classify.Failure, nil, t0)
			_, ok := m.Mirror(2, closed, time.Time{}, false, time.Time{}, nil, at(time.Second))
			require.True(t, ok)
			return m
		}},
		{"SlowStart set to zero during the slow start", func(t *testing.T) *machine.Machine {
			m := recovered(t, 10*time.Second)
			m.SetSlowStart(0, at(32*time.Second))
			return m
		}},
		{"SlowStart shortened to before now", func(t *testing.T) *machine.Machine {
			m := recovered(t, 10*time.Second)
			m.SetSlowStart(time.Second, at(33*time.Second))
			return m
		}},
	} {
		s := c.m(t).Snapshot()
		assert.True(t, s.Admits(), c.desc)
		assert.False(t, s.SlowStarting(), c.desc)
		assert.Nil(t, s.Err, c.desc)
	}
}

func TestMachineSlowStartReconfigured(t *testing.T) {
	m := recovered(t, 10*time.Second)
	gen := m.Snapshot().Gen

	// A longer SlowStart stretches the one that runs, from its start.
	m.SetSlowStart(20*time.Second, at(32*time.Second))
	s := m.Snapshot()
	assert.Equal(t, gen, s.Gen)
	assert.Equal(t, at(31*time.Second), s.SlowStart.From)
	assert.Equal(t, at(51*time.Second), s.SlowStart.Until)
	assert.Equal(t, at(51*time.Second), s.Err.Until)
	assert.Equal(t, 20*time.Second, m.SlowStart())

	// A new strategy opens a new window in a new generation; the slow
	// start goes on.
	step, fresh, err := m.Reconfigure(breaker.Consecutive{Failures: 3}, at(33*time.Second))
	require.NoError(t, err)
	require.True(t, fresh)
	s = m.Snapshot()
	assert.Equal(t, step.Gen, s.Gen)
	assert.True(t, s.SlowStarting())
	assert.Equal(t, at(51*time.Second), s.SlowStart.Until)

	// A Renew keeps it, a Reset ends it.
	require.True(t, m.Renew(s.Gen, false))
	assert.True(t, m.Snapshot().SlowStarting())
	m.Reset(at(34*time.Second), breaker.CauseReset)
	assert.True(t, m.Snapshot().Admits())
}

// TestSlowStartNext is the schedule of the ticks from fixed instants.
func TestSlowStartNext(t *testing.T) {
	for _, c := range []struct {
		until, now, want time.Time
	}{
		{at(10 * time.Second), at(-time.Second), t0},
		{at(10 * time.Second), t0, at(100 * time.Millisecond)},
		{at(10 * time.Second), at(99 * time.Millisecond), at(100 * time.Millisecond)},
		{at(10 * time.Second), at(100 * time.Millisecond), at(200 * time.Millisecond)},
		{at(10 * time.Second), at(9950 * time.Millisecond), at(10 * time.Second)},
		{at(100 * time.Millisecond), at(5 * time.Millisecond), at(10 * time.Millisecond)}, // no closer than 10ms
		{at(15 * time.Millisecond), at(12 * time.Millisecond), at(15 * time.Millisecond)},
	} {
		assert.Equal(t, c.want, machine.SlowStartNext(t0, c.until, c.now),
			"SlowStartNext(t0, %s, %s)", when(c.until), when(c.now))
	}
}

// TestMachineTripAfterSlowStartRepublished: a trip in a slow start that
// was republished since (a tick, a new length, its end) is the same
// generation's trip.
func TestMachineTripAfterSlowStartRepublished(t *testing.T) {
	m := recovered(t, 10*time.Second)
	gen := m.Snapshot().Gen
	m.SetSlowStart(20*time.Second, at(32*time.Second))
	m.SlowStartTick(gen, at(52*time.Second))
	_, ok := m.Trip(gen, classify.Failure, nil, at(52*time.Second))
	assert.True(t, ok)
}

// TestMirrorSlowStart: a breaker that follows the fleet to closed joins
// the fleet's slow start where it stands, measured with its own
// SlowStart back from the fleet's end; without a SlowStart of its own, or
// past the end, it admits every call.
func TestMirrorSlowStart(t *testing.T) {
	for _, c := range []struct {
		desc      string
		slow      time.Duration
		slowUntil time.Time
		share     float64 // want, at t0+4s; 1: no slow start
	}{
		{"4s into a fleet's slow start of 10s", 10 * time.Second, at(10 * time.Second), 0.4},
		{"at the fleet's closing", 10 * time.Second, at(14 * time.Second), 0},
		{"no SlowStart of its own", 0, at(10 * time.Second), 1},
		{"the fleet's slow start is over", 10 * time.Second, at(4 * time.Second), 1},
		{"none in the store", 10 * time.Second, time.Time{}, 1},
	} {
		m := new(machine.Machine)
		require.NoError(t, m.InitSlow("db", breaker.Consecutive{Failures: 2}, c.slow, t0))
		_, ok := m.Mirror(1, halfOpen, time.Time{}, false, time.Time{}, nil, t0)
		require.True(t, ok)
		_, ok = m.Mirror(2, closed, time.Time{}, false, c.slowUntil, nil, at(4*time.Second))
		require.True(t, ok, c.desc)
		s := m.Snapshot()
		assert.Equal(t, c.share, s.Admitted(), c.desc)
		if c.share == 1 {
			assert.Nil(t, s.SlowStart, c.desc)
			continue
		}
		require.NotNil(t, s.SlowStart, c.desc)
		assert.Equal(t, c.slowUntil, s.SlowStart.Until, c.desc)
		assert.Equal(t, c.slowUntil.Add(-c.slow), s.SlowStart.From, c.desc)
		next, ok := m.SlowStartNext(s.Gen, at(4*time.Second))
		assert.True(t, ok && next.After(at(4*time.Second)), "%s: the next tick %v", c.desc, next)
	}
}
