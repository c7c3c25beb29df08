package breaker

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/rule"
)

// FailureRate trips a closed breaker when, among the last Window calls, the
// share of failures reaches Rate. Ignored calls do not enter the window. The
// threshold is checked after every call, success or failure: with Rate 0.5
// and MinCalls 5, the calls F F F S S trip the breaker on the last success,
// the call that brings the window to MinCalls.
//
// The window is a ring of one bit per call with a running count of the set
// bits, so recording a call is O(1) whatever the window's size, and lock-free:
// a caller claims a slot with one atomic add and flips its bit only when the
// outcome differs from the one it replaces. A success recorded into a full
// window that holds no failure writes nothing at all.
type FailureRate struct {
	// Rate trips the breaker when failures/calls >= Rate. It must be in
	// (0, 1].
	Rate float64
	// Window is how many of the most recent calls are remembered. It must be
	// between 1 and 1,048,576 (1<<20).
	Window int
	// MinCalls is how many calls the window must hold before the breaker may
	// trip. Zero means Window: the window must be full. It must not exceed
	// Window.
	MinCalls int
}

// maxWindow is the largest FailureRate.Window: a million calls, whose ring
// takes 128 KiB. Each closed period of a breaker has a ring of its own, so
// the bound keeps a mistyped window from taking all the memory there is.
const maxWindow = 1 << 20

// minCalls returns MinCalls, or Window for zero.
func (s FailureRate) minCalls() int {
	if s.MinCalls == 0 {
		return s.Window
	}
	return s.MinCalls
}

// NewCounter implements Strategy.
func (s FailureRate) NewCounter() (Counter, error) {
	if err := checkRate("breaker.FailureRate.Rate", s.Rate); err != nil {
		return nil, err
	}
	if s.Window < 1 || s.Window > maxWindow {
		return nil, invalid("breaker.FailureRate.Window", "must be between 1 and %d, got %d", maxWindow, s.Window)
	}
	if s.MinCalls < 0 || s.MinCalls > s.Window {
		return nil, invalid("breaker.FailureRate.MinCalls", "must be between 0 and Window (%d), got %d", s.Window, s.MinCalls)
	}
	return &rateCounter{
		s:      s,
		window: uint64(s.Window),
		bits:   make([]atomic.Uint64, (s.Window+63)/64),
	}, nil
}

func checkRate(field string, r float64) error {
	if math.IsNaN(r) || r <= 0 || r > 1 {
		return invalid(field, "must be in (0, 1], got %v", r)
	}
	return nil
}

type rateCounter struct {
	pos      atomic.Uint64 // calls recorded since the last reset
	failures atomic.Int64  // set bits in the ring
	s        FailureRate
	window   uint64
	bits     []atomic.Uint64
}

func (c *rateCounter) Record(o classify.Outcome, _ time.Time) bool {
	if o != classify.Success && o != classify.Failure {
		return false
	}
	// A full window of successes stays the same when one more success
	// comes: nothing needs writing, so healthy callers only read shared
	// memory.
	if o == classify.Success && c.failures.Load() == 0 && c.pos.Load() >= c.window {
		return false
	}
	n := c.pos.Add(1)
	slot := (n - 1) % c.window
	word, mask := &c.bits[slot/64], uint64(1)<<(slot%64)
	failures := c.failures.Load()
	if o == classify.Success {
		// A success replacing a success writes nothing.
		if word.Load()&mask != 0 && word.And(^mask)&mask != 0 {
			failures = c.failures.Add(-1)
		}
	} else if word.Load()&mask == 0 && word.Or(mask)&mask == 0 {
		failures = c.failures.Add(1)
	}
	// failures may be below zero for a moment while other calls flip
	// bits; the rule then says no.
	return failures > 0 && rule.Rate(int64(min(n, c.window)), failures, int64(c.s.minCalls()), c.s.Rate)
}

func (c *rateCounter) UsesClock() bool { return false }

// Window returns the calls and failures in the ring (see Counter).
func (c *rateCounter) Window(time.Time) (calls, failures uint64) {
	// failures may be below zero for a moment while calls flip bits.
	return min(c.pos.Load(), c.window), uint64(max(c.failures.Load(), 0))
}
