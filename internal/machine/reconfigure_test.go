package machine_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/machine"
)

// fail records one failure through a fresh ticket at now, trips the
// breaker if the strategy says so, and reports whether it tripped.
func fail(t *testing.T, m *machine.Machine, now time.Time) bool {
	t.Helper()
	tk, _, err := m.Acquire(now)
	require.Nil(t, err, "Acquire at %s", when(now))
	trip, r := m.Record(tk, classify.Failure, now)
	require.Equal(t, machine.Counted, r, "failure at %s", when(now))
	if trip {
		_, ok := m.Trip(tk.Gen, classify.Failure, nil, now)
		require.True(t, ok, "Trip at %s", when(now))
	}
	return trip
}

func TestMachineReconfigureClosed(t *testing.T) {
	m, err := machine.NewMachine("svc", breaker.Consecutive{Failures: 2}, t0)
	require.NoError(t, err)
	require.False(t, fail(t, m, at(time.Second)), "one failure of two")
	old, _, _ := m.Acquire(at(2 * time.Second))
	before := m.Snapshot()

	step, ok, err := m.Reconfigure(breaker.Consecutive{Failures: 3}, at(3*time.Second))
	require.NoError(t, err)
	require.True(t, ok, "a closed breaker starts a fresh window in a new generation")
	assert.Equal(t, tr(closed, closed), step.Transition)
	assert.Equal(t, breaker.Cause(0), step.Cause)
	assert.False(t, step.NeedsTimer())
	assert.Equal(t, before.Gen+1, step.Gen)
	assert.Equal(t, at(3*time.Second), step.At)
	after := m.Snapshot()
	assert.Equal(t, step.Gen, after.Gen)
	assert.Equal(t, before.Since, after.Since, "the breaker did not leave closed")
	assert.True(t, after.Admits())
	assert.Equal(t, breaker.Consecutive{Failures: 3}, m.Strategy())

	_, r := m.Record(old, classify.Failure, at(4*time.Second))
	assert.Equal(t, machine.Stale, r, "a call admitted before lands in the old window")
	assert.False(t, fail(t, m, at(5*time.Second)), "failure 1 of 3 in the fresh window")
	assert.False(t, fail(t, m, at(6*time.Second)), "failure 2 of 3: the failure before the change does not count")
	assert.True(t, fail(t, m, at(7*time.Second)), "failure 3 of 3 trips")
	assert.Equal(t, open, m.Snapshot().State)
}

func TestMachineReconfigureOpen(t *testing.T) {
	m, err := machine.NewMachine("svc", breaker.Consecutive{Failures: 2}, t0)
	require.NoError(t, err)
	fail(t, m, at(time.Second))
	require.True(t, fail(t, m, at(2*time.Second)))
	open := m.Snapshot()

	_, ok, err := m.Reconfigure(breaker.Consecutive{Failures: 1}, at(3*time.Second))
	require.NoError(t, err)
	assert.False(t, ok, "an open breaker stays open, in the same generation")
	assert.Equal(t, open.Gen, m.Snapshot().Gen)
	assert.Equal(t, breaker.Open, m.Snapshot().State)

	_, ok = m.Expire(open.Gen, at(32*time.Second))
	require.True(t, ok, "the open period's timer still ends it")
	p, _, _ := m.Acquire(at(33 * time.Second))
	require.True(t, p.Probe)
	_, r := m.EndProbe(p, classify.Success, nil, at(34*time.Second))
	require.Equal(t, machine.Counted, r)
	assert.True(t, fail(t, m, at(35*time.Second)), "the next closed period counts with the new strategy: one failure trips")
}

func TestMachineReconfigureProbingKeepsTheProbe(t *testing.T) {
	m, err := machine.NewMachine("svc", breaker.Consecutive{Failures: 1}, t0)
	require.NoError(t, err)
	require.True(t, fail(t, m, at(time.Second)))
	_, ok := m.Expire(m.Snapshot().Gen, at(31*time.Second))
	require.True(t, ok)
	p, _, _ := m.Acquire(at(32 * time.Second))
	require.True(t, p.Probe)

	_, ok, err = m.Reconfigure(breaker.Consecutive{Failures: 2}, at(33*time.Second))
	require.NoError(t, err)
	assert.False(t, ok)
	step, r := m.EndProbe(p, classify.Success, nil, at(34*time.Second))
	require.Equal(t, machine.Counted, r, "the probe in flight is still the probe")
	assert.Equal(t, tr(probing, closed), step.Transition)
	assert.False(t, fail(t, m, at(35*time.Second)), "failure 1 of 2")
	assert.True(t, fail(t, m, at(36*time.Second)), "failure 2 of 2")
}

func TestMachineReconfigureInvalid(t *testing.T) {
	m, err := machine.NewMachine("svc", breaker.Consecutive{Failures: 2}, t0)
	require.NoError(t, err)
	before := m.Snapshot()
	_, ok, err := m.Reconfigure(breaker.Consecutive{}, at(time.Second))
	var ce *breaker.ConfigError
	require.ErrorAs(t, err, &ce, "Consecutive{} is invalid")
	assert.False(t, ok)
	assert.Same(t, before, m.Snapshot(), "an invalid strategy changes nothing")
	assert.Equal(t, breaker.Consecutive{Failures: 2}, m.Strategy())
}

func TestMachineReconfigureUsesClock(t *testing.T) {
	m, err := machine.NewMachine("svc", breaker.Consecutive{Failures: 2}, t0)
	require.NoError(t, err)
	require.False(t, m.UsesClock())
	_, _, err = m.Reconfigure(breaker.TimeWindow{Rate: 0.5, Period: 10 * time.Second, MinCalls: 2}, at(time.Second))
	require.NoError(t, err)
	assert.True(t, m.UsesClock(), "a TimeWindow needs the time of each call")
	_, _, err = m.Reconfigure(breaker.FailureRate{Rate: 0.5, Window: 10}, at(2*time.Second))
	require.NoError(t, err)
	assert.False(t, m.UsesClock(), "once no TimeWindow counter can be current, the clock is not read")
}

func TestMachineRemove(t *testing.T) {
	m, err := machine.NewMachine("svc", breaker.Consecutive{Failures: 2}, t0)
	require.NoError(t, err)
	tk, _, _ := m.Acquire(t0)
	gen := m.Snapshot().Gen
	require.True(t, m.Remove())
	s := m.Snapshot()
	assert.True(t, s.Removed)
	assert.True(t, s.Halted, "a removed machine is halted")
	assert.Equal(t, closed, s.State, "the snapshot keeps the state")
	assert.Equal(t, gen+1, s.Gen)
	assert.False(t, s.Admits())
	assert.False(t, s.Declines(), "the driver decides what a caller of a removed breaker gets")
	_, r := m.Record(tk, classify.Failure, t0)
	assert.Equal(t, machine.Stale, r, "a ticket from before the removal is stale")
	got, _, oerr := m.Acquire(t0)
	assert.Zero(t, got)
	assert.Nil(t, oerr)
	_, ok := m.ForceOpen(t0)
	assert.False(t, ok, "no transition after Remove")
	assert.False(t, m.Remove(), "a second Remove does nothing")
	m.Halt()
	assert.True(t, m.Snapshot().Removed, "Halt keeps Removed")

	h, err := machine.NewMachine("svc", breaker.Consecutive{Failures: 2}, t0)
	require.NoError(t, err)
	h.Halt()
	require.True(t, h.Remove(), "a halted machine can still be removed")
	assert.True(t, h.Snapshot().Removed)
}
