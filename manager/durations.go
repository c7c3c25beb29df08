package manager

import (
	"sync/atomic"
	"time"
)

// DurationBuckets are the upper bounds of the buckets of the call-duration
// histogram kept for a breaker registered with Config.TimeCalls. They are
// the bounds Prometheus client libraries use by default, from 5ms to 10s.
var DurationBuckets = [...]time.Duration{
	5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// Durations is a histogram of the durations of a breaker's released calls
// (Stats.Durations): the time from Acquire to Release, on the manager's
// clock.
type Durations struct {
	// Buckets counts calls by duration: Buckets[i] is how many took at
	// most DurationBuckets[i] and more than the bound before it; the last
	// element counts the calls that took longer than every bound. The
	// counts are not cumulative.
	Buckets [len(DurationBuckets) + 1]uint64
	// Count is the number of calls timed: the sum of Buckets.
	Count uint64
	// Sum is their total duration.
	Sum time.Duration
}

// durations is the histogram as the callers fill it in.
type durations struct {
	buckets [len(DurationBuckets) + 1]atomic.Uint64
	sum     atomic.Int64
}

func (h *durations) observe(d time.Duration) {
	i := 0
	for i < len(DurationBuckets) && d > DurationBuckets[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sum.Add(int64(d))
}

// read returns a copy. The sum and the counts are read one after another,
// so under load they may be a few calls apart.
func (h *durations) read() *Durations {
	d := new(Durations)
	for i := range h.buckets {
		d.Buckets[i] = h.buckets[i].Load()
		d.Count += d.Buckets[i]
	}
	d.Sum = time.Duration(h.sum.Load())
	return d
}

// setTiming applies cfg's SlowCall and TimeCalls: a histogram kept on,
// made, or dropped, and whether permits carry their start. A permit
// granted before keeps what it was granted with.
func (b *Breaker) setTiming(cfg Config) {
	b.slowCall.Store(int64(cfg.SlowCall))
	switch {
	case !cfg.TimeCalls:
		b.durations.Store(nil)
	case b.durations.Load() == nil:
		b.durations.Store(new(durations))
	}
	b.timesCalls.Store(cfg.SlowCall > 0 || cfg.TimeCalls)
}
