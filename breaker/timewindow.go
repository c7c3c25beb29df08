package breaker

import (
	"sync/atomic"
	"time"

	"github.com/fusebox-go/fusebox/classify"
)

// TimeWindow trips a closed breaker when, over the last Period, at least
// MinCalls calls were made and the share of failures among them reaches
// Rate. Ignored calls are not counted.
//
// The period is split into Buckets buckets of equal length; the window slides
// one bucket at a time, so it covers between Period-Period/Buckets and Period
// of history. Each bucket is one atomic word, and a call updates only the
// bucket of its instant; the rate is summed over the buckets only when a
// failure is recorded. A bucket counts at most 16,777,215 calls; past that it
// stops counting and keeps the rate of the calls it holds.
//
// Unlike the count-based strategies, TimeWindow needs the time of every
// call, so a breaker using it reads its clock when a call is released.
type TimeWindow struct {
	// Rate trips the breaker when failures/calls >= Rate. It must be in
	// (0, 1].
	Rate float64
	// Period is how much recent history the window covers. It must be
	// positive.
	Period time.Duration
	// Buckets is how many slices the period is cut into. Zero means 10. Each
	// bucket must be at least a millisecond long.
	Buckets int
	// MinCalls is how many calls the window must hold before the breaker may
	// trip. It must be at least 1.
	MinCalls int
}

// NewCounter implements Strategy.
func (s TimeWindow) NewCounter() (Counter, error) {
	if err := checkRate("breaker.TimeWindow.Rate", s.Rate); err != nil {
		return nil, err
	}
	if s.Period <= 0 {
		return nil, Invalid("breaker.TimeWindow.Period", "must be positive, got %v", s.Period)
	}
	buckets := s.Buckets
	if buckets == 0 {
		buckets = 10
	}
	if buckets < 1 || buckets > 1<<15 {
		return nil, Invalid("breaker.TimeWindow.Buckets", "must be between 1 and 32768, got %d", s.Buckets)
	}
	width := s.Period / time.Duration(buckets)
	if width < time.Millisecond {
		return nil, Invalid("breaker.TimeWindow.Buckets", "makes buckets of %v (Period %v / %d); each must be at least 1ms", width, s.Period, buckets)
	}
	if s.MinCalls < 1 {
		return nil, Invalid("breaker.TimeWindow.MinCalls", "must be at least 1, got %d", s.MinCalls)
	}
	return &timeCounter{
		rate:    s.Rate,
		width:   int64(width),
		min:     uint64(s.MinCalls),
		buckets: make([]atomic.Uint64, buckets),
	}, nil
}

// A bucket word holds | epoch:16 | calls:24 | failures:24 |, where epoch is
// the low bits of the bucket's index since the Unix epoch. A word whose epoch
// is not the current index (mod 2^16) holds an older bucket.
const (
	countBits = 24
	countMax  = 1<<countBits - 1
	epochMask = 1<<16 - 1
)

func unpack(w uint64) (epoch, calls, failures uint64) {
	return w >> (2 * countBits), (w >> countBits) & countMax, w & countMax
}

func pack(epoch, calls, failures uint64) uint64 {
	return (epoch&epochMask)<<(2*countBits) | calls<<countBits | failures
}

type timeCounter struct {
	rate    float64
	width   int64
	min     uint64
	buckets []atomic.Uint64
}

func (c *timeCounter) index(now time.Time) uint64 {
	ns := now.UnixNano()
	idx := ns / c.width
	if ns < 0 && ns%c.width != 0 {
		idx--
	}
	return uint64(idx)
}

func (c *timeCounter) Record(o classify.Outcome, now time.Time) bool {
	if o != classify.Success && o != classify.Failure {
		return false
	}
	var fail uint64
	if o == classify.Failure {
		fail = 1
	}
	idx := c.index(now)
	epoch := idx & epochMask
	b := &c.buckets[idx%uint64(len(c.buckets))]
	for {
		w := b.Load()
		e, calls, failures := unpack(w)
		var next uint64
		switch {
		case e != epoch || w == 0:
			next = pack(epoch, 1, fail)
		case calls >= countMax:
			next = w // saturated: keep the rate it holds
		default:
			next = pack(epoch, calls+1, failures+fail)
		}
		if next == w || b.CompareAndSwap(w, next) {
			break
		}
	}
	if fail == 0 {
		return false
	}
	var calls, failures uint64
	n := uint64(len(c.buckets))
	for i := range c.buckets {
		e, cs, fs := unpack(c.buckets[i].Load())
		if (epoch-e)&epochMask < n {
			calls += cs
			failures += fs
		}
	}
	return calls >= c.min && reached(failures, calls, c.rate)
}

func (c *timeCounter) Reset() {
	for i := range c.buckets {
		c.buckets[i].Store(0)
	}
}

func (c *timeCounter) UsesClock() bool { return true }
