package breaker

import "math/bits"

// RateCounts returns, for a counter made by FailureRate.NewCounter, the
// running failure count that Record compares against the threshold and the
// number of failures the ring of bits actually holds. The two must agree
// whenever no Record is running.
func RateCounts(c Counter) (running, ring int64) {
	rc := c.(*rateCounter)
	for i := range rc.bits {
		ring += int64(bits.OnesCount64(rc.bits[i].Load()))
	}
	return rc.failures.Load(), ring
}
