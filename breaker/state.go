package breaker

import "strconv"

// State is where a breaker is in its cycle. The zero value is not a state.
type State uint8

const (
	// Closed lets every call through and counts their outcomes.
	Closed State = iota + 1
	// Open declines every call at once until its open period ends.
	Open
	// HalfOpen lets exactly one call through, the probe; the caller that
	// takes it moves the breaker to Probing.
	HalfOpen
	// Probing has one probe in flight and declines every other call.
	Probing
	// Halted is not a state of the cycle but what a breaker reports once
	// its manager has halted for good after too many panics in callbacks:
	// no transition happens any more, and calls are declined with
	// manager.ErrStopped, or let through unprotected if the manager fails
	// open.
	Halted
)

// String returns "closed", "open", "half_open", "probing" or "halted".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half_open"
	case Probing:
		return "probing"
	case Halted:
		return "halted"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Transition is a change of state.
type Transition struct{ From, To State }

// String returns the transition as "from->to", for example "closed->open".
func (t Transition) String() string { return t.From.String() + "->" + t.To.String() }

// Cause says what made a transition happen.
type Cause uint8

const (
	// CauseTrip: the strategy of a closed breaker saw enough failures.
	CauseTrip Cause = iota + 1
	// CauseProbe: a caller became the probe, or the probe's outcome was
	// reported (success closes, failure re-opens, ignore frees the slot).
	CauseProbe
	// CauseTimer: an open period or a probe's time ran out.
	CauseTimer
	// CauseForceOpen: the breaker was forced open by hand.
	CauseForceOpen
	// CauseReset: the breaker was reset to closed by hand.
	CauseReset
	// CauseRestart: the manager restarted the breaker after a panic in a
	// user callback.
	CauseRestart
	// CauseShared: the breaker followed its state shared with other
	// processes through a store.
	CauseShared
	// CauseAlone: a shared breaker with a quorum (manager.Config.Quorum)
	// tripped on its own process's failures while the fleet's were short
	// of the quorum: it opens in its process alone, for its own period and
	// with its own probe, and the fleet goes on.
	CauseAlone
	// CauseHalfOpen: the open period was ended by hand (HalfOpen): the
	// next call is the probe.
	CauseHalfOpen
)

// String returns a lowercase name such as "trip" or "timer".
func (c Cause) String() string {
	switch c {
	case CauseTrip:
		return "trip"
	case CauseProbe:
		return "probe"
	case CauseTimer:
		return "timer"
	case CauseForceOpen:
		return "force_open"
	case CauseReset:
		return "reset"
	case CauseRestart:
		return "restart"
	case CauseShared:
		return "shared"
	case CauseAlone:
		return "alone"
	case CauseHalfOpen:
		return "half_open"
	case 0:
		return "none"
	}
	return "cause(" + strconv.Itoa(int(c)) + ")"
}
