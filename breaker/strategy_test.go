package breaker_test

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/machine"
)

// t0 is the instant every sequence starts from; the others are offsets of it.
var t0 = time.Date(2026, 1, 2, 15, 4, 0, 0, time.UTC)

const (
	S = classify.Success
	F = classify.Failure
	I = classify.Ignore
)

// rec is one Record call: the outcome, its instant as an offset of t0
// (read by TimeWindow only), and whether the counter must say "trip".
type rec struct {
	off  time.Duration
	o    classify.Outcome
	trip bool
}

// resetRec, placed in a sequence, starts a new closed period: the counter
// is replaced by a fresh one from the same strategy, as the state machine
// does when the breaker closes. Only a counter from renewable accepts it.
var resetRec = rec{o: 255}

// renewed is a counter that play can replace with a fresh one.
type renewed struct {
	breaker.Counter
	s breaker.Strategy
	t *testing.T
}

// renewable returns a counter of s that a resetRec renews.
func renewable(t *testing.T, s breaker.Strategy) *renewed {
	return &renewed{Counter: newCounter(t, s), s: s, t: t}
}

// play records the sequence into c in order and checks every answer.
func play(t *testing.T, c breaker.Counter, seq []rec) {
	t.Helper()
	for i, r := range seq {
		if r == resetRec {
			rn := c.(*renewed)
			rn.Counter = newCounter(rn.t, rn.s)
			continue
		}
		if got := c.Record(r.o, t0.Add(r.off)); got != r.trip {
			t.Fatalf("step %d: Record(%v, t0+%v) = %v, want %v", i, r.o, r.off, got, r.trip)
		}
	}
}

// repeat returns n records of o at off, none of which trips.
func repeat(n int, o classify.Outcome, off time.Duration) []rec {
	seq := make([]rec, n)
	for i := range seq {
		seq[i] = rec{off, o, false}
	}
	return seq
}

func newCounter(t *testing.T, s breaker.Strategy) breaker.Counter {
	t.Helper()
	c, err := s.NewCounter()
	require.NoError(t, err, "%T%+v.NewCounter()", s, s)
	require.NotNil(t, c)
	return c
}

func TestConsecutiveTripsOnTheNthFailure(t *testing.T) {
	for _, n := range []int{1, 2, 5, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			c := newCounter(t, breaker.Consecutive{Failures: n})
			assert.False(t, c.UsesClock())
			seq := append(repeat(n-1, F, 0), rec{0, F, true})
			play(t, c, seq)
		})
	}
}

func TestConsecutiveOnTheMachine(t *testing.T) {
	// Through the state machine, the N-th failure in a row opens the breaker: the
	// N-1 before it leave it closed.
	for _, n := range []int{1, 2, 5, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			m, err := machine.NewMachine("svc", breaker.Consecutive{Failures: n}, t0)
			require.NoError(t, err)
			for i := 1; i <= n; i++ {
				now := t0.Add(time.Duration(i) * time.Millisecond)
				tk, _, err := m.Acquire(now)
				require.Nil(t, err, "failure %d of %d: Acquire declined", i, n)
				trip, r := m.Record(tk, F, now)
				require.Equal(t, machine.Counted, r)
				require.Equal(t, i == n, trip, "failure %d of %d: Record said trip=%v", i, n, trip)
				if trip {
					_, ok := m.Trip(tk.Gen, F, nil, now)
					require.True(t, ok)
				}
			}
			assert.Equal(t, breaker.Open, m.Snapshot().State, "after %d failures in a row", n)
		})
	}
}

func TestConsecutiveSequences(t *testing.T) {
	tests := []struct {
		name string
		n    int
		seq  []rec
	}{
		{"a success starts the count again", 3, []rec{
			{0, F, false}, {0, F, false}, {0, S, false},
			{0, F, false}, {0, F, false}, {0, F, true},
		}},
		{"successes in a row change nothing", 2, []rec{
			{0, S, false}, {0, S, false}, {0, F, false}, {0, F, true},
		}},
		{"ignore leaves the count as it is", 3, []rec{
			{0, F, false}, {0, I, false}, {0, F, false}, {0, I, false}, {0, I, false}, {0, F, true},
		}},
		{"an invalid outcome counts as nothing", 2, []rec{
			{0, F, false}, {0, 0, false}, {0, 9, false}, {0, F, true},
		}},
		{"a new period forgets the run", 2, []rec{
			{0, F, false}, resetRec, {0, F, false}, {0, F, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			play(t, renewable(t, breaker.Consecutive{Failures: tt.n}), tt.seq)
		})
	}
}

func TestConsecutiveCount(t *testing.T) {
	// The counter exposes its current run for diagnostics.
	c := newCounter(t, breaker.Consecutive{Failures: 5})
	counted, ok := c.(interface{ Count() int64 })
	require.True(t, ok, "the Consecutive counter has a Count method")
	for _, step := range []struct {
		o    classify.Outcome
		want int64
	}{{F, 1}, {F, 2}, {I, 2}, {S, 0}, {F, 1}} {
		c.Record(step.o, time.Time{})
		assert.Equal(t, step.want, counted.Count(), "after %v", step.o)
	}
}

func TestFailureRateSequences(t *testing.T) {
	tests := []struct {
		name string
		s    breaker.FailureRate
		seq  []rec
	}{
		{"MinCalls zero waits for a full window", breaker.FailureRate{Rate: 0.5, Window: 4}, []rec{
			{0, F, false}, {0, F, false}, {0, F, false}, {0, F, true},
		}},
		{"MinCalls zero: a full window at the rate trips", breaker.FailureRate{Rate: 0.5, Window: 4}, []rec{
			{0, S, false}, {0, S, false}, {0, F, false}, {0, F, true},
		}},
		{"MinCalls below Window trips early", breaker.FailureRate{Rate: 0.5, Window: 10, MinCalls: 2}, []rec{
			{0, S, false}, {0, F, true},
		}},
		{"MinCalls below Window: not before MinCalls calls", breaker.FailureRate{Rate: 0.5, Window: 10, MinCalls: 3}, []rec{
			{0, F, false}, {0, F, false}, {0, F, true},
		}},
		{"MinCalls equal to Window", breaker.FailureRate{Rate: 1, Window: 3, MinCalls: 3}, []rec{
			{0, F, false}, {0, F, false}, {0, F, true},
		}},
		{"Rate 1 needs every call in the window to fail", breaker.FailureRate{Rate: 1, Window: 3}, []rec{
			{0, F, false}, {0, F, false}, {0, S, false}, // window F F S
			{0, F, false}, // F S F: the first F was replaced by an F
			{0, F, false}, // S F F
			{0, F, true},  // F F F
		}},
		{"Rate 1 with a window of one", breaker.FailureRate{Rate: 1, Window: 1}, []rec{
			{0, S, false}, {0, F, true},
		}},
		{"a success below the rate never trips", breaker.FailureRate{Rate: 0.5, Window: 4, MinCalls: 1}, []rec{
			{0, S, false}, {0, F, true}, {0, S, false}, {0, S, false},
		}},
		{"the ring wraps around and old failures leave the window", breaker.FailureRate{Rate: 0.6, Window: 4}, []rec{
			{0, F, false}, {0, F, false}, {0, S, false}, {0, S, false}, // F F S S: 2/4
			{0, S, false}, {0, S, false}, // S S S S: both failures evicted
			{0, F, false}, // F S S S: 1/4
			{0, F, false}, // F F S S: 2/4
			{0, F, true},  // F F F S: 3/4
		}},
		{"a success that fills the window trips", breaker.FailureRate{Rate: 0.5, Window: 5}, []rec{
			{0, F, false}, {0, F, false}, {0, F, false}, {0, S, false}, {0, S, true}, // 3/5 on the fifth call
		}},
		{"a success that reaches MinCalls trips", breaker.FailureRate{Rate: 0.5, Window: 10, MinCalls: 3}, []rec{
			{0, F, false}, {0, F, false}, {0, S, true}, // 2/3 on the third call
		}},
		{"a success below the rate does not trip", breaker.FailureRate{Rate: 0.5, Window: 4}, []rec{
			{0, F, false}, {0, S, false}, {0, S, false}, {0, S, false}, // 1/4
		}},
		{"a failure replacing a failure keeps the count", breaker.FailureRate{Rate: 0.75, Window: 4}, []rec{
			{0, F, false}, {0, S, false}, {0, S, false}, {0, F, false}, // F S S F: 2/4
			{0, F, false}, // F S S F again: 2/4
			{0, F, true},  // F F S F: 3/4
		}},
		{"a window full of successes stays healthy", breaker.FailureRate{Rate: 0.5, Window: 3}, append(
			repeat(10, S, 0),
			rec{0, F, false}, rec{0, F, true},
		)},
		{"ignored calls do not enter the window", breaker.FailureRate{Rate: 1, Window: 2}, []rec{
			{0, F, false}, {0, I, false}, {0, I, false}, {0, F, true},
		}},
		{"a new period empties the window", breaker.FailureRate{Rate: 0.5, Window: 4}, []rec{
			{0, F, false}, {0, F, false}, {0, F, false}, resetRec,
			{0, F, false}, {0, F, false}, {0, F, false}, // three calls: MinCalls is 4 again
			{0, F, true},
		}},
		{"a new period forgets failures of a full window", breaker.FailureRate{Rate: 0.5, Window: 2}, []rec{
			{0, F, false}, {0, S, true}, resetRec,
			{0, S, false}, {0, S, false}, {0, F, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := renewable(t, tt.s)
			assert.False(t, c.UsesClock())
			play(t, c, tt.seq)
		})
	}
}

// failuresToTrip fills a FailureRate window with successes, then records
// failures one by one, and returns how many it took to trip, or 0 if
// Window failures did not.
func failuresToTrip(t *testing.T, c breaker.Counter, window int) int {
	t.Helper()
	for range window {
		require.False(t, c.Record(S, time.Time{}), "a success tripped the breaker")
	}
	for k := 1; k <= window; k++ {
		if c.Record(F, time.Time{}) {
			return k
		}
	}
	return 0
}

func TestFailureRateThresholds(t *testing.T) {
	// The breaker trips when failures/calls >= Rate: with a full window of
	// W calls, on the k-th failure, k the smallest with k/W >= Rate.
	tests := []struct {
		rate   float64
		window int
		k      int
	}{
		{0.5, 4, 2},
		{0.5, 10, 5},
		{0.5, 11, 6},
		{0.25, 4, 1},
		{0.1, 10, 1},
		{0.3, 10, 3},
		{0.2, 5, 1},
		{1.0 / 3, 3, 1},
		{2.0 / 3, 3, 2},
		{0.99, 100, 99},
		{1, 1, 1},
		{1, 7, 7},
		{1, 100, 100},
		// rate*calls rounds up past the integer for these (0.07*100 is
		// 7.000000000000001): the comparison must not lose the exact
		// threshold to it.
		{0.07, 100, 7},
		{0.14, 50, 7},
		{0.07, 1000, 70},
		{0.57, 100, 57},
		{math.SmallestNonzeroFloat64, 50, 1},
		{math.Nextafter(1, 0), 64, 64},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("rate %v window %d", tt.rate, tt.window)
		t.Run(name, func(t *testing.T) {
			c := newCounter(t, breaker.FailureRate{Rate: tt.rate, Window: tt.window})
			assert.Equal(t, tt.k, failuresToTrip(t, c, tt.window), "failures of %d calls that trip FailureRate{Rate: %v}", tt.window, tt.rate)
		})
	}
}

func TestFailureRateWindowLargerThanOneWord(t *testing.T) {
	// Windows of 64, 65, 128 and 1000 calls span one, two, two and sixteen
	// words of bits: every slot must be reachable and evicted in turn.
	for _, w := range []int{63, 64, 65, 128, 1000} {
		t.Run(fmt.Sprint(w), func(t *testing.T) {
			c := newCounter(t, breaker.FailureRate{Rate: 1, Window: w})
			seq := append(repeat(w-1, F, 0), rec{0, F, true})
			play(t, c, seq)
			// The window wraps: w successes evict every failure.
			play(t, c, repeat(w, S, 0))
			running, ring := breaker.RateCounts(c)
			assert.Zero(t, running, "window %d: running count after %d successes", w, w)
			assert.Zero(t, ring, "window %d: bits set after %d successes", w, w)
			seq = append(repeat(w-1, F, 0), rec{0, F, true})
			play(t, c, seq)
		})
	}
}

func TestFailureRateConcurrentCountIsExact(t *testing.T) {
	// A window larger than every call made: the failures in the window are
	// exactly the failures recorded, whatever the interleaving.
	const (
		goroutines = 16
		calls      = 2000
	)
	c := newCounter(t, breaker.FailureRate{Rate: 1, Window: 1 << 16})
	var want int64
	for g := range goroutines {
		for i := range calls {
			if (i+g)%3 == 0 {
				want++
			}
		}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range calls {
				o := S
				if (i+g)%3 == 0 {
					o = F
				}
				c.Record(o, time.Time{})
			}
		}()
	}
	close(start)
	wg.Wait()
	running, ring := breaker.RateCounts(c)
	assert.Equal(t, want, ring, "failures held by the window")
	assert.Equal(t, want, running, "running failure count")
}

func TestFailureRateConcurrentRingWrap(t *testing.T) {
	// Many goroutines wrapping a small ring many times over: once they are
	// done, the running count is the number of failures in the ring, and the
	// threshold still falls on the exact failure.
	const (
		goroutines = 8
		calls      = 5000
		window     = 100
	)
	c := newCounter(t, breaker.FailureRate{Rate: 0.5, Window: window})
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range calls {
				o := S
				if (i*7+g)%5 < 2 {
					o = F
				}
				c.Record(o, time.Time{})
			}
		}()
	}
	close(start)
	wg.Wait()
	running, ring := breaker.RateCounts(c)
	assert.Equal(t, ring, running, "the running count drifted from the failures in the window")
	assert.Equal(t, window/2, failuresToTrip(t, c, window), "failures of %d calls to trip at rate 0.5 after the concurrent phase", window)
}

func TestTimeWindowSequences(t *testing.T) {
	tenSeconds := breaker.TimeWindow{Rate: 0.5, Period: 10 * time.Second, Buckets: 10, MinCalls: 4}
	tests := []struct {
		name string
		s    breaker.TimeWindow
		seq  []rec
	}{
		{"trips at the rate once MinCalls calls are in", tenSeconds, []rec{
			{0, F, false}, {time.Second, S, false}, {2 * time.Second, S, false}, {3 * time.Second, F, true},
		}},
		{"MinCalls: three failures are not enough", tenSeconds, []rec{
			{0, F, false}, {0, F, false}, {0, F, false}, {0, F, true},
		}},
		{"ignored calls are not counted", tenSeconds, []rec{
			{0, F, false}, {0, I, false}, {0, I, false}, {0, F, false}, {0, F, false}, {0, I, false}, {0, F, true},
		}},
		{"a success that reaches MinCalls trips", tenSeconds, []rec{
			{0, F, false}, {0, F, false}, {0, F, false}, {0, S, true}, // 3/4
		}},
		{"F F F S S with MinCalls 5 trips on the last success", breaker.TimeWindow{Rate: 0.5, Period: 10 * time.Second, MinCalls: 5}, []rec{
			{0, F, false}, {0, F, false}, {time.Second, F, false}, {2 * time.Second, S, false}, {3 * time.Second, S, true},
		}},
		{"a success below the rate does not trip", tenSeconds, []rec{
			{0, F, false}, {0, S, false}, {0, S, false}, {0, S, false}, {0, S, false}, // 1/5
		}},
		{"a success with no failure left in the window does not trip", breaker.TimeWindow{Rate: 0.5, Period: 10 * time.Second, MinCalls: 2}, []rec{
			{0, F, false}, {10 * time.Second, S, false}, {10 * time.Second, S, false},
		}},
		{"buckets are aligned on the Unix epoch", breaker.TimeWindow{Rate: 1, Period: 10 * time.Second, MinCalls: 2}, []rec{
			{999 * time.Millisecond, F, false}, // bucket [t0, t0+1s)
			{10 * time.Second, F, false},       // that bucket left the window at t0+10s, not t0+10.999s
		}},
		{"a bucket 9.999s old is still in the window", tenSeconds, []rec{
			{0, F, false}, {0, F, false}, {9999 * time.Millisecond, F, false}, {9999 * time.Millisecond, F, true},
		}},
		{"a bucket 10s old has left the window", tenSeconds, []rec{
			{0, F, false}, {0, F, false},
			{10 * time.Second, F, false}, {10 * time.Second, F, false}, {10 * time.Second, F, false},
			{10 * time.Second, F, true},
		}},
		{"buckets leave one at a time", breaker.TimeWindow{Rate: 0.75, Period: 10 * time.Second, Buckets: 10, MinCalls: 4}, []rec{
			{0, F, false}, {time.Second, S, false}, {2 * time.Second, S, false}, {3 * time.Second, F, false}, // 2/4
			{10 * time.Second, F, false}, // the t0 bucket left: S S F F, 2/4
			{11 * time.Second, F, true},  // the 1s bucket left: S F F F, 3/4
		}},
		{"calls within one bucket add up", breaker.TimeWindow{Rate: 1, Period: time.Second, Buckets: 1, MinCalls: 3}, []rec{
			{0, F, false}, {500 * time.Millisecond, F, false}, {999 * time.Millisecond, F, true},
		}},
		{"one bucket: the next period starts empty", breaker.TimeWindow{Rate: 1, Period: time.Second, Buckets: 1, MinCalls: 3}, []rec{
			{0, F, false}, {500 * time.Millisecond, F, false}, {time.Second, F, false},
			{time.Second, F, false}, {time.Second, F, true},
		}},
		{"an idle hour forgets everything", tenSeconds, []rec{
			{0, F, false}, {0, F, false}, {0, F, false}, {time.Hour, F, false},
		}},
		{"a new period empties every bucket", tenSeconds, []rec{
			{0, F, false}, {0, F, false}, {time.Second, F, false}, resetRec,
			{2 * time.Second, F, false}, {2 * time.Second, F, false}, {2 * time.Second, F, false},
			{2 * time.Second, F, true},
		}},
		{"Buckets zero means ten", breaker.TimeWindow{Rate: 0.75, Period: 10 * time.Second, MinCalls: 4}, []rec{
			{0, F, false}, {time.Second, S, false}, {2 * time.Second, S, false}, {3 * time.Second, F, false},
			{10 * time.Second, F, false},
			{11 * time.Second, F, true},
		}},
		{"millisecond buckets", breaker.TimeWindow{Rate: 0.5, Period: 10 * time.Millisecond, Buckets: 10, MinCalls: 2}, []rec{
			{0, F, false}, {10 * time.Millisecond, F, false}, {19 * time.Millisecond, F, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := renewable(t, tt.s)
			assert.True(t, c.UsesClock(), "TimeWindow needs the time of each call")
			play(t, c, tt.seq)
		})
	}
}

func TestTimeWindowOldBucketsNeverComeBack(t *testing.T) {
	// A bucket's period is recorded in a few bits of its word; calls from a
	// period long gone must not count again when the bits come round, here
	// after 2^16 bucket lengths of silence.
	tests := []struct {
		name string
		s    breaker.TimeWindow
		gap  time.Duration
	}{
		{"1ms buckets", breaker.TimeWindow{Rate: 1, Period: 10 * time.Millisecond, MinCalls: 3}, 65536 * time.Millisecond},
		{"100ms buckets", breaker.TimeWindow{Rate: 1, Period: time.Second, MinCalls: 3}, 65536 * 100 * time.Millisecond},
		{"100ms buckets, twice round", breaker.TimeWindow{Rate: 1, Period: time.Second, MinCalls: 3}, 2 * 65536 * 100 * time.Millisecond},
		{"1s buckets, one bucket", breaker.TimeWindow{Rate: 1, Period: time.Second, Buckets: 1, MinCalls: 3}, 65536 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			play(t, newCounter(t, tt.s), []rec{
				{0, F, false}, {0, F, false},
				{tt.gap, F, false}, // one call in the window: not MinCalls
				{tt.gap, F, false},
				{tt.gap, F, true},
			})
		})
	}
}

func TestTimeWindowLateCallDoesNotEraseTheWindow(t *testing.T) {
	// A caller that read its clock a whole period before releasing its call
	// is outside the window: its call must not replace the newer bucket in
	// the same slot, nor count.
	s := breaker.TimeWindow{Rate: 1, Period: 10 * time.Second, Buckets: 10, MinCalls: 3}
	play(t, newCounter(t, s), []rec{
		{20 * time.Second, F, false}, {20 * time.Second, F, false},
		{10 * time.Second, S, false}, // late by the whole period, same slot
		{20 * time.Second, F, true},
	})
	play(t, newCounter(t, s), []rec{
		{20 * time.Second, F, false},
		{11 * time.Second, S, false}, // late, but still in the window: it counts
		{20 * time.Second, F, false},
		{20 * time.Second, F, false}, // S F F F: 3 of 4
	})
}

func TestTimeWindowExactThreshold(t *testing.T) {
	// 7 failures of 100 calls is a rate of 0.07: it trips, even though
	// 0.07*100 is 7.000000000000001 in floating point.
	for _, tt := range []struct {
		rate     float64
		calls, k int
	}{{0.07, 100, 7}, {0.14, 50, 7}, {0.5, 10, 5}, {1, 3, 3}} {
		c := newCounter(t, breaker.TimeWindow{Rate: tt.rate, Period: time.Second, MinCalls: tt.calls})
		seq := repeat(tt.calls-tt.k, S, 0)
		seq = append(seq, repeat(tt.k-1, F, 0)...)
		seq = append(seq, rec{0, F, true})
		play(t, c, seq)
	}
}

func TestTimeWindowConcurrentCallsInOneBucket(t *testing.T) {
	// Every caller updates one bucket word by compare-and-swap: no call may
	// be lost or counted twice. With MinCalls one more than the calls made,
	// none of them trips, and the next failure does.
	const (
		goroutines = 8
		calls      = 500
	)
	c := newCounter(t, breaker.TimeWindow{Rate: 1, Period: time.Second, MinCalls: goroutines*calls + 1})
	start := make(chan struct{})
	var (
		wg    sync.WaitGroup
		trips atomic.Int64
	)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for range calls {
				if c.Record(F, t0) {
					trips.Add(1)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	assert.Zero(t, trips.Load(), "a call was counted twice")
	assert.True(t, c.Record(F, t0), "a call was lost: %d failures do not reach MinCalls %d", goroutines*calls+1, goroutines*calls+1)
}

func TestTimeWindowConcurrentAcrossBuckets(t *testing.T) {
	// Callers move through many bucket lengths at once, each with its own
	// clock, so buckets are emptied and reused while others record. Once
	// they are done, a window two periods later starts empty.
	const (
		goroutines = 8
		calls      = 2000
	)
	s := breaker.TimeWindow{Rate: 1, Period: 10 * time.Millisecond, Buckets: 10, MinCalls: 5}
	c := newCounter(t, s)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range calls {
				o := S
				if (i+g)%4 == 0 {
					o = F
				}
				c.Record(o, t0.Add(time.Duration(i*(g+1))*10*time.Microsecond))
			}
		}()
	}
	close(start)
	wg.Wait()
	later := time.Duration(calls*goroutines)*10*time.Microsecond + 2*s.Period
	seq := append(repeat(s.MinCalls-1, F, later), rec{later, F, true})
	play(t, c, seq)
}

func TestStrategyValidation(t *testing.T) {
	tests := []struct {
		s     breaker.Strategy
		field string // empty: valid
	}{
		{breaker.Consecutive{Failures: 1}, ""},
		{breaker.Consecutive{Failures: 0}, "breaker.Consecutive.Failures"},
		{breaker.Consecutive{Failures: -3}, "breaker.Consecutive.Failures"},

		{breaker.FailureRate{Rate: 1, Window: 1}, ""},
		{breaker.FailureRate{Rate: 0.5, Window: 10, MinCalls: 10}, ""},
		{breaker.FailureRate{Rate: 0, Window: 10}, "breaker.FailureRate.Rate"},
		{breaker.FailureRate{Rate: -0.5, Window: 10}, "breaker.FailureRate.Rate"},
		{breaker.FailureRate{Rate: 1.5, Window: 10}, "breaker.FailureRate.Rate"},
		{breaker.FailureRate{Rate: math.Nextafter(1, 2), Window: 10}, "breaker.FailureRate.Rate"},
		{breaker.FailureRate{Rate: math.NaN(), Window: 10}, "breaker.FailureRate.Rate"},
		{breaker.FailureRate{Rate: math.Inf(1), Window: 10}, "breaker.FailureRate.Rate"},
		{breaker.FailureRate{Rate: 0.5, Window: 0}, "breaker.FailureRate.Window"},
		{breaker.FailureRate{Rate: 0.5, Window: -1}, "breaker.FailureRate.Window"},
		{breaker.FailureRate{Rate: 0.5, Window: 10, MinCalls: 11}, "breaker.FailureRate.MinCalls"},
		{breaker.FailureRate{Rate: 0.5, Window: 10, MinCalls: -1}, "breaker.FailureRate.MinCalls"},

		{breaker.TimeWindow{Rate: 0.5, Period: time.Second, MinCalls: 1}, ""},
		{breaker.TimeWindow{Rate: 1, Period: time.Millisecond, Buckets: 1, MinCalls: 1}, ""},
		{breaker.TimeWindow{Rate: 1, Period: 10 * time.Millisecond, MinCalls: 1}, ""},
		{breaker.TimeWindow{Rate: 0, Period: time.Second, MinCalls: 1}, "breaker.TimeWindow.Rate"},
		{breaker.TimeWindow{Rate: 1.5, Period: time.Second, MinCalls: 1}, "breaker.TimeWindow.Rate"},
		{breaker.TimeWindow{Rate: math.NaN(), Period: time.Second, MinCalls: 1}, "breaker.TimeWindow.Rate"},
		{breaker.TimeWindow{Rate: 0.5, Period: 0, MinCalls: 1}, "breaker.TimeWindow.Period"},
		{breaker.TimeWindow{Rate: 0.5, Period: -time.Second, MinCalls: 1}, "breaker.TimeWindow.Period"},
		{breaker.TimeWindow{Rate: 0.5, Period: time.Second, Buckets: -1, MinCalls: 1}, "breaker.TimeWindow.Buckets"},
		{breaker.TimeWindow{Rate: 0.5, Period: time.Hour, Buckets: 1<<15 + 1, MinCalls: 1}, "breaker.TimeWindow.Buckets"},
		{breaker.TimeWindow{Rate: 0.5, Period: 9 * time.Millisecond, MinCalls: 1}, "breaker.TimeWindow.Buckets"},
		{breaker.TimeWindow{Rate: 0.5, Period: time.Second, Buckets: 1001, MinCalls: 1}, "breaker.TimeWindow.Buckets"},
		{breaker.TimeWindow{Rate: 0.5, Period: time.Millisecond - 1, Buckets: 1, MinCalls: 1}, "breaker.TimeWindow.Buckets"},
		{breaker.TimeWindow{Rate: 0.5, Period: time.Second, MinCalls: 0}, "breaker.TimeWindow.MinCalls"},
		{breaker.TimeWindow{Rate: 0.5, Period: time.Second, MinCalls: -2}, "breaker.TimeWindow.MinCalls"},
	}
	for _, tt := range tests {
		c, err := tt.s.NewCounter()
		if tt.field == "" {
			assert.NoError(t, err, "%T%+v", tt.s, tt.s)
			assert.NotNil(t, c, "%T%+v", tt.s, tt.s)
			continue
		}
		assert.Nil(t, c, "%T%+v: a counter despite the error", tt.s, tt.s)
		var ce *breaker.ConfigError
		if assert.True(t, errors.As(err, &ce), "%T%+v: error %v is not a *breaker.ConfigError", tt.s, tt.s, err) {
			assert.Equal(t, tt.field, ce.Field, "%T%+v", tt.s, tt.s)
			assert.NotEmpty(t, ce.Problem, "%T%+v", tt.s, tt.s)
			assert.Equal(t, ce.Field+" "+ce.Problem, err.Error())
		}
	}
}

func TestConfigError(t *testing.T) {
	_, err := breaker.FailureRate{Rate: 1.5, Window: 10}.NewCounter()
	assert.Equal(t, &breaker.ConfigError{Field: "breaker.FailureRate.Rate", Problem: "must be in (0, 1], got 1.5"}, err)
	assert.Equal(t, "breaker.FailureRate.Rate must be in (0, 1], got 1.5", err.Error())
}
