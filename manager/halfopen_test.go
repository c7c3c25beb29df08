package manager_test

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

// HalfOpen ends the open period now: the next call is the probe, the old
// period's timer changes nothing, and the probe's success closes the
// breaker into its slow start, as after a timer.
func TestHalfOpenLocal(t *testing.T) {
	m, mock := startMock(t)
	events, cancel := m.Subscribe(16)
	defer cancel()
	b := register(t, m, "svc", manager.Config{
		Strategy:  breaker.Consecutive{Failures: 1},
		Recover:   recover.BasicTimeout{Open: 30 * time.Second, ProbeTimeout: time.Minute},
		SlowStart: 10 * time.Second,
	})
	fail(t, b, 1)
	m.Sync()
	requireState(t, b, breaker.Open, "after the trip")
	advance(m, mock, time.Second)

	require.NoError(t, b.HalfOpen())
	requireState(t, b, breaker.HalfOpen, "after HalfOpen")
	m.Sync()
	evs := drain(events)
	require.NotEmpty(t, evs)
	last := evs[len(evs)-1]
	assert.Equal(t, breaker.Transition{From: breaker.Open, To: breaker.HalfOpen}, last.Transition)
	assert.Equal(t, breaker.CauseHalfOpen, last.Cause, "the event says it was done by hand")

	advance(m, mock, 30*time.Second) // the old period's end: its timer is stale
	requireState(t, b, breaker.HalfOpen, "at the old period's end")
	p := probe(t, b)
	declined(t, b)
	p.Release(nil)
	m.Sync()
	requireState(t, b, breaker.Closed, "after the probe's success")
	s := b.Snapshot()
	require.NotNil(t, s.SlowStart, "the recovery's slow start follows")
	assert.Equal(t, mock.Now().Add(10*time.Second), s.SlowStart.Until)
}

// HalfOpen of a breaker that is not open is an error that names the
// breaker and says why, and changes nothing.
func TestHalfOpenRefused(t *testing.T) {
	m, mock := startMock(t)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: time.Second, ProbeTimeout: time.Minute}}
	b := register(t, m, "svc", cfg)

	err := b.HalfOpen()
	require.Error(t, err, "closed")
	assert.Contains(t, err.Error(), `"svc"`)
	assert.Contains(t, err.Error(), "closed")
	requireState(t, b, breaker.Closed, "after a refused HalfOpen")

	fail(t, b, 1)
	m.Sync()
	advance(m, mock, time.Second)
	requireState(t, b, breaker.HalfOpen, "after the period")
	err = b.HalfOpen()
	require.Error(t, err, "half-open")
	assert.Contains(t, err.Error(), "half_open already")

	p := probe(t, b)
	err = b.HalfOpen()
	require.Error(t, err, "probing")
	assert.Contains(t, err.Error(), "probing")
	p.Release(nil)
	m.Sync()

	require.NoError(t, b.ForceOpen())
	err = b.HalfOpen()
	require.Error(t, err, "forced")
	assert.Contains(t, err.Error(), "Reset")
	s := b.Snapshot()
	assert.True(t, s.Forced && s.State == breaker.Open, "a refused HalfOpen leaves the forcing")

	require.True(t, m.Remove("svc"))
	assert.ErrorIs(t, b.HalfOpen(), manager.ErrRemoved)
	b2 := register(t, m, "other", cfg)
	m.Stop()
	assert.ErrorIs(t, b2.HalfOpen(), manager.ErrStopped)
}

// HalfOpen of a shared breaker ends the open period for every process:
// each turns half-open, exactly one probe runs for the fleet, and its
// success closes every process into the fleet's slow start.
func TestHalfOpenShared(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	ms, bs := fleet(t, 3, mock, mem, manager.Config{
		Strategy:  breaker.Consecutive{Failures: 1},
		Recover:   recover.BasicTimeout{Open: time.Minute, ProbeTimeout: time.Minute},
		SlowStart: 10 * time.Second,
	})
	syncAll(ms)
	fail(t, bs[0], 1)
	syncAll(ms)
	require.True(t, allIn(bs, breaker.Open)(), "every process open after the trip")
	mock.Add(time.Second)
	syncAll(ms)

	require.NoError(t, bs[2].HalfOpen())
	syncAll(ms)
	require.True(t, allIn(bs, breaker.HalfOpen)(), "every process half-open after HalfOpen in one")
	st, err := mem.Status(context.Background(), []string{"svc"})
	require.NoError(t, err)
	assert.Equal(t, uint64(3), st[0].Epoch, "the next opened epoch")
	assert.Zero(t, st[0].Open, "its period over")

	trials := 0
	var winner manager.Permit
	for i, b := range bs {
		p, err := b.Acquire(context.Background())
		if err == nil {
			require.True(t, p.Probe(), "manager %d: a call let through is the probe", i)
			trials++
			winner = p
		}
		syncAll(ms)
	}
	require.Equal(t, 1, trials, "exactly one trial for the fleet")
	winner.Release(nil)
	syncAll(ms)
	for i, b := range bs {
		s := b.Snapshot()
		require.Equal(t, breaker.Closed, s.State, "manager %d after the trial", i)
		require.NotNil(t, s.SlowStart, "manager %d ramps: the slow start follows the trial", i)
	}
}

// HalfOpen of a shared breaker the store refuses says why: here a forcing
// made in the store that this process has not heard of yet.
func TestHalfOpenSharedRefused(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	ms, bs := fleet(t, 1, mock, mem, manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Minute},
	})
	syncAll(ms)
	err := bs[0].HalfOpen()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "closed")
	require.NoError(t, bs[0].ForceOpen())
	syncAll(ms)
	err = bs[0].HalfOpen()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Reset")
	st, serr := mem.Status(context.Background(), []string{"svc"})
	require.NoError(t, serr)
	assert.True(t, st[0].Forced, "still forced in the store")
}
