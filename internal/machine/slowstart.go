package machine

import (
	"math"
	"math/bits"
	"time"
)

// A slow start admits a share of calls that grows linearly over its length,
// and the share a snapshot holds is worked out again at each tick: in
// slowStartSteps steps, no closer together than slowStartTick. The driver
// runs the ticks (SlowStartTick), so a call pays no clock read: reading one
// costs more than a whole closed call on some machines.
const (
	slowStartSteps = 100
	slowStartTick  = 10 * time.Millisecond
)

// SlowStartShare is the share of calls, from 0 to 1, that a slow start
// running from from to until admits at now: (now-from)/(until-from), which
// grows linearly from none at from (and before) to all at until (and
// after). A slow start of no length admits every call.
func SlowStartShare(from, until, now time.Time) float64 {
	total, done := until.Sub(from), now.Sub(from)
	switch {
	case done >= total:
		return 1
	case done <= 0:
		return 0
	}
	return float64(done) / float64(total)
}

// SlowStartThreshold is SlowStartShare as a threshold on a uniformly random
// uint64 r: the call is admitted if r < SlowStartThreshold(from, until,
// now), which happens with probability SlowStartShare(from, until, now),
// save that a share of 1 is 1-2^-64. It is worked out once per tick, so
// that a call's admission is one random draw and one comparison.
func SlowStartThreshold(from, until, now time.Time) uint64 {
	total, done := until.Sub(from), now.Sub(from)
	switch {
	case done >= total:
		return math.MaxUint64
	case done <= 0:
		return 0
	}
	// done * 2^64 / total: done < total, so the quotient fits.
	q, _ := bits.Div64(uint64(done), 0, uint64(total))
	return q
}

// SlowStartAdmits is the admission rule of a slow start from from to until:
// whether a call made at now, for which r was drawn uniformly at random
// from all uint64 values, goes through. Every call goes through at until
// and after.
func SlowStartAdmits(from, until, now time.Time, r uint64) bool {
	return !now.Before(until) || r < SlowStartThreshold(from, until, now)
}

// SlowStartNext is the tick after now of a slow start from from to until:
// the next of the instants that divide it into 100 equal steps (no shorter
// than 10ms), or until, when the slow start ends. The share is worked out
// again at each.
func SlowStartNext(from, until, now time.Time) time.Time {
	total := until.Sub(from)
	step := max(total/slowStartSteps, slowStartTick)
	done := now.Sub(from)
	if done < 0 {
		return from
	}
	next := from.Add((done/step + 1) * step)
	if next.After(until) {
		return until
	}
	return next
}
