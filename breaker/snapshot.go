package breaker

import "time"

// Snapshot is a breaker's state at one moment. A breaker publishes a new
// Snapshot for every change and never modifies one after publishing it, so a
// Snapshot may be read freely by any goroutine, and must not be modified.
// The way to get one is manager's Breaker.Snapshot.
type Snapshot struct {
	// Gen counts the breaker's transitions: it grows by one with each, so a
	// call admitted in an earlier generation can be told apart.
	Gen uint64
	// Since is when State was entered.
	Since time.Time
	// Until is when the open period or the probe's time ends; zero when
	// there is none or it is not known yet.
	Until time.Time
	// Err is the error a call declined in this snapshot gets: an
	// *OpenError built once, with the snapshot, so that declining
	// allocates nothing. It is nil while the breaker is closed, not
	// halted and not in a slow start; in a slow start, its State is
	// Closed and its Until is the slow start's end.
	Err *OpenError
	// State is the breaker's state.
	State State
	// Forced is set on a breaker forced open by hand: no timer ends it, only
	// Reset does.
	Forced bool
	// Halted is set once the breaker is out of service for good: its
	// manager has stopped, or the breaker was removed from it (then Removed
	// is set too). Every call is refused and every transition is refused;
	// State keeps the state the breaker was in.
	Halted bool
	// Removed is set once the breaker was removed from its manager.
	Removed bool
	// SlowStart is set while the breaker is closed, after a recovery, in a
	// slow start (manager's Config.SlowStart), and nil otherwise.
	SlowStart *SlowStart
}

// SlowStart is a slow start after a recovery: the breaker is closed, and
// admits a share of calls that grows linearly from none at From to all at
// Until. A snapshot's SlowStart must not be modified.
type SlowStart struct {
	// From is when the breaker closed (for a breaker shared with other
	// processes, when the fleet closed), and Until when every call goes
	// through again.
	From, Until time.Time
	// Share is the share of calls, from 0 to 1, admitted now: worked out
	// again at each of the slow start's 100 steps (no closer together
	// than 10ms), from the instant of the step.
	Share float64
}
