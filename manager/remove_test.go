package manager_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

func TestRemoveOldHandle(t *testing.T) {
	for _, st := range []breaker.State{breaker.Closed, breaker.Open, breaker.HalfOpen, breaker.Probing} {
		t.Run(st.String(), func(t *testing.T) {
			m, mock := startMock(t)
			b := register(t, m, "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
			var inFlight manager.Permit
			switch st {
			case breaker.Closed:
				var err error
				inFlight, err = b.Acquire(context.Background())
				require.NoError(t, err)
			default:
				fail(t, b, 1)
				if st != breaker.Open {
					advance(m, mock, 30*time.Second)
				}
				if st == breaker.Probing {
					inFlight = probe(t, b)
				}
			}
			requireState(t, b, st, "before Remove")

			require.True(t, m.Remove("svc"), "svc was registered")
			assert.False(t, m.Remove("svc"), "a second Remove finds nothing")
			_, ok := m.Breaker("svc")
			assert.False(t, ok, "the name is free")
			assert.Empty(t, m.Breakers())

			ctx := context.Background()
			_, err := b.Acquire(ctx)
			assert.ErrorIs(t, err, manager.ErrRemoved, "Acquire")
			called := false
			err = b.Do(ctx, func(context.Context) error { called = true; return nil })
			assert.ErrorIs(t, err, manager.ErrRemoved, "Do")
			assert.False(t, called, "Do does not call fn through a removed breaker")
			_, err = manager.Call(ctx, b, func(context.Context) (int, error) { return 1, nil })
			assert.ErrorIs(t, err, manager.ErrRemoved, "Call")
			assert.ErrorIs(t, b.ForceOpen(), manager.ErrRemoved, "ForceOpen")
			assert.ErrorIs(t, b.Reset(), manager.ErrRemoved, "Reset")
			assert.ErrorIs(t, b.Reconfigure(manager.Config{}), manager.ErrRemoved, "Reconfigure")

			before := b.Stats()
			inFlight.Release(errBoom) // a permit from before: stale, or nothing for the zero permit
			after := b.Stats()
			if st == breaker.Closed || st == breaker.Probing {
				assert.Equal(t, before.Stale+1, after.Stale, "a permit granted before the removal is stale")
			}
			assert.Equal(t, st, b.State(), "State keeps the state the breaker was in")
			assert.True(t, after.Removed, "Stats says removed")
			assert.Equal(t, st, after.State)
			assert.True(t, b.Snapshot().Removed)
			assert.True(t, b.Snapshot().Halted)

			advance(m, mock, time.Hour)
			assert.Equal(t, st, b.State(), "no timer of the removed breaker fires")
		})
	}
}

func TestRemoveThenRegisterStartsFresh(t *testing.T) {
	m, mock := startMock(t)
	old := register(t, m, "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 2}})
	fail(t, old, 1)
	release(t, old, nil)
	fail(t, old, 1)
	require.True(t, m.Remove("svc"))

	b := register(t, m, "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 2}})
	require.NotSame(t, old, b)
	got, ok := m.Breaker("svc")
	require.True(t, ok)
	assert.Same(t, b, got)
	s := b.Stats()
	assert.Equal(t, breaker.Closed, s.State)
	assert.Zero(t, s.Calls, "fresh counters")
	assert.False(t, s.Removed)
	assert.Equal(t, uint64(1), b.Snapshot().Gen, "the first generation")
	fail(t, b, 1)
	requireState(t, b, breaker.Closed, "the failure of the old breaker does not count")
	fail(t, b, 1)
	requireState(t, b, breaker.Open, "two failures of its own trip it")
	_, err := old.Acquire(context.Background())
	assert.ErrorIs(t, err, manager.ErrRemoved, "the old handle stays removed")
	advance(m, mock, 30*time.Second)
	requireState(t, b, breaker.HalfOpen, "the new breaker's timer runs")
}

func TestRemoveEvent(t *testing.T) {
	m, mock := startMock(t)
	ch, stop := m.Subscribe(16)
	defer stop()
	b := register(t, m, "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	other := register(t, m, "other", manager.Config{})
	fail(t, b, 1)
	m.Sync()
	require.True(t, m.Remove("svc"))
	advance(m, mock, time.Hour)
	evs := drain(ch)
	require.Len(t, evs, 2, "the trip, then the removal: %v", evs)
	assert.Equal(t, manager.EventTransition, evs[0].Kind)
	last := evs[1]
	assert.Equal(t, manager.Event{Kind: manager.EventRemoved, Name: "svc", At: mock.Now().Add(-time.Hour), Gen: evs[0].Gen + 1}, last)
	assert.Equal(t, "removed", last.Kind.String())

	assert.False(t, m.Remove("nothing"), "an unknown name")
	assert.Empty(t, drain(ch), "no event for a name that was not registered")
	requireState(t, other, breaker.Closed, "the other breaker is untouched")
}

func TestRemoveDropsTimers(t *testing.T) {
	m, mock := startMock(t)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: recover.BasicTimeout{Open: time.Minute}}
	keep := register(t, m, "keep", cfg)
	gone := register(t, m, "gone", cfg)
	fail(t, gone, 1)
	advance(m, mock, 30*time.Second)
	fail(t, keep, 1)
	require.True(t, m.Remove("gone"))
	advance(m, mock, 30*time.Second)
	requireState(t, keep, breaker.Open, "keep's period has 30s to go")
	advance(m, mock, 30*time.Second)
	requireState(t, keep, breaker.HalfOpen, "keep's timer still fires once gone's is dropped")
}

func TestRemoveAfterStop(t *testing.T) {
	m, _ := startMock(t)
	b := register(t, m, "svc", manager.Config{})
	m.Stop()
	assert.False(t, m.Remove("svc"), "a stopped manager removes nothing")
	_, err := b.Acquire(context.Background())
	assert.ErrorIs(t, err, manager.ErrStopped)
}

func TestRemoveShared(t *testing.T) {
	m, mock := startMock(t)
	mem := store.NewMemory(mock)
	cfg := manager.Config{Strategy: breaker.Consecutive{Failures: 2}, Store: mem}
	b := register(t, m, "svc", cfg)
	fail(t, b, 1)
	require.True(t, m.Remove("svc"))
	_, err := b.Acquire(context.Background())
	assert.ErrorIs(t, err, manager.ErrRemoved)
	advance(m, mock, 2*time.Second) // a resync (every second by default) finds no breaker on the hub

	again := register(t, m, "svc", cfg)
	fail(t, again, 1)
	requireState(t, again, breaker.Open, "the store kept the fleet's count: the failure before the removal still counts")
	m.Sync()
	assert.Equal(t, breaker.Closed, b.State(), "the removed handle no longer mirrors the store")
}

// TestRemoveRace removes a breaker while callers acquire and release
// through it: every call either went through or got ErrRemoved, and the
// manager's loop survives (run with -race).
func TestRemoveRace(t *testing.T) {
	m, _ := startMock(t)
	for round := range 20 {
		b := register(t, m, "svc", manager.Config{Strategy: breaker.Consecutive{Failures: 3}})
		done := make(chan error, 4)
		for g := range 4 {
			go func() {
				for i := 0; ; i++ {
					err := b.Do(context.Background(), func(context.Context) error {
						if (i+g)%2 == 0 {
							return errBoom
						}
						return nil
					})
					switch {
					case err == nil, err == errBoom, errorsIsOpen(err):
					default:
						done <- err
						return
					}
				}
			}()
		}
		require.True(t, m.Remove("svc"), "round %d", round)
		for range 4 {
			assert.ErrorIs(t, <-done, manager.ErrRemoved, "round %d", round)
		}
	}
	m.Sync()
	assert.Empty(t, m.Breakers())
}

func errorsIsOpen(err error) bool {
	_, ok := err.(*breaker.OpenError)
	return ok
}

// heapAfterGC returns the live heap after a collection.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestRemoveHeapFlat registers and removes 10,000 breakers, some of them
// open with a timer pending, with a subscriber: the heap afterwards is
// within a bound of what it was after the first hundred cycles.
func TestRemoveHeapFlat(t *testing.T) {
	m, _ := startMock(t)
	ch, stop := m.Subscribe(1)
	defer stop()
	cfg := manager.Config{
		Strategy: breaker.FailureRate{Rate: 0.5, Window: 100, MinCalls: 1},
		Recover:  recover.BasicTimeout{Open: time.Hour},
	}
	cycle := func(i int) {
		name := fmt.Sprintf("host-%d", i)
		b, err := m.Register(name, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			p, _ := b.Acquire(context.Background())
			p.ReleaseOutcome(classify.Failure) // open, with an hour's timer
		}
		if !m.Remove(name) {
			t.Fatalf("Remove(%q) found nothing", name)
		}
		drain(ch)
	}
	for i := range 100 {
		cycle(i)
	}
	m.Sync()
	base := heapAfterGC()
	for i := 100; i < 10_100; i++ {
		cycle(i)
	}
	m.Sync()
	grown := int64(heapAfterGC()) - int64(base)
	t.Logf("heap after 100 cycles: %d B; after 10,100: %+d B", base, grown)
	// A breaker kept would be about 1 KiB: 10,000 kept would be 10 MB.
	assert.Less(t, grown, int64(256<<10), "10,000 register/remove cycles grew the heap by %d B", grown)
	assert.Empty(t, m.Breakers())
}

// BenchmarkRegisterRemove is one register/remove cycle of a breaker with
// a fresh name.
func BenchmarkRegisterRemove(b *testing.B) {
	m := manager.Start(manager.Options{Logger: quietLogger})
	defer m.Stop()
	names := make([]string, 1024)
	for i := range names {
		names[i] = fmt.Sprintf("host-%d", i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		name := names[i%len(names)]
		if _, err := m.Register(name, manager.Config{}); err != nil {
			b.Fatal(err)
		}
		m.Remove(name)
		i++
	}
}

// The error of a call through a removed breaker names it, and still
// matches ErrRemoved; a shared breaker's too.
func TestRemovedErrorNamesTheBreaker(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			m, mock := startMock(t)
			cfg := manager.Config{}
			if shared {
				cfg.Store = store.NewMemory(mock)
			}
			b := register(t, m, "payments", cfg)
			register(t, m, "inventory", cfg)
			require.True(t, m.Remove("payments"))
			ctx := context.Background()
			_, acquire := b.Acquire(ctx)
			_, call := manager.Call(ctx, b, func(context.Context) (int, error) { return 1, nil })
			for method, err := range map[string]error{
				"Acquire":     acquire,
				"Do":          b.Do(ctx, func(context.Context) error { return nil }),
				"Call":        call,
				"ForceOpen":   b.ForceOpen(),
				"Reset":       b.Reset(),
				"Reconfigure": b.Reconfigure(manager.Config{}),
			} {
				assert.ErrorIs(t, err, manager.ErrRemoved, method)
				if assert.Error(t, err, method) {
					assert.Contains(t, err.Error(), `breaker "payments" removed`, "%s: the error names the breaker", method)
				}
			}
		})
	}
}

// timeoutBlocker is a Recover whose Timeout blocks until released: the
// manager's goroutine is stuck in it meanwhile.
type timeoutBlocker struct {
	started, release chan struct{}
}

func (timeoutBlocker) Init() (any, error) { return nil, nil }

func (r timeoutBlocker) Timeout(recover.Context, any) (time.Duration, any) {
	close(r.started)
	<-r.release
	return time.Hour, nil
}

// Register and Remove of breakers that are not shared do not wait for the
// manager's goroutine: both return while it is stuck in a callback, and
// the removal's event comes, with the instant of the Remove, once it is
// free.
func TestRegisterAndRemoveDoNotWaitForTheLoop(t *testing.T) {
	m, mock := startMock(t)
	ch, stop := m.Subscribe(16)
	defer stop()
	rec := timeoutBlocker{started: make(chan struct{}), release: make(chan struct{})}
	stuck := register(t, m, "stuck", manager.Config{Strategy: breaker.Consecutive{Failures: 1}, Recover: rec})
	gone := register(t, m, "gone", manager.Config{})
	fail(t, stuck, 1)
	<-rec.started
	at := mock.Now()
	within(t, "Register while the loop is stuck", func() { register(t, m, "new", manager.Config{}) })
	within(t, "Remove while the loop is stuck", func() { assert.True(t, m.Remove("gone")) })
	_, err := gone.Acquire(context.Background())
	assert.ErrorIs(t, err, manager.ErrRemoved, "the handle is removed when Remove returns")
	_, ok := m.Breaker("gone")
	assert.False(t, ok, "and the name free")
	mock.Add(time.Minute)
	close(rec.release)
	m.Sync()
	evs := drain(ch)
	require.Len(t, evs, 2, "the trip, then the removal: %v", evs)
	assert.Equal(t, manager.Event{Kind: manager.EventRemoved, Name: "gone", At: at, Gen: 2}, evs[1], "removal ends generation 1")
}
