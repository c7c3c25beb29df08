package manager_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
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
