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

// Mirror follows decisions made elsewhere between any two states, forced
// or not; it refuses a forcing of a state other than open, and changes
// nothing that is already so or halted.
func TestMirror(t *testing.T) {
	until := t0.Add(time.Minute)
	tests := []struct {
		name       string
		from       func(*machine.Machine)
		to         breaker.State
		forced     bool
		ok         bool
		wantForced bool
		wantUntil  time.Time
	}{
		{"closed to open", nil, open, false, true, false, until},
		{"closed to forced open: no timer", nil, open, true, true, true, time.Time{}},
		{"forcing a state other than open is refused", nil, halfOpen, true, false, false, time.Time{}},
		{"forced open to open: the forcing is lifted", func(m *machine.Machine) { m.ForceOpen(t0) }, open, false, true, false, until},
		{"forced open to closed", func(m *machine.Machine) { m.ForceOpen(t0) }, closed, false, true, false, until},
		{"forced open to forced open: nothing", func(m *machine.Machine) { m.ForceOpen(t0) }, open, true, false, true, time.Time{}},
		{"open to forced open", func(m *machine.Machine) { m.Mirror(m.Snapshot().Gen, open, until, false, time.Time{}, nil, t0) }, open, true, true, true, time.Time{}},
		{"closed to closed: nothing", nil, closed, false, false, false, time.Time{}},
		{"halted: nothing", func(m *machine.Machine) { m.Halt() }, open, true, false, false, time.Time{}},
	}
	// A change decided on a generation the machine has left is refused.
	t.Run("a generation the machine left: nothing", func(t *testing.T) {
		m, err := machine.NewMachine("svc", breaker.Consecutive{Failures: 1}, t0)
		require.NoError(t, err)
		gen := m.Snapshot().Gen
		_, ok := m.ForceOpen(t0)
		require.True(t, ok)
		before := m.Snapshot()
		_, ok = m.Mirror(gen, closed, time.Time{}, false, time.Time{}, nil, t0)
		assert.False(t, ok, "decided on gen %d, the machine is in %d", gen, before.Gen)
		assert.Same(t, before, m.Snapshot(), "nothing changed")
	})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := machine.NewMachine("svc", breaker.Consecutive{Failures: 1}, t0)
			require.NoError(t, err)
			if tc.from != nil {
				tc.from(m)
			}
			before := m.Snapshot()
			step, ok := m.Mirror(before.Gen, tc.to, until, tc.forced, time.Time{}, nil, t0)
			require.Equal(t, tc.ok, ok)
			s := m.Snapshot()
			assert.Equal(t, tc.wantForced, s.Forced, "forced")
			if !ok {
				assert.Same(t, before, s, "nothing changed")
				return
			}
			assert.Equal(t, breaker.Transition{From: before.State, To: tc.to}, step.Transition)
			assert.Equal(t, breaker.CauseShared, step.Cause)
			assert.Equal(t, tc.to, s.State)
			if tc.to != closed {
				assert.Equal(t, tc.wantUntil, s.Until)
			}
		})
	}
}

// Hold ends an open state's timer without a transition: Expire of its
// generation then leaves it open, whatever the time.
func TestHold(t *testing.T) {
	m, err := machine.NewMachine("svc", breaker.Consecutive{Failures: 1}, t0)
	require.NoError(t, err)
	open1, ok := m.Mirror(m.Snapshot().Gen, open, t0.Add(time.Second), false, time.Time{}, nil, t0)
	require.True(t, ok)
	assert.False(t, m.Hold(open1.Gen-1), "an older generation")
	require.True(t, m.Hold(open1.Gen))
	s := m.Snapshot()
	assert.Equal(t, open1.Gen, s.Gen, "no transition")
	assert.True(t, s.Until.IsZero(), "no timer")
	_, ok = m.Expire(open1.Gen, t0.Add(time.Hour))
	assert.False(t, ok, "a held state does not expire")
	assert.Equal(t, open, m.Snapshot().State)
	_, ok = m.Mirror(open1.Gen, closed, time.Time{}, false, time.Time{}, nil, t0)
	assert.True(t, ok, "the driver moves it")
	assert.False(t, m.Hold(m.Snapshot().Gen), "a closed breaker has no timer to hold")
}

// Renew gives the closed generation it names a fresh counter, and does
// nothing once the breaker has moved on from it.
func TestRenew(t *testing.T) {
	m, err := machine.NewMachine("svc", breaker.Consecutive{Failures: 2}, t0)
	require.NoError(t, err)
	tk, _, oerr := m.Acquire(t0)
	require.Nil(t, oerr)
	trip, _ := m.Record(tk, classify.Failure, t0)
	require.False(t, trip, "one failure of two")
	require.True(t, m.Renew(tk.Gen, false), "Renew of the current closed generation")
	assert.Equal(t, tk.Gen, m.Snapshot().Gen, "the same generation")
	trip, r := m.Record(tk, classify.Failure, t0)
	assert.Equal(t, machine.Counted, r, "a ticket of the generation still counts")
	assert.False(t, trip, "in a fresh counter: the failure before the renewal is gone")
	assert.False(t, m.Renew(tk.Gen+1, false), "Renew of a generation the breaker is not in")
	trip, _ = m.Record(tk, classify.Failure, t0)
	require.True(t, trip)
	_, ok := m.Trip(tk.Gen, classify.Failure, nil, t0)
	require.True(t, ok)
	assert.False(t, m.Renew(tk.Gen, false), "Renew of a closed generation that has opened")
	assert.False(t, m.Renew(m.Snapshot().Gen, false), "Renew of an open generation")
}
