// Package latency holds the bucket bounds of the call-duration histogram
// the manager keeps for a breaker registered with Config.TimeCalls
// (manager.Durations), which the Prometheus adapter exports: both number
// the buckets with these bounds.
package latency

import "time"

// Bounds are the upper bounds of the buckets: the bounds Prometheus client
// libraries use by default, from 5ms to 10s. A histogram has one bucket
// more, for the calls longer than the last bound.
var Bounds = [...]time.Duration{
	5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}
