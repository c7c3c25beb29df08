package bench_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/sony/gobreaker/v2"
)

// The libraries and paths measured side by side, in the order of the
// report's columns.
const (
	libFusebox          = "fusebox"             // Acquire and Release (Do in the Do case)
	libGobreaker        = "gobreaker"           // CircuitBreaker[any].Execute
	libGobreakerTwoStep = "gobreaker-twostep"   // TwoStepCircuitBreaker[any].Allow and done
	libFailsafe         = "failsafe"            // failsafe.With(cb), built once, then Run
	libFailsafeCB       = "failsafe-standalone" // cb.TryAcquirePermit and RecordSuccess
)

// modes runs every case on one goroutine and with b.RunParallel.
var modes = []struct {
	name     string
	parallel bool
}{{"serial", false}, {"parallel", true}}

// BenchmarkClosed measures a successful call through a closed breaker.
func BenchmarkClosed(b *testing.B) {
	for _, p := range []policy{consecutive, failureRate} {
		b.Run(p.String(), func(b *testing.B) {
			for _, mode := range modes {
				b.Run(mode.name, func(b *testing.B) {
					par := mode.parallel
					b.Run("lib="+libFusebox, func(b *testing.B) {
						br := newFusebox(b, startManager(b), "bench", p)
						fuseboxAcquireRelease(b, []*manager.Breaker{br}, false, par)
					})
					b.Run("lib="+libGobreaker, func(b *testing.B) {
						gobreakerExecute(b, []*gobreaker.CircuitBreaker[any]{newGobreaker(p)}, false, par)
					})
					b.Run("lib="+libGobreakerTwoStep, func(b *testing.B) {
						gobreakerAllow(b, []*gobreaker.TwoStepCircuitBreaker[any]{newGobreakerTwoStep(p)}, false, par)
					})
					b.Run("lib="+libFailsafe, func(b *testing.B) {
						ex := newFailsafeExecutor(newFailsafe(p))
						failsafeRun(b, ex, par)
					})
					b.Run("lib="+libFailsafeCB, func(b *testing.B) {
						failsafePermit(b, []circuitbreaker.CircuitBreaker[any]{newFailsafe(p)}, false, par)
					})
				})
			}
		})
	}
}

// BenchmarkDeclined measures a call declined by an open breaker.
func BenchmarkDeclined(b *testing.B) {
	for _, mode := range modes {
		b.Run(mode.name, func(b *testing.B) {
			par := mode.parallel
			b.Run("lib="+libFusebox, func(b *testing.B) {
				br := newFusebox(b, startManager(b), "bench", consecutive)
				tripFusebox(b, br)
				fuseboxDeclined(b, br, par)
			})
			b.Run("lib="+libGobreaker, func(b *testing.B) {
				cb := newGobreaker(consecutive)
				tripGobreaker(b, cb)
				gobreakerDeclined(b, cb, par)
			})
			b.Run("lib="+libGobreakerTwoStep, func(b *testing.B) {
				cb := newGobreakerTwoStep(consecutive)
				tripGobreakerTwoStep(b, cb)
				gobreakerTwoStepDeclined(b, cb, par)
			})
			b.Run("lib="+libFailsafe, func(b *testing.B) {
				cb := newFailsafe(consecutive)
				tripFailsafe(b, cb)
				failsafeRunDeclined(b, newFailsafeExecutor(cb), par)
			})
			b.Run("lib="+libFailsafeCB, func(b *testing.B) {
				cb := newFailsafe(consecutive)
				tripFailsafe(b, cb)
				failsafePermitDeclined(b, cb, par)
			})
		})
	}
}

// BenchmarkDo measures each library's wrapper around a function that
// returns nil, through a closed breaker with the consecutive policy.
func BenchmarkDo(b *testing.B) {
	for _, mode := range modes {
		b.Run(mode.name, func(b *testing.B) {
			par := mode.parallel
			b.Run("lib="+libFusebox, func(b *testing.B) {
				fuseboxDo(b, newFusebox(b, startManager(b), "bench", consecutive), par)
			})
			b.Run("lib="+libGobreaker, func(b *testing.B) {
				gobreakerExecute(b, []*gobreaker.CircuitBreaker[any]{newGobreaker(consecutive)}, false, par)
			})
			b.Run("lib="+libFailsafe, func(b *testing.B) {
				failsafeRun(b, newFailsafeExecutor(newFailsafe(consecutive)), par)
			})
		})
	}
}

// BenchmarkRandom measures a successful call through a closed breaker
// picked at random among 10,000 (consecutive policy): each call is likely to
// miss the caches that the previous calls warmed. The indices are drawn
// before the timed loop.
func BenchmarkRandom(b *testing.B) {
	for _, mode := range modes {
		b.Run(mode.name, func(b *testing.B) {
			par := mode.parallel
			b.Run("lib="+libFusebox, func(b *testing.B) {
				m := startManager(b)
				brs := make([]*manager.Breaker, nRandom)
				for i := range brs {
					brs[i] = newFusebox(b, m, breakerName(i), consecutive)
				}
				fuseboxAcquireRelease(b, brs, true, par)
			})
			b.Run("lib="+libGobreaker, func(b *testing.B) {
				cbs := make([]*gobreaker.CircuitBreaker[any], nRandom)
				for i := range cbs {
					cbs[i] = newGobreaker(consecutive)
				}
				gobreakerExecute(b, cbs, true, par)
			})
			b.Run("lib="+libGobreakerTwoStep, func(b *testing.B) {
				cbs := make([]*gobreaker.TwoStepCircuitBreaker[any], nRandom)
				for i := range cbs {
					cbs[i] = newGobreakerTwoStep(consecutive)
				}
				gobreakerAllow(b, cbs, true, par)
			})
			b.Run("lib="+libFailsafe, func(b *testing.B) {
				exs := make([]failsafeExecutor, nRandom)
				for i := range exs {
					exs[i] = newFailsafeExecutor(newFailsafe(consecutive))
				}
				failsafeRunRandom(b, exs, par)
			})
			b.Run("lib="+libFailsafeCB, func(b *testing.B) {
				cbs := make([]circuitbreaker.CircuitBreaker[any], nRandom)
				for i := range cbs {
					cbs[i] = newFailsafe(consecutive)
				}
				failsafePermit(b, cbs, true, par)
			})
		})
	}
}

// The loops. Each takes the breakers it calls; with random set it calls
// brs[randomIndices[i]] at its i-th call, otherwise brs[0]. In parallel,
// each goroutine starts at its own place in randomIndices. Every loop checks
// the result of every call, so that a benchmark measuring the wrong state
// fails instead of reporting a number.

// start returns where a goroutine of b.RunParallel starts in randomIndices.
func start(seq *atomic.Uint32) int { return int(seq.Add(1)) * 4099 }

func fuseboxAcquireRelease(b *testing.B, brs []*manager.Breaker, random, parallel bool) {
	ctx := context.Background()
	pick := func(i int) *manager.Breaker {
		if random {
			return brs[randomIndices[i&randomMask]]
		}
		return brs[0]
	}
	b.ReportAllocs()
	if parallel {
		var seq atomic.Uint32
		b.ResetTimer() // the setup is not part of the measure
		b.RunParallel(func(pb *testing.PB) {
			for i := start(&seq); pb.Next(); i++ {
				p, err := pick(i).Acquire(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				p.Release(nil)
			}
		})
		return
	}
	i := 0
	for b.Loop() {
		p, err := pick(i).Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		p.Release(nil)
		i++
	}
}

func fuseboxDeclined(b *testing.B, br *manager.Breaker, parallel bool) {
	ctx := context.Background()
	b.ReportAllocs()
	if parallel {
		b.ResetTimer() // the setup is not part of the measure
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := br.Acquire(ctx); err == nil {
					b.Error("fusebox: open breaker admitted a call")
					return
				}
			}
		})
		return
	}
	for b.Loop() {
		if _, err := br.Acquire(ctx); err == nil {
			b.Fatal("fusebox: open breaker admitted a call")
		}
	}
}

func fuseboxDo(b *testing.B, br *manager.Breaker, parallel bool) {
	ctx := context.Background()
	b.ReportAllocs()
	if parallel {
		b.ResetTimer() // the setup is not part of the measure
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := br.Do(ctx, okCtx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		return
	}
	for b.Loop() {
		if err := br.Do(ctx, okCtx); err != nil {
			b.Fatal(err)
		}
	}
}

func gobreakerExecute(b *testing.B, cbs []*gobreaker.CircuitBreaker[any], random, parallel bool) {
	pick := func(i int) *gobreaker.CircuitBreaker[any] {
		if random {
			return cbs[randomIndices[i&randomMask]]
		}
		return cbs[0]
	}
	b.ReportAllocs()
	if parallel {
		var seq atomic.Uint32
		b.ResetTimer() // the setup is not part of the measure
		b.RunParallel(func(pb *testing.PB) {
			for i := start(&seq); pb.Next(); i++ {
				if _, err := pick(i).Execute(okAny); err != nil {
					b.Error(err)
					return
				}
			}
		})
		return
	}
	i := 0
	for b.Loop() {
		if _, err := pick(i).Execute(okAny); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func gobreakerAllow(b *testing.B, cbs []*gobreaker.TwoStepCircuitBreaker[any], random, parallel bool) {
	pick := func(i int) *gobreaker.TwoStepCircuitBreaker[any] {
		if random {
			return cbs[randomIndices[i&randomMask]]
		}
		return cbs[0]
	}
	b.ReportAllocs()
	if parallel {
		var seq atomic.Uint32
		b.ResetTimer() // the setup is not part of the measure
		b.RunParallel(func(pb *testing.PB) {
			for i := start(&seq); pb.Next(); i++ {
				done, err := pick(i).Allow()
				if err != nil {
					b.Error(err)
					return
				}
				done(nil)
			}
		})
		return
	}
	i := 0
	for b.Loop() {
		done, err := pick(i).Allow()
		if err != nil {
			b.Fatal(err)
		}
		done(nil)
		i++
	}
}

func gobreakerDeclined(b *testing.B, cb *gobreaker.CircuitBreaker[any], parallel bool) {
	b.ReportAllocs()
	if parallel {
		b.ResetTimer() // the setup is not part of the measure
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := cb.Execute(okAny); err == nil {
					b.Error("gobreaker: open breaker admitted a call")
					return
				}
			}
		})
		return
	}
	for b.Loop() {
		if _, err := cb.Execute(okAny); err == nil {
			b.Fatal("gobreaker: open breaker admitted a call")
		}
	}
}

func gobreakerTwoStepDeclined(b *testing.B, cb *gobreaker.TwoStepCircuitBreaker[any], parallel bool) {
	b.ReportAllocs()
	if parallel {
		b.ResetTimer() // the setup is not part of the measure
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := cb.Allow(); err == nil {
					b.Error("gobreaker two-step: open breaker admitted a call")
					return
				}
			}
		})
		return
	}
	for b.Loop() {
		if _, err := cb.Allow(); err == nil {
			b.Fatal("gobreaker two-step: open breaker admitted a call")
		}
	}
}

type failsafeExecutor = interface{ Run(func() error) error }

func failsafeRun(b *testing.B, ex failsafeExecutor, parallel bool) {
	failsafeRunRandom(b, []failsafeExecutor{ex}, parallel)
}

func failsafeRunRandom(b *testing.B, exs []failsafeExecutor, parallel bool) {
	random := len(exs) > 1
	pick := func(i int) failsafeExecutor {
		if random {
			return exs[randomIndices[i&randomMask]]
		}
		return exs[0]
	}
	b.ReportAllocs()
	if parallel {
		var seq atomic.Uint32
		b.ResetTimer() // the setup is not part of the measure
		b.RunParallel(func(pb *testing.PB) {
			for i := start(&seq); pb.Next(); i++ {
				if err := pick(i).Run(okErr); err != nil {
					b.Error(err)
					return
				}
			}
		})
		return
	}
	i := 0
	for b.Loop() {
		if err := pick(i).Run(okErr); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func failsafeRunDeclined(b *testing.B, ex failsafeExecutor, parallel bool) {
	b.ReportAllocs()
	if parallel {
		b.ResetTimer() // the setup is not part of the measure
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := ex.Run(okErr); err == nil {
					b.Error("failsafe: open breaker admitted a call")
					return
				}
			}
		})
		return
	}
	for b.Loop() {
		if err := ex.Run(okErr); err == nil {
			b.Fatal("failsafe: open breaker admitted a call")
		}
	}
}

func failsafePermit(b *testing.B, cbs []circuitbreaker.CircuitBreaker[any], random, parallel bool) {
	pick := func(i int) circuitbreaker.CircuitBreaker[any] {
		if random {
			return cbs[randomIndices[i&randomMask]]
		}
		return cbs[0]
	}
	b.ReportAllocs()
	if parallel {
		var seq atomic.Uint32
		b.ResetTimer() // the setup is not part of the measure
		b.RunParallel(func(pb *testing.PB) {
			for i := start(&seq); pb.Next(); i++ {
				cb := pick(i)
				if !cb.TryAcquirePermit() {
					b.Error("failsafe standalone: closed breaker declined a call")
					return
				}
				cb.RecordSuccess()
			}
		})
		return
	}
	i := 0
	for b.Loop() {
		cb := pick(i)
		if !cb.TryAcquirePermit() {
			b.Fatal("failsafe standalone: closed breaker declined a call")
		}
		cb.RecordSuccess()
		i++
	}
}

func failsafePermitDeclined(b *testing.B, cb circuitbreaker.CircuitBreaker[any], parallel bool) {
	b.ReportAllocs()
	if parallel {
		b.ResetTimer() // the setup is not part of the measure
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if cb.TryAcquirePermit() {
					b.Error("failsafe standalone: open breaker admitted a call")
					return
				}
			}
		})
		return
	}
	for b.Loop() {
		if cb.TryAcquirePermit() {
			b.Fatal("failsafe standalone: open breaker admitted a call")
		}
	}
}
