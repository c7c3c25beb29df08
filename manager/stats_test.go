package manager_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// After a scripted sequence every counter is exact and Calls is their sum.
func TestStatsAddUp(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "stats", manager.Config{
		Strategy: breaker.Consecutive{Failures: 3},
		Recover:  recover.BasicTimeout{Open: 2 * time.Second, ProbeTimeout: time.Second},
	})
	ctx := context.Background()
	t0 := mock.Now()

	st := b.Stats()
	assert.Equal(t, manager.Stats{Name: "stats", State: breaker.Closed, Since: t0, Admitted: 1}, st, "a new breaker")

	release(t, b, nil)              // success 1
	release(t, b, nil)              // success 2
	release(t, b, context.Canceled) // ignored 1
	held, err := b.Acquire(ctx)     // in flight: not a call yet
	require.NoError(t, err)
	fail(t, b, 3) // failures 1-3: trips
	st = b.Stats()
	assert.Equal(t, uint64(6), st.Calls, "the held permit is not counted yet")

	advance(m, mock, 500*time.Millisecond)
	tripAt := t0
	st = b.Stats()
	assert.Equal(t, breaker.Open, st.State)
	assert.Equal(t, tripAt, st.Since)
	assert.Equal(t, tripAt.Add(2*time.Second), st.Until)
	assert.False(t, st.Forced)

	for range 4 { // declined 1-4
		declined(t, b)
	}
	assert.ErrorIs(t, b.Do(ctx, func(context.Context) error { return nil }), breaker.ErrOpen) // declined 5
	held.Release(nil)                                                                         // success 3, stale 1

	advance(m, mock, 1500*time.Millisecond)
	halfAt := mock.Now()
	st = b.Stats()
	assert.Equal(t, breaker.HalfOpen, st.State)
	assert.Equal(t, halfAt, st.Since)
	assert.True(t, st.Until.IsZero())

	p := probe(t, b)
	m.Sync()
	st = b.Stats()
	assert.Equal(t, breaker.Probing, st.State)
	assert.Equal(t, halfAt, st.Since)
	assert.Equal(t, halfAt.Add(time.Second), st.Until)
	declined(t, b) // declined 6
	advance(m, mock, time.Second)
	p.ReleaseOutcome(classify.Failure) // failure 4, stale 2

	p = probe(t, b)
	p.Release(nil)     // success 4
	release(t, b, nil) // success 5

	st = b.Stats()
	want := manager.Stats{
		Name:      "stats",
		State:     breaker.Closed,
		Since:     mock.Now(),
		Admitted:  1,
		Successes: 5,
		Failures:  4,
		Ignored:   1,
		Declined:  6,
		Stale:     2,
		Calls:     16,
	}
	assert.Equal(t, want, st)
	assert.Equal(t, st.Successes+st.Failures+st.Ignored+st.Declined, st.Calls)
}

// Counters stay exact when many goroutines call at once.
func TestStatsConcurrent(t *testing.T) {
	m, _ := startMock(t)
	b := register(t, m, "busy", manager.Config{Strategy: breaker.Consecutive{Failures: 1 << 30}})
	const workers, calls = 8, 2000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				p, err := b.Acquire(context.Background())
				if err != nil {
					t.Errorf("worker %d call %d: %v", w, i, err)
					return
				}
				switch i % 4 {
				case 0, 1:
					p.Release(nil)
				case 2:
					p.Release(errBoom)
				case 3:
					p.Release(context.Canceled)
				}
			}
		}()
	}
	wg.Wait()
	st := b.Stats()
	assert.Equal(t, uint64(workers*calls/2), st.Successes)
	assert.Equal(t, uint64(workers*calls/4), st.Failures)
	assert.Equal(t, uint64(workers*calls/4), st.Ignored)
	assert.Equal(t, uint64(workers*calls), st.Calls)
	assert.Zero(t, st.Stale)
	assert.Equal(t, breaker.Closed, st.State)
}

// Declined calls from many goroutines are all counted.
func TestStatsDeclinedConcurrent(t *testing.T) {
	m, _ := startMock(t)
	b := register(t, m, "open", manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	fail(t, b, 1)
	const workers, calls = 8, 1000
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				if _, err := b.Acquire(context.Background()); err == nil {
					t.Error("an open breaker admitted a call")
					return
				}
			}
		}()
	}
	wg.Wait()
	st := b.Stats()
	assert.Equal(t, uint64(workers*calls), st.Declined)
	assert.Equal(t, uint64(workers*calls+1), st.Calls)
}

// Snapshot agrees with Stats and State.
func TestSnapshot(t *testing.T) {
	m, mock := startMock(t)
	b := register(t, m, "snap", manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: time.Second},
	})
	fail(t, b, 1)
	m.Sync()
	s := b.Snapshot()
	assert.Equal(t, breaker.Open, s.State)
	assert.Equal(t, mock.Now().Add(time.Second), s.Until)
	assert.Equal(t, b.State(), s.State)
	assert.Equal(t, b.Stats().Until, s.Until)
	assert.False(t, s.Forced)
	assert.Same(t, m.Clock(), mock)
}
