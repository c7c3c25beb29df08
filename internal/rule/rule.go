// Package rule holds the arithmetic that a breaker counting in its own
// process and every store counting for a fleet must agree on, so that the
// same outcomes trip a local and a shared breaker at the same call: each
// strategy's trip rule, and how the buckets of a time window are numbered.
// It imports nothing of the module, so that package breaker, whose
// strategies count with it, may import it.
package rule

import (
	"math"
	"math/bits"
	"time"
)

// Consecutive is breaker.Consecutive's trip rule: a run of failures
// failures in a row trips a breaker whose threshold is threshold. The local
// counter and the stores, on the run they count, decide with it.
func Consecutive(failures int64, threshold int) bool { return failures >= int64(threshold) }

// Rate is the one trip rule of the rate strategies, breaker.FailureRate
// and breaker.TimeWindow, locally and in every store: a window of calls
// calls, failures of them failures, trips once it holds at least minCalls
// calls and failures/calls >= rate.
//
// It divides rather than comparing failures with rate*calls: the product of
// a decimal rate and a count can round up past the exact number of failures
// (0.07*100 is 7.000000000000001), whereas the quotient, rounded once, equals
// the rate exactly when the two are equal in decimal.
func Rate(calls, failures, minCalls int64, rate float64) bool {
	return calls >= minCalls && calls > 0 && failures > 0 && float64(failures)/float64(calls) >= rate
}

// DefaultBuckets is the bucket count of a breaker.TimeWindow whose Buckets
// is zero.
const DefaultBuckets = 10

// Buckets returns n, or DefaultBuckets for zero.
func Buckets(n int) int {
	if n == 0 {
		return DefaultBuckets
	}
	return n
}

// Width returns the length of one bucket of a window of period cut into n
// buckets (zero meaning DefaultBuckets): period / n.
func Width(period time.Duration, n int) time.Duration {
	return period / time.Duration(Buckets(n))
}

// Bucket returns the index of the bucket of width w > 0 that holds instant
// t: buckets are aligned on the Unix epoch, bucket i covering [i*w, (i+1)*w)
// of Unix time. Stores number their buckets with it (the Redis scripts with
// the same formula on the server's clock, in milliseconds). It holds over
// the whole range of time.Time, past 2262 (where Unix nanoseconds end) too;
// an index beyond int64's range, millions of years away for buckets of a
// millisecond, saturates.
func Bucket(t time.Time, w time.Duration) int64 {
	q, _ := UnixDiv(t, int64(w))
	return q
}

// UnixDiv divides t's Unix time in nanoseconds by w > 0, rounding down: it
// returns the quotient, saturated to int64's range, and the remainder, in
// [0, w). It works on seconds and nanoseconds apart, in 128 bits, so that
// no instant of time.Time overflows.
func UnixDiv(t time.Time, w int64) (q, r int64) {
	sec, nsec := t.Unix(), uint64(t.Nanosecond())
	// sec = a*w + b, 0 <= b < w, so t = (a*1e9)*w + (b*1e9 + nsec).
	a := floorDiv(sec, w)
	b := uint64(sec - a*w)
	hi, lo := bits.Mul64(b, 1e9)
	var carry uint64
	lo, carry = bits.Add64(lo, nsec, 0)
	hi += carry
	// b*1e9 + nsec < (w+1)*1e9: the quotient fits in 64 bits, so hi < w.
	q2, rem := bits.Div64(hi, lo, uint64(w))
	const giga = 1_000_000_000
	switch {
	case a > (math.MaxInt64-int64(q2))/giga:
		return math.MaxInt64, int64(rem)
	case a < math.MinInt64/giga:
		return math.MinInt64, int64(rem)
	}
	return a*giga + int64(q2), int64(rem)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
