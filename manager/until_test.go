package manager_test

import (
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

// An event of a transition to open says when the open period ends, and
// one to probing when the probe's time runs out: "open for 400ms" needs no
// Snapshot. Forced open, and every other transition, has no end.
func TestEventUntil(t *testing.T) {
	m, mock := startMock(t)
	events, cancel := m.Subscribe(16)
	defer cancel()
	b := register(t, m, "svc", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: 400 * time.Millisecond, ProbeTimeout: 3 * time.Second},
	})
	t0 := mock.Now()
	fail(t, b, 1)
	advance(m, mock, 400*time.Millisecond)
	p := probe(t, b)
	m.Sync()
	require.NoError(t, b.ForceOpen())
	p.Release(nil)
	require.NoError(t, b.Reset())
	m.Sync()

	want := map[breaker.Transition]time.Time{
		{From: breaker.Closed, To: breaker.Open}:      t0.Add(400 * time.Millisecond),
		{From: breaker.Open, To: breaker.HalfOpen}:    {},
		{From: breaker.HalfOpen, To: breaker.Probing}: t0.Add(400*time.Millisecond + 3*time.Second),
		{From: breaker.Probing, To: breaker.Open}:     {}, // forced: no end
		{From: breaker.Open, To: breaker.Closed}:      {},
	}
	got := drain(events)
	require.Len(t, got, len(want), "%v", got)
	for _, e := range got {
		w, ok := want[e.Transition]
		require.True(t, ok, "an unexpected %v", e.Transition)
		assert.True(t, e.Until.Equal(w), "%v: Until %v, want %v", e.Transition, e.Until.Sub(t0), w.Sub(t0))
	}
}

// A breaker that follows its fleet's opening says when it turns
// half-open: the fleet's period's end, and its lag.
func TestEventUntilShared(t *testing.T) {
	mock := clock.NewMock()
	ms, bs := fleet(t, 2, mock, store.NewMemory(mock), manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second},
	})
	syncAll(ms)
	events, cancel := ms[1].Subscribe(8)
	defer cancel()
	t0 := mock.Now()
	fail(t, bs[0], 1)
	syncAll(ms)
	got := drain(events)
	require.Len(t, got, 1)
	assert.Equal(t, breaker.CauseShared, got[0].Cause)
	assert.Equal(t, bs[1].Snapshot().Until, got[0].Until, "the event's Until is the breaker's")
	assert.WithinRange(t, got[0].Until, t0.Add(time.Second+maxLag-30*time.Millisecond), t0.Add(time.Second+maxLag), "Until %v", got[0].Until.Sub(t0))
}
