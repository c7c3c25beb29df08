package bench_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/sony/gobreaker/v2"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// policy is the trip rule every library is configured for in a case.
type policy int

const (
	// consecutive trips on the 5th failure in a row.
	consecutive policy = iota
	// failureRate trips when at least half of the last 100 calls failed
	// (see the doc of each library's constructor for how close each comes).
	failureRate
)

func (p policy) String() string {
	if p == failureRate {
		return "failurerate"
	}
	return "consecutive"
}

const (
	// tripAfter is the consecutive policy's threshold.
	tripAfter = 5
	// window and rate are the failure-rate policy's.
	window = 100
	rate   = 0.5
	// openFor is every breaker's open period: long enough that an open
	// breaker stays open for the whole benchmark.
	openFor = time.Hour
	// nRandom is how many breakers the Random case picks from.
	nRandom = 10_000
)

var errBoom = errors.New("boom")

// The functions the wrappers call. They are package-level so that no
// benchmark allocates a closure for them.
func okErr() error                { return nil }
func okAny() (any, error)         { return nil, nil }
func okCtx(context.Context) error { return nil }
func failAny() (any, error)       { return nil, errBoom }

// quiet is the logger of every manager started here: the benchmarks make
// nothing worth logging, and a stray line would break benchmark output.
var quiet = slog.New(slog.DiscardHandler)

// startManager starts a fusebox manager that stops when the benchmark or
// test ends.
func startManager(tb testing.TB) *manager.Manager {
	tb.Helper()
	m := manager.Start(manager.Options{Logger: quiet})
	tb.Cleanup(m.Stop)
	return m
}

// fuseboxConfig is the fusebox configuration of policy p.
func fuseboxConfig(p policy) manager.Config {
	cfg := manager.Config{
		Strategy: breaker.Consecutive{Failures: tripAfter},
		Recover:  recover.BasicTimeout{Open: openFor},
	}
	if p == failureRate {
		// MinCalls zero means Window: no trip before 100 calls.
		cfg.Strategy = breaker.FailureRate{Rate: rate, Window: window}
	}
	return cfg
}

func newFusebox(tb testing.TB, m *manager.Manager, name string, p policy) *manager.Breaker {
	tb.Helper()
	br, err := m.Register(name, fuseboxConfig(p))
	if err != nil {
		tb.Fatal(err)
	}
	return br
}

// gobreakerSettings is the gobreaker configuration of policy p.
//
// gobreaker has no count-based sliding window. Its Counts cover every call
// since the breaker last changed state (with Interval zero, as here, they
// are never cleared while closed), or a time-based window (Interval with
// BucketPeriod). The failure-rate policy is therefore approximated by a
// ReadyToTrip that asks for at least 100 calls and a failure share of at
// least one half over every call since the breaker closed. This is the
// cheapest configuration gobreaker has for a call that succeeds, so it does
// not flatter the other libraries: a success does not call ReadyToTrip, and
// with Interval zero no bucket is rolled.
func gobreakerSettings(p policy) gobreaker.Settings {
	s := gobreaker.Settings{
		Name:    "bench",
		Timeout: openFor,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.ConsecutiveFailures >= tripAfter
		},
	}
	if p == failureRate {
		s.ReadyToTrip = func(c gobreaker.Counts) bool {
			return c.Requests >= window && float64(c.TotalFailures) >= rate*float64(c.Requests)
		}
	}
	return s
}

func newGobreaker(p policy) *gobreaker.CircuitBreaker[any] {
	return gobreaker.NewCircuitBreaker[any](gobreakerSettings(p))
}

func newGobreakerTwoStep(p policy) *gobreaker.TwoStepCircuitBreaker[any] {
	return gobreaker.NewTwoStepCircuitBreaker[any](gobreakerSettings(p))
}

// newFailsafe is the failsafe-go configuration of policy p. The
// failure-rate policy uses WithFailureThresholdRatio(50, 100): 50 failures
// among the last 100 executions, a count-based window like fusebox's
// (failsafe's WithFailureRateThreshold is time-based). Unlike fusebox's, it
// may trip before 100 executions were recorded, as soon as 50 of them
// failed. One successful probe closes the breaker, as in the other two.
func newFailsafe(p policy) circuitbreaker.CircuitBreaker[any] {
	bld := circuitbreaker.NewBuilder[any]().
		WithFailureThreshold(tripAfter).
		WithSuccessThreshold(1).
		WithDelay(openFor)
	if p == failureRate {
		bld = bld.WithFailureThresholdRatio(uint(rate*window), window)
	}
	return bld.Build()
}

// newFailsafeExecutor wraps cb in an executor, built once and reused for
// every call (building one per call, as failsafe.With(cb).Run(fn) in line
// does, would add its allocation to every call).
func newFailsafeExecutor(cb circuitbreaker.CircuitBreaker[any]) failsafe.Executor[any] {
	return failsafe.With[any](cb)
}

// Tripping each library's breaker open with consecutive failures.

func tripFusebox(tb testing.TB, br *manager.Breaker) {
	tb.Helper()
	ctx := context.Background()
	for i := 0; i < tripAfter; i++ {
		p, err := br.Acquire(ctx)
		if err != nil {
			tb.Fatalf("fusebox: failure %d declined: %v", i+1, err)
		}
		p.Release(errBoom)
	}
	if st := br.State(); st != breaker.Open {
		tb.Fatalf("fusebox: %d failures left the breaker %v, want open", tripAfter, st)
	}
}

func tripGobreaker(tb testing.TB, cb *gobreaker.CircuitBreaker[any]) {
	tb.Helper()
	for i := 0; i < tripAfter; i++ {
		cb.Execute(failAny)
	}
	if st := cb.State(); st != gobreaker.StateOpen {
		tb.Fatalf("gobreaker: %d failures left the breaker %v, want open", tripAfter, st)
	}
}

func tripGobreakerTwoStep(tb testing.TB, cb *gobreaker.TwoStepCircuitBreaker[any]) {
	tb.Helper()
	for i := 0; i < tripAfter; i++ {
		done, err := cb.Allow()
		if err != nil {
			tb.Fatalf("gobreaker two-step: failure %d declined: %v", i+1, err)
		}
		done(errBoom)
	}
	if st := cb.State(); st != gobreaker.StateOpen {
		tb.Fatalf("gobreaker two-step: %d failures left the breaker %v, want open", tripAfter, st)
	}
}

func tripFailsafe(tb testing.TB, cb circuitbreaker.CircuitBreaker[any]) {
	tb.Helper()
	for i := 0; i < tripAfter; i++ {
		if !cb.TryAcquirePermit() {
			tb.Fatalf("failsafe: failure %d declined", i+1)
		}
		cb.RecordFailure()
	}
	if !cb.IsOpen() {
		tb.Fatalf("failsafe: %d failures left the breaker %v, want open", tripAfter, cb.State())
	}
}

// randomIndices are the breakers the Random case calls, in order: drawn
// once, from a fixed seed, outside every timed loop. Its length is a power
// of two so that a loop wraps around with a mask.
var randomIndices = func() []uint32 {
	r := rand.New(rand.NewPCG(1, 2))
	idx := make([]uint32, 1<<16)
	for i := range idx {
		idx[i] = uint32(r.IntN(nRandom))
	}
	return idx
}()

const randomMask = 1<<16 - 1

func breakerName(i int) string { return fmt.Sprintf("breaker-%06d", i) }
