package manager_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

func benchBreaker(b *testing.B, cfg manager.Config) (*manager.Manager, *manager.Breaker) {
	b.Helper()
	m := manager.Start(manager.Options{})
	b.Cleanup(m.Stop)
	br, err := m.Register("bench", cfg)
	if err != nil {
		b.Fatal(err)
	}
	return m, br
}

func BenchmarkAcquireRelease(b *testing.B) {
	_, br := benchBreaker(b, manager.Config{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, _ := br.Acquire(ctx)
		p.Release(nil)
	}
}

func BenchmarkAcquireReleaseParallel(b *testing.B) {
	_, br := benchBreaker(b, manager.Config{})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, _ := br.Acquire(ctx)
			p.Release(nil)
		}
	})
}

// BenchmarkAcquireReleaseSlowCall is BenchmarkAcquireRelease with calls
// timed (Config.SlowCall): the price of two clock reads per call.
func BenchmarkAcquireReleaseSlowCall(b *testing.B) {
	_, br := benchBreaker(b, manager.Config{SlowCall: time.Second})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, _ := br.Acquire(ctx)
		p.Release(nil)
	}
}

func BenchmarkAcquireReleaseSlowCallParallel(b *testing.B) {
	_, br := benchBreaker(b, manager.Config{SlowCall: time.Second})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, _ := br.Acquire(ctx)
			p.Release(nil)
		}
	})
}

func BenchmarkAcquireReleaseFailureRate(b *testing.B) {
	_, br := benchBreaker(b, manager.Config{Strategy: breaker.FailureRate{Rate: 0.5, Window: 100}})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, _ := br.Acquire(ctx)
			p.Release(nil)
		}
	})
}

func openBreaker(b *testing.B) *manager.Breaker {
	_, br := benchBreaker(b, manager.Config{Strategy: breaker.Consecutive{Failures: 1}})
	p, _ := br.Acquire(context.Background())
	p.Release(errors.New("boom"))
	if br.State() != breaker.Open {
		b.Fatal("not open")
	}
	return br
}

func BenchmarkDeclined(b *testing.B) {
	br := openBreaker(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		br.Acquire(ctx)
	}
}

func BenchmarkDeclinedParallel(b *testing.B) {
	br := openBreaker(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			br.Acquire(ctx)
		}
	})
}

func BenchmarkDo(b *testing.B) {
	_, br := benchBreaker(b, manager.Config{})
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		br.Do(ctx, fn)
	}
}

// BenchmarkTimeCalls measures what Config.TimeCalls costs a closed call:
// two reads of the real clock and one histogram update, side by side with
// the same call untimed.
func BenchmarkTimeCalls(b *testing.B) {
	for _, timed := range []bool{false, true} {
		name := "untimed"
		if timed {
			name = "timed"
		}
		b.Run(name, func(b *testing.B) {
			_, br := benchBreaker(b, manager.Config{TimeCalls: timed})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				p, _ := br.Acquire(ctx)
				p.Release(nil)
			}
		})
	}
}

// shiftedClock is the real clock, read shift later: a benchmark moves
// itself into a slow start without waiting for it.
type shiftedClock struct {
	clock.Clock
	shift atomic.Int64
}

func (c *shiftedClock) Now() time.Time { return time.Now().Add(time.Duration(c.shift.Load())) }

// slowStarting returns a breaker on the real clock that has just recovered
// with a SlowStart of 2h, read share of the way into it.
func slowStarting(b *testing.B, share float64) *manager.Breaker {
	b.Helper()
	clk := &shiftedClock{Clock: clock.New()}
	m := manager.Start(manager.Options{Clock: clk})
	b.Cleanup(m.Stop)
	br, err := m.Register("bench", manager.Config{
		Strategy:  breaker.Consecutive{Failures: 1},
		Recover:   recover.BasicTimeout{Open: time.Millisecond},
		SlowStart: 2 * time.Hour,
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	p, _ := br.Acquire(ctx)
	p.Release(errors.New("boom"))
	for deadline := time.Now().Add(10 * time.Second); br.State() != breaker.HalfOpen; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("not half_open after 10s")
		}
	}
	p, _ = br.Acquire(ctx)
	if !p.Probe() {
		b.Fatal("no probe")
	}
	p.Release(nil)
	clk.shift.Store(int64(share * float64(2*time.Hour)))
	m.Sync() // the manager works the share out again
	if st := br.Stats(); st.SlowStartUntil.IsZero() || st.Admitted < share-0.01 || st.Admitted > share+0.01 {
		b.Fatalf("admitted %v in the slow start, want %v", st.Admitted, share)
	}
	return br
}

// BenchmarkAcquireReleaseSlowStart is BenchmarkAcquireRelease in a slow
// start that admits a tenth, half, and nearly all of the calls: a clock
// read and a random draw per call, and a declined call's count.
func BenchmarkAcquireReleaseSlowStart(b *testing.B) {
	for _, share := range []float64{0.1, 0.5, 0.99} {
		b.Run(fmt.Sprintf("admitted=%v", share), func(b *testing.B) {
			br := slowStarting(b, share)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				p, err := br.Acquire(ctx)
				if err == nil {
					p.Release(nil)
				}
			}
		})
	}
}

func BenchmarkAcquireReleaseSlowStartParallel(b *testing.B) {
	br := slowStarting(b, 0.5)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := br.Acquire(ctx)
			if err == nil {
				p.Release(nil)
			}
		}
	})
}
