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
	"github.com/fusebox-go/fusebox/store"
)

// On the memory store Sync is a barrier for shared breakers: once the
// manager that tripped and then the others have synced, every one of them
// is open until the instant the trip decided (the others, their lag
// later), with no poll and no resync in between, and the same holds for
// the probe's verdict.
func TestSharedSyncIsABarrier(t *testing.T) {
	mock := clock.NewMock()
	ms, bs := fleet(t, 3, mock, store.NewMemory(mock), manager.Config{
		Strategy: breaker.Consecutive{Failures: 2},
		Recover:  recover.BasicTimeout{Open: 5 * time.Second, ProbeTimeout: time.Minute},
	})
	syncAll(ms)
	mock.Add(300 * time.Millisecond)
	tripped := mock.Now()
	fail(t, bs[1], 2)
	syncAll(ms)
	for i, b := range bs {
		s := b.Snapshot()
		require.Equal(t, breaker.Open, s.State, "manager %d after Sync", i)
		if i == 1 {
			assert.Equal(t, tripped.Add(5*time.Second), s.Until, "the opener: the open period counts from the trip")
			continue
		}
		assert.WithinRange(t, s.Until, tripped.Add(5*time.Second+maxLag-30*time.Millisecond), tripped.Add(5*time.Second+maxLag), "manager %d: the open period counts from the trip, and its lag", i)
	}
	mock.Add(5*time.Second + maxLag)
	syncAll(ms)
	require.True(t, allIn(bs, breaker.HalfOpen)(), "every manager is half-open when the period ends")

	p, err := bs[2].Acquire(context.Background())
	require.NoError(t, err)
	require.True(t, p.Probe())
	syncAll(ms)
	for i, b := range bs[:2] {
		_, err := b.Acquire(context.Background())
		require.ErrorIs(t, err, breaker.ErrOpen, "manager %d while another probes", i)
		assert.Equal(t, breaker.Probing, b.State(), "manager %d follows the lease", i)
	}
	p.Release(nil)
	syncAll(ms)
	assert.True(t, allIn(bs, breaker.Closed)(), "every manager closed by the probe's verdict")
}

// ForceOpen and Reset of a shared breaker act through the store, for every
// process: the others follow with an event of cause shared, no timer and no
// probe ends the forcing, and a Reset in any process lifts it everywhere.
func TestSharedForceOpenIsFleetWide(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	ms, bs := fleet(t, 3, mock, mem, manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second},
	})
	events, cancel := ms[2].Subscribe(64)
	defer cancel()
	syncAll(ms)

	require.NoError(t, bs[0].ForceOpen())
	syncAll(ms)
	st, err := mem.Status(context.Background(), []string{"svc"})
	require.NoError(t, err)
	assert.True(t, st[0].Forced, "the store holds the forcing")
	for i, b := range bs {
		s := b.Snapshot()
		assert.Equal(t, breaker.Open, s.State, "manager %d", i)
		assert.True(t, s.Forced, "manager %d is forced open", i)
	}
	evs := drain(events)
	require.Len(t, evs, 1)
	assert.Equal(t, breaker.Transition{From: breaker.Closed, To: breaker.Open}, evs[0].Transition)
	assert.Equal(t, breaker.CauseShared, evs[0].Cause)

	mock.Add(time.Hour)
	syncAll(ms)
	for i, b := range bs {
		_, err := b.Acquire(context.Background())
		require.ErrorIs(t, err, breaker.ErrOpen, "manager %d an hour later", i)
	}

	require.NoError(t, bs[1].Reset())
	syncAll(ms)
	for i, b := range bs {
		s := b.Snapshot()
		assert.Equal(t, breaker.Closed, s.State, "manager %d after a Reset elsewhere", i)
		assert.False(t, s.Forced, "manager %d", i)
	}
	evs = drain(events)
	require.Len(t, evs, 1)
	assert.Equal(t, breaker.Transition{From: breaker.Open, To: breaker.Closed}, evs[0].Transition)
	assert.Equal(t, breaker.CauseShared, evs[0].Cause)

	// The fleet trips and opens as usual afterwards.
	fail(t, bs[2], 1)
	syncAll(ms)
	assert.True(t, allIn(bs, breaker.Open)())
}

// ForceOpen while another process probes fences the probe: its success,
// reported after the forcing, changes nothing, and the fleet stays forced.
func TestSharedForceOpenFencesAProbe(t *testing.T) {
	mock := clock.NewMock()
	ms, bs := fleet(t, 2, mock, store.NewMemory(mock), manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second, ProbeTimeout: time.Minute},
	})
	fail(t, bs[0], 1)
	// The opening in the store first (the period is 1s there, not what
	// is left of it when the loop gets to open it), then the period's end
	// for the other manager too, its lag after the opener's.
	syncAll(ms)
	mock.Add(time.Second + maxLag)
	syncAll(ms)
	p, err := bs[1].Acquire(context.Background())
	require.NoError(t, err)
	require.True(t, p.Probe())

	require.NoError(t, bs[0].ForceOpen())
	syncAll(ms)
	p.ReleaseOutcome(classify.Success)
	syncAll(ms)
	for i, b := range bs {
		s := b.Snapshot()
		assert.Equal(t, breaker.Open, s.State, "manager %d", i)
		assert.True(t, s.Forced, "manager %d stays forced after the fenced verdict", i)
	}
}

// A breaker forced open while its store is unreachable is forced here at
// once, and forces the fleet when the store answers again.
func TestSharedForceOpenDuringAnOutage(t *testing.T) {
	mock := clock.NewMock()
	mem := store.NewMemory(mock)
	st := &watched{Store: mem}
	m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, Resync: time.Second})
	t.Cleanup(m.Stop)
	other := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, Resync: time.Second})
	t.Cleanup(other.Stop)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: time.Second}}
	cfg.Store = st
	b := register(t, m, "svc", cfg)
	cfg.Store = mem
	ob := register(t, other, "svc", cfg)
	syncAll([]*manager.Manager{m, other})

	st.cut.Store(true)
	require.NoError(t, b.ForceOpen())
	m.Sync()
	require.True(t, b.Stats().StoreDown)
	require.True(t, b.Snapshot().Forced)
	other.Sync()
	assert.Equal(t, breaker.Closed, ob.State(), "the other process did not hear of it yet")

	st.cut.Store(false)
	mock.Add(time.Second)
	syncAll([]*manager.Manager{m, other, m})
	require.False(t, b.Stats().StoreDown, "the store is back")
	assert.True(t, b.Snapshot().Forced, "still forced here")
	assert.True(t, ob.Snapshot().Forced, "the fleet is forced once the store answers")
}

// panicking is a store whose every call panics once armed.
type panicking struct {
	store.Store
	armed atomic.Bool
}

func (p *panicking) boom() {
	if p.armed.Load() {
		panic("store bug")
	}
}

func (p *panicking) RecordFailure(ctx context.Context, name string, pol store.Policy, failures int64, n []int64) (store.Verdict, error) {
	p.boom()
	return p.Store.RecordFailure(ctx, name, pol, failures, n)
}

func (p *panicking) Open(ctx context.Context, name string, epoch uint64, d time.Duration, why store.Reason) (store.Status, bool, error) {
	p.boom()
	return p.Store.Open(ctx, name, epoch, d, why)
}

func (p *panicking) Status(ctx context.Context, names []string) ([]store.Status, error) {
	p.boom()
	return p.Store.Status(ctx, names)
}

func (p *panicking) Reset(ctx context.Context, name string) (store.Status, error) {
	p.boom()
	return p.Store.Reset(ctx, name)
}

func (p *panicking) ForceOpen(ctx context.Context, name string) (store.Status, error) {
	p.boom()
	return p.Store.ForceOpen(ctx, name)
}

// A store that panics, on a caller's goroutine or on the manager's, is a
// store that fails: the breaker falls back, counts the error, and the
// process goes on.
func TestSharedPanickingStore(t *testing.T) {
	mock := clock.NewMock()
	st := &panicking{Store: store.NewMemory(mock)}
	m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger, Resync: time.Second})
	t.Cleanup(m.Stop)
	b := register(t, m, "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 2}, Store: st, Recover: recover.BasicTimeout{Open: time.Minute}})
	m.Sync()
	st.armed.Store(true) // the manager's goroutines are idle: no call is in flight

	fail(t, b, 1)
	m.Sync()
	require.True(t, b.Stats().StoreDown, "a panic in RecordFailure falls back")
	// The report, and the read of the breaker that says when the store
	// answers it again: it panics too.
	assert.GreaterOrEqual(t, b.Stats().StoreErrors, uint64(1))
	fail(t, b, 1)
	require.Equal(t, breaker.Open, b.State(), "the local fallback trips")
	require.NoError(t, b.ForceOpen())
	require.NoError(t, b.Reset())
	mock.Add(time.Second) // the resync's Status panics on the manager's side
	m.Sync()
	assert.True(t, b.Stats().StoreDown)
	select {
	case <-m.Done():
		t.Fatal("the manager stopped")
	default:
	}
}
