package manager

import (
	"sync/atomic"
	"time"

	"github.com/fusebox-go/fusebox/internal/latency"
)

// Durations is a histogram of the durations of a breaker's released calls
// (Stats.Durations): the time from Acquire to Release, on the manager's
// clock.
type Durations struct {
	// Buckets counts calls by duration, in buckets whose upper bounds are
	// the ones Prometheus client libraries use by default: 5ms, 10ms, 25ms,
	// 50ms, 100ms, 250ms, 500ms, 1s, 2.5s, 5s and 10s. Buckets[i] is how
	// many took at most the i-th bound and more than the bound before it;
	// the last element counts the calls that took longer than 10s. The
	// counts are not cumulative.
	Buckets [12]uint64
	// Count is the number of calls timed: the sum of Buckets.
	Count uint64
	// Sum is their total duration.
	Sum time.Duration
}

// Durations.Buckets has a bucket per bound and one more.
var _ [len(latency.Bounds) + 1]uint64 = Durations{}.Buckets

// durations is the histogram as the callers fill it in.
type durations struct {
	buckets [len(latency.Bounds) + 1]atomic.Uint64
	sum     atomic.Int64
}

func (h *durations) observe(d time.Duration) {
	i := 0
	for i < len(latency.Bounds) && d > latency.Bounds[i] {
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
