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
	// Halted is set once the breaker's manager has halted: every call is
	// refused and every transition is refused.
	Halted bool

	// The small fields come last, together, so that the struct packs
	// tightly (the state machine adds its counter and stays in 128 bytes).
	admit   bool // State == Closed && !Halted: the one check on the hot path
	decline bool // State is Open or Probing, and not Halted
}

// NewSnapshot returns the snapshot of breaker name in state st, generation
// gen, entered at since, with until as the end of its timer (zero if none).
// It exists for the state machine that publishes snapshots; users read
// snapshots and have no need to build one.
func NewSnapshot(name string, st State, gen uint64, since, until time.Time, forced, halted bool) Snapshot {
	s := Snapshot{State: st, Gen: gen, Since: since, Until: until, Forced: forced, Halted: halted}
	s.admit = st == Closed && !halted
	s.decline = (st == Open || st == Probing) && !halted
	if !s.admit {
		s.err = OpenError{Name: name, State: st, Until: until}
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
