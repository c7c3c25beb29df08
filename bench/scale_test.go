package bench_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// stepClock is a mock clock whose time moves only when the benchmark steps
// it. Timers come from an embedded clock.Mock that is never advanced, so
// they never fire: the manager handles every deadline due at Now() when
// Sync asks it to (Manager.Sync's contract), which is what a timer would
// have woken it for. clock.Mock itself is not used to move time because its
// Add sleeps a millisecond to let other goroutines run; at 1,000 breakers
// that sleep would be as long as the work measured and would hide how the
// manager scales.
type stepClock struct {
	*clock.Mock
	now atomic.Int64 // Unix nanoseconds
}

func newStepClock() *stepClock {
	c := &stepClock{Mock: clock.NewMock()}
	c.now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *stepClock) Now() time.Time                  { return time.Unix(0, c.now.Load()) }
func (c *stepClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *stepClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }
func (c *stepClock) step(d time.Duration)            { c.now.Add(int64(d)) }

// scaleOpen is the open period, and the probe's time, of every breaker of
// the scale benchmark.
const scaleOpen = time.Second

// scaleConfig is the configuration of policy p for the scale benchmark: the
// same strategies as in the side-by-side cases, except that the first
// failure trips the breaker (Consecutive with Failures 1, FailureRate with
// MinCalls 1), so that each trip costs one call and the cycle measures the
// manager rather than the calls that fill a window. The size of a breaker
// does not depend on either number.
func scaleConfig(p policy) manager.Config {
	cfg := manager.Config{
		Strategy: breaker.Consecutive{Failures: 1},
		Recover:  recover.BasicTimeout{Open: scaleOpen},
	}
	if p == failureRate {
		cfg.Strategy = breaker.FailureRate{Rate: rate, Window: window, MinCalls: 1}
	}
	return cfg
}

// heapAlloc returns the live heap after a full collection.
func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkScale registers n breakers with one manager and then, in each
// iteration, takes all of them around the cycle: trip every breaker with a
// failed call (closed -> open), step the clock past the open period and Sync
// (open -> half_open, made by the manager's deadline heap), and let one
// probe through each and succeed (half_open -> probing -> closed). That is 4n
// transitions an iteration. It reports:
//
//   - ns/transition: the wall time of the cycle divided by its 4n
//     transitions. The caller's goroutine makes the calls while the
//     manager's goroutine handles the notes on the other core; the time ends
//     when Sync returns, so it covers the manager's work in full.
//   - ns/expiry: the time of the Sync that ends the open periods, divided by
//     n. The caller only waits there: it is the manager's own time for a
//     timer transition (popping the heap, the compare-and-swap, the event).
//   - B/breaker: the live heap after registering the n breakers less the
//     live heap before, divided by n. The names are made before the first
//     measurement: they belong to the caller.
//   - B/breaker-cycled: the same after the cycles, when the deadline heap
//     has grown to its steady size and each breaker holds a fresh snapshot.
//
// Between phases, and outside the times above, it checks that every breaker
// is in the expected state. One cycle runs before the measure, to reach the
// steady state.
func BenchmarkScale(b *testing.B) {
	for _, p := range []policy{consecutive, failureRate} {
		for _, n := range []int{1_000, 10_000, 100_000} {
			b.Run("policy="+p.String()+"/breakers="+strconv.Itoa(n), func(b *testing.B) {
				scale(b, p, n)
			})
		}
	}
}

func scale(b *testing.B, p policy, n int) {
	clk := newStepClock()
	m := manager.Start(manager.Options{Clock: clk, Logger: quiet})
	defer m.Stop()
	names := make([]string, n)
	for i := range names {
		names[i] = breakerName(i)
	}
	brs := make([]*manager.Breaker, n)
	cfg := scaleConfig(p)

	before := heapAlloc()
	for i := range brs {
		br, err := m.Register(names[i], cfg)
		if err != nil {
			b.Fatal(err)
		}
		brs[i] = br
	}
	registered := heapAlloc()

	ctx := context.Background()
	check := func(phase string, want breaker.State) {
		for i, br := range brs {
			if st := br.State(); st != want {
				b.Fatalf("%s: breaker %d is %v, want %v", phase, i, st, want)
			}
		}
	}
	// run takes every breaker around the cycle once and returns the time
	// of the cycle and of its expiry phase, without the checks.
	run := func() (cycle, expire time.Duration) {
		t0 := time.Now()
		for _, br := range brs {
			pm, err := br.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			pm.Release(errBoom)
		}
		m.Sync()
		t1 := time.Now()
		b.StopTimer()
		check("after the trip", breaker.Open)
		b.StartTimer()

		t2 := time.Now()
		clk.step(scaleOpen + time.Nanosecond)
		m.Sync()
		t3 := time.Now()
		b.StopTimer()
		check("after the open period", breaker.HalfOpen)
		b.StartTimer()

		t4 := time.Now()
		for _, br := range brs {
			pm, err := br.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if !pm.Probe() {
				b.Fatal("a half-open breaker granted a permit that is not the probe")
			}
			pm.Release(nil)
		}
		m.Sync()
		t5 := time.Now()
		b.StopTimer()
		check("after the probes", breaker.Closed)
		b.StartTimer()
		return t1.Sub(t0) + t3.Sub(t2) + t5.Sub(t4), t3.Sub(t2)
	}

	// One cycle before the measure, so that the deadline heap and the
	// runtime's spans have grown to their steady size: with 100,000
	// breakers a benchmark time of a second holds only two or three
	// cycles, and a cold first one would weigh on them.
	run()

	var cycle, expire time.Duration
	cycles := 0
	b.ReportAllocs()
	for b.Loop() {
		c, e := run()
		cycle += c
		expire += e
		cycles++
	}
	b.StopTimer()
	cycled := heapAlloc()
	runtime.KeepAlive(names)
	runtime.KeepAlive(brs)

	b.ReportMetric(float64(cycle.Nanoseconds())/float64(4*n*cycles), "ns/transition")
	b.ReportMetric(float64(expire.Nanoseconds())/float64(n*cycles), "ns/expiry")
	b.ReportMetric(perBreaker(registered, before, n), "B/breaker")
	b.ReportMetric(perBreaker(cycled, before, n), "B/breaker-cycled")
}

func perBreaker(after, before uint64, n int) float64 {
	return (float64(after) - float64(before)) / float64(n)
}
