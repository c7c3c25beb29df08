package manager_test

import (
	"math"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// endOfTime is the latest instant a time.Time can hold.
var endOfTime = time.Unix(math.MaxInt64-62135596800, 999_999_999)

// addWithin advances the mock clock by d, failing the test if the clock's
// Add does not return: a timer that re-arms itself at once would keep it
// firing forever.
func addWithin(t *testing.T, m *manager.Manager, mock *clock.Mock, d time.Duration) {
	t.Helper()
	returned := make(chan struct{})
	go func() { mock.Add(d); close(returned) }()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatalf("mock.Add(%v) from %v did not return: a timer keeps firing", d, mock.Now())
	}
	m.Sync()
}

// The timers of a breaker keep to the periods of Recover on a clock far past
// 2262, where Unix nanoseconds end, up to the last instant time.Time holds.
func TestTimersFarFuture(t *testing.T) {
	for _, start := range []time.Time{
		time.Unix(0, math.MaxInt64).Add(-time.Second), // a second before Unix nanoseconds end
		time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(292_277_026_000, 1, 1, 0, 0, 0, 0, time.UTC),
		endOfTime.Add(-10 * time.Second),
	} {
		t.Run(start.Format("2006"), func(t *testing.T) {
			mock := clock.NewMock()
			mock.Set(start)
			m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger})
			defer m.Stop()
			b := register(t, m, "far", manager.Config{
				Strategy: breaker.Consecutive{Failures: 1},
				Recover:  recover.BasicTimeout{Open: 2 * time.Second, ProbeTimeout: time.Second},
			})
			tripAt := mock.Now()
			fail(t, b, 1)
			m.Sync()
			assert.Equal(t, tripAt.Add(2*time.Second), declined(t, b).Until, "the open period's end")
			addWithin(t, m, mock, 2*time.Second-time.Nanosecond)
			requireState(t, b, breaker.Open, "a nanosecond before the open period ends")
			addWithin(t, m, mock, time.Nanosecond)
			requireState(t, b, breaker.HalfOpen, "when the open period ends")
			p := probe(t, b)
			addWithin(t, m, mock, time.Second)
			requireState(t, b, breaker.HalfOpen, "when the probe's time is up")
			p.Release(nil) // stale: its time ran out
			assert.Equal(t, uint64(1), b.Stats().Stale)
		})
	}
}

// An open period longer than time.Time can hold after the trip lasts until
// the end of time: it neither wraps into the past, where it would fire at
// once, nor re-arms itself forever.
func TestTimersPeriodPastTheEndOfTime(t *testing.T) {
	for _, start := range []time.Time{
		time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC),
		endOfTime.Add(-time.Hour),
	} {
		t.Run(start.Format("2006"), func(t *testing.T) {
			mock := clock.NewMock()
			mock.Set(start)
			m := manager.Start(manager.Options{Clock: mock, Logger: quietLogger})
			defer m.Stop()
			b := register(t, m, "long", manager.Config{
				Strategy: breaker.Consecutive{Failures: 1},
				Recover:  recover.BasicTimeout{Open: math.MaxInt64},
			})
			tripAt := mock.Now()
			fail(t, b, 1)
			m.Sync()
			want := tripAt.Add(math.MaxInt64)
			if want.Before(tripAt) {
				want = endOfTime
			}
			require.Equal(t, want, declined(t, b).Until, "the open period's end")
			for range 3 {
				addWithin(t, m, mock, 100*365*24*time.Hour)
				if mock.Now().Before(want) {
					requireState(t, b, breaker.Open, "before the period ends")
				}
			}
			if !mock.Now().Before(want) {
				requireState(t, b, breaker.HalfOpen, "at the end of the period")
			}
		})
	}
}
