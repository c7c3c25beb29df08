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
	"sort"
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

// Share is what one process reported into a count: its calls and its
// failures (of a run, its failures only).
type Share struct{ Calls, Failures int64 }

// Largest returns the sum of the q-1 shares that reported the most
// failures (ties broken by calls), of a count whose quorum is q: what the
// quorum rule takes out of the count before the strategy's own rule
// judges what is left. One process that fails every call so cannot open a
// fleet whose quorum is 2, however many calls it makes; two can; the
// noise of healthy processes alone never does. It returns the zero Share
// for q of 0 or 1. shares is sorted in place.
func Largest(shares []Share, q int) Share {
	if q <= 1 {
		return Share{}
	}
	sort.Slice(shares, func(i, j int) bool {
		if shares[i].Failures != shares[j].Failures {
			return shares[i].Failures > shares[j].Failures
		}
		return shares[i].Calls > shares[j].Calls
	})
	var top Share
	for _, s := range shares[:min(q-1, len(shares))] {
		top.Calls += s.Calls
		top.Failures += s.Failures
	}
	return top
}

// Without returns total less top, never below zero: the count the quorum
// rule judges.
func Without(total, top Share) Share {
	return Share{Calls: max(total.Calls-top.Calls, 0), Failures: max(total.Failures-top.Failures, 0)}
}

// Slide is what one process reported into a window of n buckets, kept in
// two counts of n buckets each, aligned on multiples of n: Cur of the
// span K (buckets K*n to K*n+n-1), Prev of the span before it. It is how
// stores keep a reporter's share of a window in a few words, whatever the
// number of buckets; the share of a window that ends at a bucket inside
// span K counts Cur whole and the part of Prev still inside the window,
// as if Prev's calls were spread evenly over its buckets.
type Slide struct {
	K         int64
	Cur, Prev Share
}

// Add counts s, reported in bucket idx of a window of n buckets.
func (sl Slide) Add(idx int64, n int, s Share) Slide {
	k := floorDiv(idx, int64(n))
	switch {
	case k == sl.K:
	case k == sl.K+1:
		sl.K, sl.Prev, sl.Cur = k, sl.Cur, Share{}
	case k > sl.K:
		sl.K, sl.Prev, sl.Cur = k, Share{}, Share{}
	default:
		// A report older than the span (a late one): counted in the
		// span it reaches.
	}
	sl.Cur.Calls += s.Calls
	sl.Cur.Failures += s.Failures
	return sl
}

// At returns the share of the window of n buckets that ends at bucket idx.
func (sl Slide) At(idx int64, n int) Share {
	k := floorDiv(idx, int64(n))
	j := idx - k*int64(n) // buckets of span k in the window, less one
	left := int64(n) - j - 1
	part := func(s Share) Share {
		return Share{Calls: s.Calls * left / int64(n), Failures: s.Failures * left / int64(n)}
	}
	switch sl.K {
	case k:
		p := part(sl.Prev)
		return Share{Calls: sl.Cur.Calls + p.Calls, Failures: sl.Cur.Failures + p.Failures}
	case k - 1:
		return part(sl.Cur)
	}
	return Share{}
}

// Reached reports whether counts reach a shared strategy's threshold,
// whatever the processes they come from: for a window policy (rate above
// zero) the Rate rule on calls and fails with minCalls, otherwise the
// Consecutive rule on fails with failures. It is what stores count
// towards, and what a process that reads their counts judges them by.
func Reached(rate float64, minCalls int64, failures int, calls, fails int64) bool {
	if rate > 0 {
		return Rate(calls, fails, minCalls, rate)
	}
	return Consecutive(fails, failures)
}
