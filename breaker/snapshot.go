package breaker

import "time"

// Snapshot is a breaker's state at one moment. A breaker publishes a new
// Snapshot for every change and never modifies one after publishing it, so a
// Snapshot may be read freely by any goroutine. The usual way to get one is
// manager's Breaker.Snapshot; the zero Snapshot has no State and admits
// nothing.
type Snapshot struct {
	// Gen counts the breaker's transitions: it grows by one with each, so a
	// call admitted in an earlier generation can be told apart.
	Gen uint64
	// Since is when State was entered.
	Since time.Time
	// Until is when the open period or the probe's time ends; zero when
	// there is none or it is not known yet.
	Until time.Time

	err OpenError // what a declined call gets, built with the snapshot

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

	// The small fields come last, together, so that the struct packs
	// tightly (the state machine adds its counter: 144 bytes in all).
	admit   bool // State == Closed && !Halted: the one check on the hot path
	decline bool // State is Open or Probing, and not Halted
}

// NewSnapshot returns s, of which only the exported fields are read,
// completed for breaker name: what Admits, Declines and Err report follows
// from those fields, and the error is built once, here, with opened (the
// error of the call that opened the breaker, if known) as its Cause. It
// exists for the state machine that publishes snapshots; users read
// snapshots and have no need to build one. Removed implies Halted.
func NewSnapshot(name string, s Snapshot, opened error) Snapshot {
	s.Halted = s.Halted || s.Removed
	s.admit = s.State == Closed && !s.Halted
	s.decline = (s.State == Open || s.State == Probing) && !s.Halted
	s.err = OpenError{}
	if !s.admit {
		s.err = OpenError{Name: name, State: s.State, Until: s.Until, Cause: opened}
	}
	return s
}

// Admits reports whether a call acquired now goes through without becoming
// a probe: the breaker is closed and not halted.
func (s *Snapshot) Admits() bool { return s.admit }

// Declines reports whether a call acquired now is declined without further
// ado: the breaker is open or probing, and not halted.
func (s *Snapshot) Declines() bool { return s.decline }

// Err returns the error a call declined in this snapshot gets: an
// *OpenError built once for the snapshot. It is nil for a closed breaker.
func (s *Snapshot) Err() *OpenError {
	if s.admit {
		return nil
	}
	return &s.err
}
