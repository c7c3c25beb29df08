package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/rule"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

// paritySeeds are the fixed seeds of the outcome sequences parity plays.
var paritySeeds = []uint64{1, 2, 3, 4, 5, 6, 7, 8}

// parity feeds the same random outcome sequences, from fixed seeds, to a
// local breaker and to a breaker shared through the store, side by side in
// one manager, and checks that both trip at the same call: the strategy's
// one trip rule decides for both.
func parity(t *testing.T, h Harness) {
	// On a mock clock the sequences step time across buckets; on the real
	// clock they run within one window, whose buckets the store aligns on
	// its own clock.
	period := 10 * time.Second
	if h.Real {
		period = time.Hour
	}
	strategies := []breaker.Strategy{
		breaker.Consecutive{Failures: 1},
		breaker.Consecutive{Failures: 3},
		breaker.TimeWindow{Rate: 0.5, Period: period, MinCalls: 5},
		breaker.TimeWindow{Rate: 0.07, Period: period, Buckets: 5, MinCalls: 30},
		breaker.TimeWindow{Rate: 0.3, Period: period, Buckets: 20, MinCalls: 10},
		breaker.TimeWindow{Rate: 1, Period: period, MinCalls: 3},
	}
	trips := 0
	for _, st := range strategies {
		s := h.New(t)
		var clk clock.Clock
		if h.Clock != nil {
			clk = h.Clock()
		}
		for _, seed := range paritySeeds {
			if paritySequence(t, s, clk, st, seed, h.Real) {
				trips++
			}
		}
	}
	if trips < len(strategies)*len(paritySeeds)/2 {
		t.Fatalf("only %d of %d sequences tripped: the sequences test too little", trips, len(strategies)*len(paritySeeds))
	}
}

// paritySequence plays one sequence and reports whether it tripped.
func paritySequence(t *testing.T, s store.Store, clk clock.Clock, st breaker.Strategy, seed uint64, real bool) bool {
	t.Helper()
	m := manager.Start(manager.Options{Clock: clk})
	defer m.Stop()
	cfg := manager.Config{Strategy: st, Recover: recover.BasicTimeout{Open: time.Hour}}
	local, err := m.Register("local", cfg)
	if err != nil {
		t.Fatalf("Register local: %v", err)
	}
	cfg.Store = s
	// A quorum of 1 is no quorum: every other sequence says so, and trips
	// where the local breaker does all the same.
	cfg.Quorum = int(seed % 2)
	shared, err := m.Register(fmt.Sprintf("parity-%d", seed), cfg)
	if err != nil {
		t.Fatalf("Register shared: %v", err)
	}
	mock, _ := clk.(*clock.Mock)
	var width time.Duration
	if tw, ok := st.(breaker.TimeWindow); ok && !real {
		width = rule.Width(tw.Period, tw.Buckets)
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	pFail := 0.1 + 0.6*rng.Float64()
	var played strings.Builder
	for i := range 300 {
		o := classify.Success
		switch r := rng.Float64(); {
		case r < 0.05:
			o = classify.Ignore
		case r < 0.05+pFail:
			o = classify.Failure
		}
		// Time moves now and then, by up to two buckets (a mock's Add
		// yields for a millisecond, so not at every call).
		if mock != nil && width > 0 && rng.IntN(6) == 0 {
			mock.Add(time.Duration(rng.Int64N(2 * int64(width))))
		}
		fmt.Fprintf(&played, "%c", o.String()[0])
		for _, b := range []*manager.Breaker{local, shared} {
			p, err := b.Acquire(context.Background())
			if err != nil {
				t.Fatalf("%T%+v, seed %d, call %d: %s declined before either tripped: %v (outcomes %s)", st, st, seed, i, b.Name(), err, played.String())
			}
			p.ReleaseOutcome(o)
		}
		l, sh := local.State() == breaker.Open, shared.State() == breaker.Open
		if l != sh {
			t.Fatalf("%T%+v, seed %d: at call %d the local breaker open=%v, the shared one open=%v (outcomes %s)", st, st, seed, i, l, sh, played.String())
		}
		if l {
			return true
		}
	}
	return false
}
