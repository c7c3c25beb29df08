package breaker

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/rule"
)

// TimeWindow trips a closed breaker when, over the last Period, at least
// MinCalls calls were made and the share of failures among them reaches
// Rate. Ignored calls are not counted. The threshold is checked after every
// call, success or failure: a success can bring the window to MinCalls.
//
// The period is split into Buckets buckets of equal length, aligned on the
// Unix epoch (bucket i covers [i*w, (i+1)*w) of Unix time, for a bucket length
// w), as every store aligns them, so that a local and a shared breaker count
// the same calls together; the window slides one bucket at a time, so it
// covers between Period-Period/Buckets and Period of history. Each bucket is
// one atomic word, and a call updates only the bucket of its instant; the
// rate is summed over the buckets only while a failure is in the window. The
// first call into a new bucket also empties the buckets the window has moved
// past, under a lock taken at most once per bucket length, so that no bucket
// is ever counted again once its period is over, however long the breaker
// stays idle. A bucket counts at most 16,777,215 calls; past that it stops
// counting and keeps the rate of the calls it holds.
//
// Unlike the count-based strategies, TimeWindow needs the time of every
// call, so a breaker using it reads its clock when a call is released.
// Buckets are measured from the first call recorded, with the monotonic
// clock reading when the times carry one, so a step of the wall clock does
// not move the window. A call whose time is a whole Period or more before
// the newest call recorded is outside the window and is not counted.
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
		return nil, invalid("breaker.TimeWindow.Period", "must be positive, got %v", s.Period)
	}
	buckets := rule.Buckets(s.Buckets)
	if buckets < 1 || buckets > 1<<15 {
		return nil, invalid("breaker.TimeWindow.Buckets", "must be between 1 and 32768, got %d", s.Buckets)
	}
	width := rule.Width(s.Period, s.Buckets)
	if width < time.Millisecond {
		return nil, invalid("breaker.TimeWindow.Buckets", "makes buckets of %v (Period %v / %d); each must be at least 1ms", width, s.Period, buckets)
	}
	if s.MinCalls < 1 {
		return nil, invalid("breaker.TimeWindow.MinCalls", "must be at least 1, got %d", s.MinCalls)
	}
	c := &timeCounter{
		s:       s,
		width:   int64(width),
		n:       int64(buckets),
		buckets: make([]atomic.Uint64, buckets),
	}
	c.failed.Store(math.MinInt64)
	return c, nil
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

// A timeCounter numbers its buckets from the first call it records: bucket
// i covers [base+i*width, base+(i+1)*width) and lives in slot i mod n. head
// is the newest bucket recorded into. Every slot holds zero or a bucket in
// (head-n, head]: moving head forward empties the slots it passes, so a
// word's 16-bit epoch never has to tell apart buckets 2^16 apart.
type timeCounter struct {
	s       TimeWindow
	width   int64 // nanoseconds
	n       int64 // len(buckets)
	base    atomic.Pointer[time.Time]
	head    atomic.Int64
	failed  atomic.Int64 // the newest bucket a failure was recorded into
	mu      sync.Mutex   // held to move head forward
	buckets []atomic.Uint64
}

// index returns the bucket of now, starting the numbering at now if this is
// the first call.
func (c *timeCounter) index(now time.Time) int64 {
	base := c.base.Load()
	if base == nil {
		base = c.start(now)
	}
	d := int64(now.Sub(*base))
	idx := d / c.width
	if d < 0 && d%c.width != 0 {
		idx--
	}
	return idx
}

// start makes the start of now's bucket, on the Unix-epoch alignment,
// bucket 0, unless another call did first. Subtracting from now keeps its
// monotonic reading. It is a function of its own so that only the first
// call allocates.
func (c *timeCounter) start(now time.Time) *time.Time {
	_, into := rule.UnixDiv(now, c.width)
	base := now.Add(-time.Duration(into))
	c.base.CompareAndSwap(nil, &base)
	return c.base.Load()
}

func (c *timeCounter) slot(idx int64) *atomic.Uint64 {
	i := idx % c.n
	if i < 0 {
		i += c.n
	}
	return &c.buckets[i]
}

// advance moves head forward to idx and empties the slots of the buckets it
// passes over, which belong to periods now out of the window. Callers of
// buckets at or before head never wait for it.
func (c *timeCounter) advance(idx int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	head := c.head.Load()
	if idx <= head {
		return
	}
	for i := max(head+1, idx-c.n+1); i <= idx; i++ {
		c.slot(i).Store(0)
	}
	c.head.Store(idx)
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
	if head := c.head.Load(); idx > head {
		c.advance(idx)
	} else if idx <= head-c.n {
		return false // a whole period before the newest call
	}
	epoch := uint64(idx) & epochMask
	b := c.slot(idx)
	for {
		w := b.Load()
		e, calls, failures := unpack(w)
		var next uint64
		switch {
		case w == 0:
			next = pack(epoch, 1, fail)
		case e != epoch:
			if (e-epoch)&epochMask < 1<<15 {
				// A newer bucket took the slot since head was read:
				// this call is out of the window.
				return false
			}
			next = pack(epoch, 1, fail) // a late call's leftover
		case calls >= countMax:
			next = w // saturated: keep the rate it holds
		default:
			next = pack(epoch, calls+1, failures+fail)
		}
		if next == w || b.CompareAndSwap(w, next) {
			break
		}
	}
	if fail == 1 {
		for f := c.failed.Load(); f < idx && !c.failed.CompareAndSwap(f, idx); f = c.failed.Load() {
		}
	} else if f := c.failed.Load(); f <= idx-c.n {
		return false // no failure in the window: the rule cannot trip
	}
	var calls, failures uint64
	for i := range c.buckets {
		e, cs, fs := unpack(c.buckets[i].Load())
		if (epoch-e)&epochMask < uint64(c.n) {
			calls += cs
			failures += fs
		}
	}
	return rule.Rate(int64(calls), int64(failures), int64(c.s.MinCalls), c.s.Rate)
}

func (c *timeCounter) UsesClock() bool { return true }

// Window returns the calls and failures in the buckets of the period that
// ends at now (see Counter).
func (c *timeCounter) Window(now time.Time) (calls, failures uint64) {
	if c.base.Load() == nil {
		return 0, 0 // no call yet; index would start the numbering
	}
	epoch := uint64(c.index(now)) & epochMask
	for i := range c.buckets {
		e, cs, fs := unpack(c.buckets[i].Load())
		if (epoch-e)&epochMask < uint64(c.n) {
			calls += cs
			failures += fs
		}
	}
	return calls, failures
}
