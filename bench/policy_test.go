package bench_test

import (
	"context"
	"testing"

	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/sony/gobreaker/v2"
)

// These tests check that the libraries are configured for the same policy,
// and pin down where their failure-rate windows differ, as the report says.

// subject is one library's breaker behind a common face: call makes one call
// that succeeds or fails and reports whether the breaker let it through;
// open reports whether the breaker is open.
type subject struct {
	name string
	call func(fail bool) bool
	open func() bool
}

func subjects(t *testing.T, p policy) []subject {
	ctx := context.Background()
	fb := newFusebox(t, startManager(t), "policy", p)
	gb := newGobreaker(p)
	ts := newGobreakerTwoStep(p)
	fs := newFailsafe(p)
	fxcb := newFailsafe(p)
	fx := newFailsafeExecutor(fxcb)
	return []subject{
		{libFusebox, func(fail bool) bool {
			pm, err := fb.Acquire(ctx)
			if err != nil {
				return false
			}
			pm.Release(errIf(fail))
			return true
		}, func() bool { return fb.State() == breaker.Open }},
		{libGobreaker, func(fail bool) bool {
			_, err := gb.Execute(func() (any, error) { return nil, errIf(fail) })
			return err == nil || err == errBoom
		}, func() bool { return gb.State() == gobreaker.StateOpen }},
		{libGobreakerTwoStep, func(fail bool) bool {
			done, err := ts.Allow()
			if err != nil {
				return false
			}
			done(errIf(fail))
			return true
		}, func() bool { return ts.State() == gobreaker.StateOpen }},
		{libFailsafe, func(fail bool) bool {
			return fx.Run(func() error { return errIf(fail) }) != circuitbreaker.ErrOpen
		}, func() bool { return fxcb.IsOpen() }},
		{libFailsafeCB, func(fail bool) bool {
			if !fs.TryAcquirePermit() {
				return false
			}
			if fail {
				fs.RecordFailure()
			} else {
				fs.RecordSuccess()
			}
			return true
		}, func() bool { return fs.IsOpen() }},
	}
}

func errIf(fail bool) error {
	if fail {
		return errBoom
	}
	return nil
}

// tripsAt makes the calls in outcomes (true: a failure) and returns the
// 1-based index of the call after which the breaker was open, or 0.
func tripsAt(t *testing.T, s subject, outcomes []bool) int {
	t.Helper()
	for i, fail := range outcomes {
		if !s.call(fail) {
			t.Fatalf("%s: call %d was declined before the breaker opened", s.name, i+1)
		}
		if fail && s.open() {
			return i + 1
		}
	}
	return 0
}

func repeat(fail bool, n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = fail
	}
	return out
}

func TestConsecutivePolicyAgrees(t *testing.T) {
	// Four failures, a success, then failures: every library trips on the
	// fifth failure in a row, the 10th call.
	outcomes := append(append(repeat(true, 4), false), repeat(true, 6)...)
	for _, s := range subjects(t, consecutive) {
		if got := tripsAt(t, s, outcomes); got != 10 {
			t.Errorf("%s: tripped after call %d, want 10", s.name, got)
		}
	}
}

func TestFailureRatePolicy(t *testing.T) {
	tests := []struct {
		name     string
		outcomes []bool
		want     map[string]int // by library; 0: never trips
	}{{
		// 50 successes then failures: half of 100 calls failed at the
		// 100th call, for every library.
		name:     "fifty successes first",
		outcomes: append(repeat(false, 50), repeat(true, 60)...),
		want: map[string]int{
			libFusebox: 100, libGobreaker: 100, libGobreakerTwoStep: 100,
			libFailsafe: 100, libFailsafeCB: 100,
		},
	}, {
		// Failures from the start: fusebox and gobreaker wait for 100
		// calls; failsafe trips on the 50th failure.
		name:     "failures first",
		outcomes: repeat(true, 120),
		want: map[string]int{
			libFusebox: 100, libGobreaker: 100, libGobreakerTwoStep: 100,
			libFailsafe: 50, libFailsafeCB: 50,
		},
	}, {
		// 100 successes, then failures: the sliding windows of fusebox
		// and failsafe hold 50 failures in their last 100 calls at the
		// 150th call; gobreaker still counts the first 100 successes
		// and needs as many failures.
		name:     "a hundred successes first",
		outcomes: append(repeat(false, 100), repeat(true, 120)...),
		want: map[string]int{
			libFusebox: 150, libGobreaker: 200, libGobreakerTwoStep: 200,
			libFailsafe: 150, libFailsafeCB: 150,
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, s := range subjects(t, failureRate) {
				if got := tripsAt(t, s, tt.outcomes); got != tt.want[s.name] {
					t.Errorf("%s: tripped after call %d, want %d", s.name, got, tt.want[s.name])
				}
			}
		})
	}
}

func TestTripHelpersOpen(t *testing.T) {
	// Each helper fails the test itself if the breaker is not open.
	tripFusebox(t, newFusebox(t, startManager(t), "trip", consecutive))
	tripGobreaker(t, newGobreaker(consecutive))
	tripGobreakerTwoStep(t, newGobreakerTwoStep(consecutive))
	tripFailsafe(t, newFailsafe(consecutive))
}

func TestRandomIndices(t *testing.T) {
	if len(randomIndices) != randomMask+1 {
		t.Fatalf("len(randomIndices) = %d, want %d", len(randomIndices), randomMask+1)
	}
	seen := make(map[uint32]bool)
	for _, i := range randomIndices {
		if i >= nRandom {
			t.Fatalf("index %d out of range [0, %d)", i, nRandom)
		}
		seen[i] = true
	}
	// 65,536 draws among 10,000 leave almost none unseen.
	if len(seen) < nRandom*99/100 {
		t.Errorf("only %d of %d breakers are ever picked", len(seen), nRandom)
	}
}

func TestStepClock(t *testing.T) {
	c := newStepClock()
	t0 := c.Now()
	c.step(scaleOpen)
	if got := c.Since(t0); got != scaleOpen {
		t.Errorf("Since after a step of %v = %v", scaleOpen, got)
	}
	m := manager.Start(manager.Options{Clock: c, Logger: quiet})
	defer m.Stop()
	br, err := m.Register("clock", scaleConfig(consecutive))
	if err != nil {
		t.Fatal(err)
	}
	pm, err := br.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pm.Release(errBoom)
	m.Sync()
	if st := br.State(); st != breaker.Open {
		t.Fatalf("after one failure: %v, want open", st)
	}
	c.step(scaleOpen - 1)
	m.Sync()
	if st := br.State(); st != breaker.Open {
		t.Fatalf("1ns before the end of the open period: %v, want open", st)
	}
	c.step(1)
	m.Sync()
	if st := br.State(); st != breaker.HalfOpen {
		t.Fatalf("at the end of the open period: %v, want half_open", st)
	}
}
