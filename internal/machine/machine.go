// Package machine is the state machine of one breaker: pure, with time as
// an argument, driven by package manager.
//
// Machine starts no goroutine and never reads a clock. Every method that
// needs the time takes it as an argument, so the whole life of a breaker can
// be stepped through in a test with fixed instants. It is also safe for
// concurrent use: its state is one immutable Snapshot published through an
// atomic pointer, and every transition is a compare-and-swap from the
// snapshot it was decided on. Callers admitted in the closed state touch
// nothing but that pointer and their strategy's atomic counters.
//
// Machine does not run timers. A transition that needs one (a trip, a failed
// probe, a probe that starts) is reported as a Step; the driver (package
// manager) asks the breaker's recovery policy how long the timer runs, and
// later calls Expire.
package machine

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
)

// Snapshot is a breaker's state at one moment: the public view users read
// (breaker.Snapshot, embedded first), what the hot path decides on, the
// error a declined call gets, and the closed period's counter. A Machine
// publishes a new Snapshot for every change and never modifies one after
// publishing it, so a Snapshot may be read freely by any goroutine. Build
// one with newSnapshot.
type Snapshot struct {
	breaker.Snapshot
	// admit, slow and decline are what Admits, SlowStarting and Declines
	// report, worked out once from the public fields: the hot path reads
	// one of them.
	admit   bool // State == Closed && !Halted, and no slow start runs
	slow    bool // State == Closed && !Halted, and a slow start runs
	decline bool // State is Open or Probing, and not Halted
	// closed is admit || slow: calls admitted now count in counter.
	closed bool
	// held says that no timer ends the state: the driver holds it (see
	// Hold), and Expire leaves it as it is.
	held bool
	// renewed counts the fresh counters the closed period was given
	// (Renew, Reset of a closed breaker), so that a trip decided on a
	// counter since replaced is told apart from one that only lost its
	// compare-and-swap to a republished slow start (see TripBy). It may
	// wrap: a trip would have to wait out 65,536 renewals to be fooled.
	renewed uint16
	// counter is the closed period's own counter. In other states it is
	// the counter of the closed period that ended when the breaker opened
	// (nil if none), kept only so that Window can show the rate it
	// tripped on: Current hands it to no call.
	counter breaker.Counter
	// threshold is, in a slow start, SlowStart.Share as a bound on a
	// random uint64 (SlowStartThreshold): a call is one draw and one
	// comparison.
	threshold uint64
}

// newSnapshot returns a snapshot of breaker name holding s, of which only
// the exported fields are read, completed: Admits, Declines and Err follow
// from those fields, and the error is built once, here, with opened (the
// error of the call that opened the breaker, if known) as its Cause.
// Removed implies Halted. A slow start is kept only in a closed snapshot;
// its threshold is set by at.
func newSnapshot(name string, s breaker.Snapshot, opened error) *Snapshot {
	s.Halted = s.Halted || s.Removed
	closed := s.State == breaker.Closed && !s.Halted
	if !closed {
		s.SlowStart = nil
	}
	slow := s.SlowStart != nil
	n := &Snapshot{
		admit:   closed && !slow,
		slow:    slow,
		closed:  closed,
		decline: (s.State == breaker.Open || s.State == breaker.Probing) && !s.Halted,
	}
	n.Snapshot, n.Err = s, nil
	switch {
	case slow:
		// A call the slow start declines is told when every call
		// goes through again.
		n.Err = &breaker.OpenError{Name: name, State: breaker.Closed, Until: s.SlowStart.Until}
	case !n.admit:
		// Apart from the snapshot: a closed one, what most breakers
		// hold most of the time, carries no error and no room for one.
		n.Err = &breaker.OpenError{Name: name, State: s.State, Until: s.Until, Cause: opened}
	}
	return n
}

// Admits reports whether a call acquired now goes through without becoming
// a probe and without a slow start's say: the breaker is closed, not
// halted, and not in a slow start.
func (s *Snapshot) Admits() bool { return s.admit }

// SlowStarting reports whether the breaker is closed, not halted, and in a
// slow start: a call acquired now goes through if SlowStartAdmits says so,
// and is declined with Err otherwise.
func (s *Snapshot) SlowStarting() bool { return s.slow }

// SlowStartAdmits reports whether the slow start of s admits a call for
// which r was drawn uniformly at random from all uint64 values, at the
// share of its last tick (see SlowStartTick). It is true outside a slow
// start.
func (s *Snapshot) SlowStartAdmits(r uint64) bool { return !s.slow || r < s.threshold }

// Admitted is the share of calls, from 0 to 1, that a call acquired in s
// goes through with, probes aside: 1 when it Admits, the share of its last
// tick in a slow start, and 0 otherwise.
func (s *Snapshot) Admitted() float64 {
	switch {
	case s.admit:
		return 1
	case s.slow:
		return s.SlowStart.Share
	}
	return 0
}

// at sets the share of s's slow start, if it has one, to that at now. s
// must not be published yet.
func (s *Snapshot) at(now time.Time) *Snapshot {
	if s.slow {
		from, until := s.SlowStart.From, s.SlowStart.Until
		s.SlowStart = &breaker.SlowStart{From: from, Until: until, Share: SlowStartShare(from, until, now)}
		s.threshold = SlowStartThreshold(from, until, now)
	}
	return s
}

// Declines reports whether a call acquired now is declined without further
// ado, with Err: the breaker is open or probing, and not halted.
func (s *Snapshot) Declines() bool { return s.decline }

// Ticket is what an admitted call holds until it reports its outcome: the
// generation it was admitted in, and whether it is the probe.
type Ticket struct {
	Gen   uint64
	Probe bool
}

// Step is one transition the machine made.
type Step struct {
	breaker.Transition
	// Gen is the generation the transition entered.
	Gen uint64
	// At is when it happened.
	At time.Time
	// Outcome is the outcome of the call that caused it, or zero.
	Outcome classify.Outcome
	// Cause says what caused it.
	Cause breaker.Cause
	// Err is the error of the call that caused it, when that call was
	// released with one; nil otherwise.
	Err error
	// Until, when set, is the end of the state's timer, decided elsewhere
	// (the state shared with other processes, a probe's lease): the
	// driver arms it instead of deciding one (NeedsTimer).
	Until time.Time
}

// NeedsTimer reports whether the state entered by the step runs a timer
// whose length the breaker's recovery policy decides: the three transitions
// {closed, open}, {probing, open} and {half_open, probing}, unless the
// breaker was forced open, or the step follows the state shared with
// other processes (Mirror), whose timers are theirs.
func (s Step) NeedsTimer() bool {
	switch s.Transition {
	case breaker.Transition{From: breaker.Closed, To: breaker.Open},
		breaker.Transition{From: breaker.Probing, To: breaker.Open},
		breaker.Transition{From: breaker.HalfOpen, To: breaker.Probing}:
		return s.Cause != breaker.CauseForceOpen && s.Cause != breaker.CauseShared
	}
	return false
}

// Release is what became of a released Ticket.
type Release uint8

const (
	// Counted: the outcome was recorded by the strategy (a closed-state
	// call) or decided the probe.
	Counted Release = iota + 1
	// Stale: the ticket was granted in an earlier generation; nothing
	// changed.
	Stale
)

// Machine is one breaker's state machine. It is safe for concurrent use; see
// the package documentation.
//
// Every closed period counts in a breaker.Counter of its own, made by the strategy
// as the breaker closes and published in the same snapshot as the closed
// state. An outcome reported for an earlier period can therefore never
// reach the counter of the current one, however late it comes: it finds
// its own period's counter, which nothing reads any more.
type Machine struct {
	cur   atomic.Pointer[Snapshot]
	strat atomic.Pointer[strategy]
	name  string
	clock atomic.Bool // a counter that may still be current uses the clock
	// slowStart is the length of the slow start that follows a recovery,
	// a time.Duration; zero: none.
	slowStart atomic.Int64
}

// strategy is the breaker's strategy and the first counter it made, kept in
// case the strategy fails later.
type strategy struct {
	s     breaker.Strategy
	first breaker.Counter
}

// firstCounter validates s by making its first counter.
func (m *Machine) firstCounter(s breaker.Strategy) (breaker.Counter, error) {
	c, err := s.NewCounter()
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, &breaker.ConfigError{Field: fmt.Sprintf("%T", s), Problem: "NewCounter returned a nil Counter"}
	}
	return c, nil
}

// NewMachine returns a closed breaker named name, tripped by strategy s,
// that entered the closed state at now. It fails if the strategy is
// invalid.
func NewMachine(name string, s breaker.Strategy, now time.Time) (*Machine, error) {
	m := new(Machine)
	if err := m.Init(name, s, now); err != nil {
		return nil, err
	}
	return m, nil
}

// Init makes a zero Machine what NewMachine returns, for drivers that keep
// the machine inside a larger struct. It must be called before any other
// method, and only once.
func (m *Machine) Init(name string, s breaker.Strategy, now time.Time) error {
	return m.InitSlow(name, s, 0, now)
}

// InitSlow is Init for a breaker with a slow start of length slow after
// each recovery (see SetSlowStart).
func (m *Machine) InitSlow(name string, s breaker.Strategy, slow time.Duration, now time.Time) error {
	c, err := m.firstCounter(s)
	if err != nil {
		return err
	}
	m.name = name
	m.slowStart.Store(int64(max(slow, 0)))
	m.strat.Store(&strategy{s: s, first: c})
	m.clock.Store(c.UsesClock())
	next := m.snapshot(breaker.Closed, 1, now, time.Time{}, false, false, nil)
	next.counter = c
	m.cur.Store(next)
	return nil
}

// Name returns the breaker's name.
func (m *Machine) Name() string { return m.name }

// UsesClock reports whether the strategy's counters need the time of each
// call (see breaker.Counter.UsesClock). While Reconfigure replaces a strategy
// whose counters use the clock by one whose counters do not, or the other way
// round, it is true.
func (m *Machine) UsesClock() bool { return m.clock.Load() }

// Strategy returns the breaker's strategy.
func (m *Machine) Strategy() breaker.Strategy { return m.strat.Load().s }

// newCounter returns a fresh counter for a new closed period. A strategy that
// could make one before but fails now, or panics, falls back on the first
// counter: the transition runs on a caller's goroutine or the manager's,
// neither of which a strategy of the user's may bring down.
func (m *Machine) newCounter() (c breaker.Counter) {
	st := m.strat.Load()
	defer func() {
		if recover() != nil {
			c = st.first
		}
	}()
	if c, err := st.s.NewCounter(); err == nil && c != nil {
		return c
	}
	return st.first
}

// Reconfigure makes s the breaker's strategy, at now. A closed breaker
// counts with s at once, from a fresh window, in a new generation (the
// returned step, closed->closed with no cause): the outcome of a call
// admitted before lands in the old window, as any stale outcome does. In
// the other states the state does not change and the next closed period
// counts with s. It fails, and changes nothing, if s is invalid; a halted
// machine only takes the strategy.
func (m *Machine) Reconfigure(s breaker.Strategy, now time.Time) (Step, bool, error) {
	c, err := m.firstCounter(s)
	if err != nil {
		return Step{}, false, err
	}
	// UsesClock must be true whenever a counter that may be current uses
	// the clock: raised before s can make one, lowered only once no
	// counter of the old strategy can be current any more.
	clock := c.UsesClock()
	if clock {
		m.clock.Store(true)
	}
	m.strat.Store(&strategy{s: s, first: c})
	var step Step
	var ok bool
	for {
		cur := m.cur.Load()
		var next *Snapshot
		if cur.closed {
			// The slow start, if one runs, goes on: the new
			// generation is a new window, not a recovery.
			next = newSnapshot(m.name, breaker.Snapshot{
				State: breaker.Closed, Gen: cur.Gen + 1, Since: cur.Since, SlowStart: cur.SlowStart,
			}, nil)
			next.counter, next.threshold = c, cur.threshold
		} else {
			// The same state, republished: a transition to closed
			// decided on the old snapshot, with a counter of the old
			// strategy, now fails its compare-and-swap and is decided
			// again, with s.
			copied := *cur
			next = &copied
		}
		if m.cur.CompareAndSwap(cur, next) {
			if cur.closed {
				step = Step{Transition: breaker.Transition{From: breaker.Closed, To: breaker.Closed}, Gen: next.Gen, At: now}
				ok = true
			}
			break
		}
	}
	if !clock {
		m.clock.Store(false)
	}
	return step, ok, nil
}

// Windowed is a breaker.Counter that keeps a window of recent outcomes
// and can say what it holds (see breaker.Counter).
type Windowed interface {
	Window(now time.Time) (calls, failures uint64)
}

// Window returns the calls and failures in the window of the breaker's
// strategy: of the current closed period as of now, or, while the breaker is
// not closed, of the closed period that ended when it opened, as of then.
// ok is false for a strategy without a window (see Windowed).
func (m *Machine) Window(now time.Time) (calls, failures uint64, ok bool) {
	s := m.cur.Load()
	w, ok := s.counter.(Windowed)
	if !ok {
		return 0, 0, false
	}
	if s.State != breaker.Closed {
		now = s.Since
	}
	calls, failures = w.Window(now)
	return calls, failures, true
}

// Snapshot returns the current state.
func (m *Machine) Snapshot() *Snapshot { return m.cur.Load() }

// snapshot builds a snapshot; opened is the error of the call that opened
// the breaker, for its declined calls' OpenError.Cause.
func (m *Machine) snapshot(st breaker.State, gen uint64, since, until time.Time, forced, halted bool, opened error) *Snapshot {
	return newSnapshot(m.name, breaker.Snapshot{
		State: st, Gen: gen, Since: since, Until: until, Forced: forced, Halted: halted,
	}, opened)
}

// opened is the error of the call that opened the breaker of snapshot s,
// if known: the cause its declined calls report.
func opened(s *Snapshot) error {
	if s.Err != nil {
		return s.Err.Cause
	}
	return nil
}

// openedBy is the cause a snapshot entered by moving from s to state to,
// because of a call that returned err, reports: err for an opening, none
// once closed, and otherwise the cause of the opening the breaker is
// recovering from.
func openedBy(s *Snapshot, to breaker.State, err error) error {
	switch to {
	case breaker.Open:
		return err
	case breaker.Closed:
		return nil
	}
	return opened(s)
}

// move publishes the state to if the current snapshot is still from; err is
// the error of the call that made the move, if any.
func (m *Machine) move(from *Snapshot, to breaker.State, now time.Time, o classify.Outcome, cause breaker.Cause, forced bool, err error) (Step, bool) {
	if from.Halted {
		return Step{}, false
	}
	p := breaker.Snapshot{State: to, Gen: from.Gen + 1, Since: now, Forced: forced}
	if to == breaker.Closed && cause == breaker.CauseProbe {
		// A recovery: the probe succeeded.
		m.slowStartFrom(&p, now, now)
	}
	next := newSnapshot(m.name, p, openedBy(from, to, err)).at(now)
	if to == breaker.Closed {
		next.counter = m.newCounter()
	} else {
		next.counter = from.counter
	}
	if !m.cur.CompareAndSwap(from, next) {
		return Step{}, false
	}
	return Step{Transition: breaker.Transition{From: from.State, To: to}, Gen: next.Gen, At: now, Outcome: o, Cause: cause, Err: err}, true
}

// slowStartFrom gives the closed snapshot p the slow start that began at
// from, if the breaker has one and it still runs at now.
func (m *Machine) slowStartFrom(p *breaker.Snapshot, from, now time.Time) {
	if d := m.SlowStart(); d > 0 && from.Add(d).After(now) {
		p.SlowStart = &breaker.SlowStart{From: from, Until: from.Add(d)}
	}
}

// Acquire admits a call or declines it. In the closed state it returns a
// ticket at once, slow start or not: the driver applies a slow start
// (Snapshot.SlowStartAdmits) before it asks. In half_open the first caller becomes the probe, which
// moves the breaker to probing at now (the returned step); every other
// caller is declined with the snapshot's *breaker.OpenError. A halted machine
// declines with a nil error and a zero ticket: the driver decides what to
// tell the caller.
func (m *Machine) Acquire(now time.Time) (Ticket, Step, *breaker.OpenError) {
	for {
		s := m.cur.Load()
		switch {
		case s.closed:
			return Ticket{Gen: s.Gen}, Step{}, nil
		case s.Halted:
			return Ticket{}, Step{}, nil
		case s.State != breaker.HalfOpen:
			return Ticket{}, Step{}, s.Err
		}
		if step, ok := m.move(s, breaker.Probing, now, 0, breaker.CauseProbe, false, nil); ok {
			return Ticket{Gen: step.Gen, Probe: true}, step, nil
		}
		// Another caller moved the breaker first; look again.
	}
}

// Current returns the counter of the closed period t was granted in, if t
// is still current (the breaker has not changed generation since), or nil.
// Record is Current followed by the counter's Record.
func (m *Machine) Current(t Ticket) breaker.Counter {
	if s := m.cur.Load(); s.Gen == t.Gen && s.closed && !t.Probe {
		return s.counter
	}
	return nil
}

// Record reports the outcome of a call admitted in the closed state. It
// returns Stale, and changes nothing, if the breaker has changed generation
// since the ticket was granted. Otherwise it records o in the strategy's
// counter and reports whether the breaker should now trip: then the caller
// calls Trip. now is only read by counters whose UsesClock is true.
func (m *Machine) Record(t Ticket, o classify.Outcome, now time.Time) (trip bool, r Release) {
	c := m.Current(t)
	if c == nil {
		return false, Stale
	}
	return c.Record(o, now), Counted
}

// Trip opens a closed breaker of generation gen, at now, because of a call
// with outcome o that returned err (nil if unknown), which the open
// period's OpenError reports as its Cause and the step carries. It does
// nothing if the breaker is no longer that closed generation.
func (m *Machine) Trip(gen uint64, o classify.Outcome, err error, now time.Time) (Step, bool) {
	return m.TripBy(gen, o, err, breaker.CauseTrip, now)
}

// TripBy is Trip with the cause the step reports: breaker.CauseTrip, or
// breaker.CauseAlone for a shared breaker that opens in its process alone.
func (m *Machine) TripBy(gen uint64, o classify.Outcome, err error, cause breaker.Cause, now time.Time) (Step, bool) {
	s := m.cur.Load()
	for {
		if s.Gen != gen || s.State != breaker.Closed {
			return Step{}, false
		}
		if step, ok := m.move(s, breaker.Open, now, o, cause, false, err); ok {
			return step, true
		}
		// A slow start republished in the same period (it ended, or
		// its length changed) takes the trip as the snapshot it
		// replaced would have; a fresh counter (Renew, Reset) does not:
		// the counts the trip was decided on are gone.
		cur := m.cur.Load()
		if cur.Gen != gen || cur.renewed != s.renewed {
			return Step{}, false
		}
		s = cur
	}
}

// EndProbe reports the probe's outcome: a success closes the breaker, a
// failure re-opens it, and ignore gives the probe slot back (half_open). A
// ticket that is not the current probe is Stale and changes nothing: the
// probe's time ran out, or the breaker was reset or forced open meanwhile.
// err is the error the probe returned (nil if unknown): the Cause of the
// OpenError of the period a failure opens.
func (m *Machine) EndProbe(t Ticket, o classify.Outcome, err error, now time.Time) (Step, Release) {
	to := breaker.Open
	switch o {
	case classify.Success:
		to = breaker.Closed
	case classify.Ignore:
		to = breaker.HalfOpen
	}
	for {
		s := m.cur.Load()
		if !t.Probe || t.Gen != s.Gen || s.State != breaker.Probing || s.Halted {
			return Step{}, Stale
		}
		// The swap also fails when SetUntil published the probe's
		// deadline meanwhile: a new snapshot of the same generation, in
		// which the probe is still current. Look again.
		if step, ok := m.move(s, to, now, o, breaker.CauseProbe, false, err); ok {
			return step, Counted
		}
	}
}

// Expire ends the timer of generation gen at now: an open period ends
// (open -> half_open) or a probe's time runs out (probing -> half_open, and
// the probe's ticket becomes stale). It does nothing if the breaker has
// moved on from gen, is forced open, or has a deadline (Until) later than
// now: SetUntil may have moved the end of the period.
func (m *Machine) Expire(gen uint64, now time.Time) (Step, bool) {
	for {
		s := m.cur.Load()
		if s.Gen != gen || s.Forced || s.held || s.Halted || (s.State != breaker.Open && s.State != breaker.Probing) || now.Before(s.Until) {
			return Step{}, false
		}
		if step, ok := m.move(s, breaker.HalfOpen, now, 0, breaker.CauseTimer, false, nil); ok {
			return step, true
		}
	}
}

// SetUntil records, for generation gen, when its open period or probe time
// ends, so that declined calls can say so. It makes no transition.
func (m *Machine) SetUntil(gen uint64, until time.Time) bool {
	for {
		s := m.cur.Load()
		if s.Gen != gen || s.closed || s.Halted {
			return false
		}
		next := m.snapshot(s.State, s.Gen, s.Since, until, s.Forced, false, opened(s))
		next.counter = s.counter
		if m.cur.CompareAndSwap(s, next) {
			return true
		}
	}
}

// Hold ends the timer of generation gen, an open or probing state, without
// a transition: the state lasts until the driver moves the breaker (a
// shared breaker whose store cannot be reached, failing closed, stays open
// until the store answers). It reports false if the breaker has moved on
// from gen, is halted, or is not open or probing.
func (m *Machine) Hold(gen uint64) bool {
	for {
		s := m.cur.Load()
		if s.Gen != gen || s.Halted || s.State != breaker.Open && s.State != breaker.Probing {
			return false
		}
		next := m.snapshot(s.State, s.Gen, s.Since, time.Time{}, s.Forced, false, opened(s))
		next.counter, next.held = s.counter, true
		if m.cur.CompareAndSwap(s, next) {
			return true
		}
	}
}

// ForceOpen opens the breaker at now until Reset, whatever its state; no
// timer closes it. It reports false if the breaker was already forced open.
func (m *Machine) ForceOpen(now time.Time) (Step, bool) {
	for {
		s := m.cur.Load()
		if s.Forced || s.Halted {
			return Step{}, false
		}
		if step, ok := m.move(s, breaker.Open, now, 0, breaker.CauseForceOpen, true, nil); ok {
			return step, true
		}
	}
}

// Reset closes the breaker at now, whatever its state, with cause (breaker.CauseReset
// for a reset by hand, breaker.CauseRestart for a supervisor's restart), with a fresh
// counter. A breaker forced open stays forced open on a restart; only
// breaker.CauseReset lifts that. It reports false if the breaker was already
// closed: then it only replaces the counter, in the same generation, so
// that calls admitted before still count, in the new counter or the old.
func (m *Machine) Reset(now time.Time, cause breaker.Cause) (Step, bool) {
	for {
		s := m.cur.Load()
		if s.Halted {
			return Step{}, false
		}
		if s.State == breaker.Closed {
			// A slow start ends too: a reset, or a restart, is not
			// a recovery.
			if m.renew(s, true) {
				return Step{}, false
			}
			continue
		}
		if s.Forced && cause != breaker.CauseReset {
			return Step{}, false
		}
		if step, ok := m.move(s, breaker.Closed, now, 0, cause, false, nil); ok {
			return step, true
		}
	}
}

// Renew gives the closed generation gen a fresh counter, in the same
// generation, as if its closed period started again. It reports false,
// and does nothing, if the breaker is no longer that closed generation.
// Calls admitted before still count, in the new counter or the old. A
// slow start goes on.
func (m *Machine) Renew(gen uint64) bool {
	for {
		s := m.cur.Load()
		if s.Gen != gen || !s.closed {
			return false
		}
		if m.renew(s, false) {
			return true
		}
	}
}

// renew publishes a copy of the closed snapshot s with a fresh counter,
// without its slow start if endSlow is set, unless s is no longer current.
func (m *Machine) renew(s *Snapshot, endSlow bool) bool {
	next := s
	if endSlow && s.slow {
		next = m.republish(s, time.Time{}, time.Time{})
	} else {
		copied := *s
		next = &copied
	}
	next.counter = m.newCounter()
	next.renewed = s.renewed + 1
	return m.cur.CompareAndSwap(s, next)
}

// republish returns the closed snapshot s with its slow start ending at
// until instead, with its share at now, or without one if until is zero:
// the same generation, counter and period.
func (m *Machine) republish(s *Snapshot, until, now time.Time) *Snapshot {
	p := s.Snapshot
	p.SlowStart = nil
	if !until.IsZero() {
		p.SlowStart = &breaker.SlowStart{From: s.SlowStart.From, Until: until}
	}
	next := newSnapshot(m.name, p, nil).at(now)
	next.counter, next.renewed = s.counter, s.renewed
	if next.slow && until.Equal(s.SlowStart.Until) {
		// A tick: the same error, so that a caller that keeps what it
		// built from one (an adapter's status) keeps it.
		next.Err = s.Err
	}
	return next
}

// SlowStart returns the length of the slow start that follows a recovery.
func (m *Machine) SlowStart() time.Duration { return time.Duration(m.slowStart.Load()) }

// SetSlowStart makes d the length of the slow start that follows each
// recovery (a successful probe closes the breaker, or Mirror closes it
// with a slow start's start), at now; zero or negative: none. A slow
// start that runs is measured against d from its start: it ends at once if
// d is zero or its end is no later than now.
func (m *Machine) SetSlowStart(d time.Duration, now time.Time) {
	m.slowStart.Store(int64(max(d, 0)))
	for {
		s := m.cur.Load()
		if !s.slow {
			return
		}
		var until time.Time
		if end := s.SlowStart.From.Add(d); d > 0 && end.After(now) {
			until = end
		}
		if until.Equal(s.SlowStart.Until) || m.cur.CompareAndSwap(s, m.republish(s, until, now)) {
			return
		}
	}
}

// SlowStartTick works out again, at now, the share of calls admitted by
// the slow start of generation gen, and returns when it should be worked
// out next (SlowStartNext). Once now reaches the end of the slow start, it
// ends it: the closed period goes on at full rate, in the same generation,
// and ok is false. ok is false too, and nothing changes, if the breaker has
// moved on from gen or is in no slow start.
func (m *Machine) SlowStartTick(gen uint64, now time.Time) (next time.Time, ok bool) {
	for {
		s := m.cur.Load()
		if s.Gen != gen || !s.slow {
			return time.Time{}, false
		}
		var until time.Time
		if now.Before(s.SlowStart.Until) {
			until = s.SlowStart.Until
		}
		if m.cur.CompareAndSwap(s, m.republish(s, until, now)) {
			if until.IsZero() {
				return time.Time{}, false
			}
			return SlowStartNext(s.SlowStart.From, until, now), true
		}
	}
}

// SlowStartNext returns when the slow start of generation gen, if it still
// runs, should be worked out again after now (see SlowStartTick); ok is
// false if there is none.
func (m *Machine) SlowStartNext(gen uint64, now time.Time) (next time.Time, ok bool) {
	s := m.cur.Load()
	if s.Gen != gen || !s.slow {
		return time.Time{}, false
	}
	return SlowStartNext(s.SlowStart.From, s.SlowStart.Until, now), true
}

// Halt stops the machine for good: from now on every Acquire is declined
// with a zero ticket and a nil error, every ticket is stale, and no
// transition is made. The snapshot keeps the state the breaker was in.
func (m *Machine) Halt() { m.halt(false) }

// Remove is Halt for a breaker removed from its driver: the snapshot says
// Removed, so that the driver can tell its callers so. It reports false if
// the machine was already removed.
func (m *Machine) Remove() bool { return m.halt(true) }

func (m *Machine) halt(removed bool) bool {
	for {
		s := m.cur.Load()
		if s.Removed || (s.Halted && !removed) {
			return false
		}
		next := newSnapshot(m.name, breaker.Snapshot{
			State: s.State, Gen: s.Gen + 1, Since: s.Since, Until: s.Until, Forced: s.Forced, Halted: true, Removed: removed,
		}, opened(s))
		next.counter = s.counter
		if m.cur.CompareAndSwap(s, next) {
			return true
		}
	}
}

// Mirror moves the breaker of generation gen to state st at now because
// the state it shares with other processes says so, with until as the end
// of its timer (zero if none is known), forced open (st must then be Open)
// or not. A move to Closed with slowUntil after now joins the fleet's slow
// start that ends then, where it stands: the breaker's own SlowStart
// before slowUntil is its start (none if the breaker has none). Unlike
// the other transitions it may go between any two states,
// since it follows decisions made elsewhere: a fleet's ForceOpen forces it,
// a fleet's Reset lifts that. Like every transition it was decided on one
// generation, and applies only in it: it reports false if the breaker has
// moved on from gen, is already in st with the same forcing, or is halted,
// and refuses a state that is not one of the four, or forced for a state
// other than Open. cause, when not nil, is why the breaker was opened
// elsewhere: the Cause of the OpenError of the opened state it moves to,
// and the Err of a step to open.
func (m *Machine) Mirror(gen uint64, st breaker.State, until time.Time, forced bool, slowUntil time.Time, cause error, now time.Time) (Step, bool) {
	if st < breaker.Closed || st > breaker.Probing || forced && st != breaker.Open {
		return Step{}, false
	}
	if forced {
		until = time.Time{}
	}
	for {
		s := m.cur.Load()
		if s.Gen != gen || s.State == st && s.Forced == forced || s.Halted {
			return Step{}, false
		}
		opener := openedBy(s, st, nil)
		if cause != nil && st != breaker.Closed && !forced {
			opener = cause
		}
		p := breaker.Snapshot{State: st, Gen: s.Gen + 1, Since: now, Until: until, Forced: forced}
		if d := m.SlowStart(); st == breaker.Closed && d > 0 && slowUntil.After(now) {
			p.SlowStart = &breaker.SlowStart{From: slowUntil.Add(-d), Until: slowUntil}
		}
		next := newSnapshot(m.name, p, opener).at(now)
		if st == breaker.Closed {
			next.counter = m.newCounter()
		} else {
			next.counter = s.counter
		}
		if m.cur.CompareAndSwap(s, next) {
			step := Step{Transition: breaker.Transition{From: s.State, To: st}, Gen: next.Gen, At: now, Cause: breaker.CauseShared, Until: until}
			if st == breaker.Open && !forced {
				step.Err = cause
			}
			return step, true
		}
	}
}

// After returns t+d, or the latest instant a time.Time can hold if that is
// past it, and never an instant before t: a period too long to represent
// lasts until the end of time rather than wrapping into the past, where a
// timer armed for it would fire at once and, re-armed, fire again.
func After(t time.Time, d time.Duration) time.Time {
	if d <= 0 {
		return t
	}
	if at := t.Add(d); at.After(t) {
		return at
	}
	return EndOfTime
}

// EndOfTime is the latest instant a time.Time can hold.
var EndOfTime = time.Unix(1<<63-1-unixToInternal, 999_999_999)

// unixToInternal is the number of seconds from the zero time.Time (January
// 1 of year 1) to the Unix epoch.
const unixToInternal = (1969*365 + 1969/4 - 1969/100 + 1969/400) * 24 * 60 * 60
