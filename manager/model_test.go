package manager_test

import (
	"context"
	"fmt"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/manager"
	"github.com/fusebox-go/fusebox/recover"
)

// This file holds the references the reliability tests compare the manager
// with: the state graph of docs/architecture.md (with the manual and shared edges),
// a checker of each breaker's event stream against it, and refModel, a
// plain sequential model of one breaker driven by the fuzz target.

// checkEdge reports why e is not an edge of the state graph, or nil. The
// edges are those of the state graph, each with the cause that makes it:
//
//	closed    -> open       trip (a failure)
//	open      -> half_open  timer
//	half_open -> probing    probe (a caller took the probe)
//	probing   -> closed     probe (success)
//	probing   -> open       probe (failure)
//	probing   -> half_open  probe (ignore) or timer (the probe ran out of time)
//
// plus the manual ones: any state -> open by ForceOpen, any state but closed
// -> closed by Reset or a supervisor's restart, any state -> another by a
// shared breaker following its store. Events of other kinds (a store lost
// or restored) are not transitions: their Transition is zero.
func checkEdge(e manager.Event) error {
	if e.Kind != manager.EventTransition {
		if e.Transition != (breaker.Transition{}) {
			return fmt.Errorf("%s: a %v event carries the transition %v", e.Name, e.Kind, e.Transition)
		}
		return nil
	}
	from, to := e.Transition.From, e.Transition.To
	if from < breaker.Closed || from > breaker.Probing || to < breaker.Closed || to > breaker.Probing {
		return fmt.Errorf("%s: %v is not between two states", e.Name, e.Transition)
	}
	bad := func(why string) error {
		return fmt.Errorf("%s: %v with cause %v and outcome %v at gen %d: %s", e.Name, e.Transition, e.Cause, e.Outcome, e.Gen, why)
	}
	C, O, H, P := breaker.Closed, breaker.Open, breaker.HalfOpen, breaker.Probing
	switch e.Cause {
	case breaker.CauseTrip:
		if from != C || to != O {
			return bad("a trip goes from closed to open")
		}
		if e.Outcome != classify.Failure && e.Outcome != classify.Success {
			return bad("a trip is made by a failure, or by a success that brings a rate window to its threshold")
		}
	case breaker.CauseTimer:
		if (from != O && from != P) || to != H {
			return bad("a timer ends an open period or a probe's time, to half_open")
		}
		if e.Outcome != 0 {
			return bad("a timer has no outcome")
		}
	case breaker.CauseProbe:
		switch {
		case from == H && to == P:
			if e.Outcome != 0 {
				return bad("taking the probe has no outcome")
			}
		case from == P && to == C && e.Outcome == classify.Success:
		case from == P && to == O && e.Outcome == classify.Failure:
		case from == P && to == H && e.Outcome == classify.Ignore:
		default:
			return bad("not a probe's edge (half_open->probing, or probing->closed/open/half_open by success/failure/ignore)")
		}
	case breaker.CauseForceOpen:
		if to != O {
			return bad("ForceOpen goes to open")
		}
	case breaker.CauseReset, breaker.CauseRestart:
		if to != C || from == C {
			return bad("a reset or restart closes a breaker that is not closed")
		}
	case breaker.CauseShared:
		if from == to {
			return bad("following the store changes the state")
		}
	default:
		return bad("unknown cause")
	}
	return nil
}

// changesState reports whether e is a change of state, which takes the
// breaker to its next generation.
func changesState(e manager.Event) bool { return e.Kind == manager.EventTransition }

// pathChecker follows the event stream of every breaker of a manager and
// checks that each is a path through the state graph: every event is an
// edge, starts where the previous one ended, and takes the generation one
// further (events of a store lost or restored keep both).
type pathChecker struct {
	last   map[string]pathPos
	edges  map[pathEdge]int // how many times each edge was taken
	byName map[pathKey]int  // the same, per breaker
	events int
}

type pathKey struct {
	name string
	edge pathEdge
}

type pathPos struct {
	state breaker.State
	gen   uint64
}

// pathEdge is an edge of the graph with its cause.
type pathEdge struct {
	From, To breaker.State
	Cause    breaker.Cause
}

func (e pathEdge) String() string {
	return fmt.Sprintf("%v->%v (%v)", e.From, e.To, e.Cause)
}

func newPathChecker() *pathChecker {
	return &pathChecker{last: map[string]pathPos{}, edges: map[pathEdge]int{}, byName: map[pathKey]int{}}
}

// feed checks the next event.
func (c *pathChecker) feed(e manager.Event) error {
	c.events++
	pos, ok := c.last[e.Name]
	if !ok {
		pos = pathPos{breaker.Closed, 1}
	}
	if e.Kind == manager.EventHalted {
		// The manager halted: the breaker's last event, a generation
		// further, with no transition. Under load, a transition a caller
		// made just before the halt may never be published: the
		// generation may skip it.
		if e.Transition != (breaker.Transition{}) || e.Gen <= pos.gen {
			return fmt.Errorf("%s: halted with %v at gen %d, want no transition after gen %d", e.Name, e.Transition, e.Gen, pos.gen)
		}
		c.last[e.Name] = pathPos{pos.state, e.Gen}
		return nil
	}
	if err := checkEdge(e); err != nil {
		return err
	}
	if !changesState(e) {
		if (e.Kind == manager.EventStoreLost || e.Kind == manager.EventStoreRestored) && e.Gen != pos.gen {
			return fmt.Errorf("%s: a %v event has gen %d, want the breaker's %d", e.Name, e.Kind, e.Gen, pos.gen)
		}
		return nil
	}
	if e.Transition.From != pos.state {
		return fmt.Errorf("%s: %v (cause %v, gen %d) does not start where the breaker was: %v at gen %d",
			e.Name, e.Transition, e.Cause, e.Gen, pos.state, pos.gen)
	}
	want := pos.gen + 1
	if e.Gen != want {
		return fmt.Errorf("%s: %v (cause %v) has gen %d, want %d", e.Name, e.Transition, e.Cause, e.Gen, want)
	}
	edge := pathEdge{e.Transition.From, e.Transition.To, e.Cause}
	c.edges[edge]++
	c.byName[pathKey{e.Name, edge}]++
	c.last[e.Name] = pathPos{e.Transition.To, e.Gen}
	return nil
}

// count returns how many times the events of breaker name took the edge.
func (c *pathChecker) count(name string, from, to breaker.State, cause breaker.Cause) int {
	return c.byName[pathKey{name, pathEdge{from, to, cause}}]
}

// --- the reference model of one breaker ---

// modelEvent is an event the model expects, in the terms of manager.Event.
type modelEvent struct {
	From, To breaker.State
	Cause    breaker.Cause
	Outcome  classify.Outcome
	Gen      uint64
	At       time.Time
	Kind     manager.EventKind
}

func (e modelEvent) String() string {
	if e.Kind != manager.EventTransition {
		return fmt.Sprintf("%v gen=%d at=%v", e.Kind, e.Gen, e.At.UnixNano())
	}
	return fmt.Sprintf("%v->%v cause=%v outcome=%v gen=%d at=%v", e.From, e.To, e.Cause, e.Outcome, e.Gen, e.At.UnixNano())
}

func modelEventOf(e manager.Event) modelEvent {
	return modelEvent{e.Transition.From, e.Transition.To, e.Cause, e.Outcome, e.Gen, e.At, e.Kind}
}

// modelPermit is a permit as the model sees it.
type modelPermit struct {
	gen   uint64
	probe bool
}

// modelStats are the counters of manager.Stats the model predicts.
type modelStats struct {
	Successes, Failures, Ignored, Declined, Stale uint64
}

// modelStrategy is a reference implementation of a trip strategy, written
// from its documentation.
type modelStrategy interface {
	// record counts o and reports whether the breaker trips.
	record(o classify.Outcome) bool
	reset()
}

// modelConsecutive trips on the limit-th failure in a row; a success starts
// again, an ignored call changes nothing.
type modelConsecutive struct{ limit, run int }

func (s *modelConsecutive) record(o classify.Outcome) bool {
	switch o {
	case classify.Success:
		s.run = 0
	case classify.Failure:
		s.run++
		return s.run >= s.limit
	}
	return false
}

func (s *modelConsecutive) reset() { s.run = 0 }

// modelRate trips when, among the last window calls (ignored ones left
// out), at least minCalls were made and failures/calls >= rate.
type modelRate struct {
	rate     float64
	window   int
	minCalls int
	calls    []bool // true: a failure; the oldest first
}

func (s *modelRate) record(o classify.Outcome) bool {
	if o != classify.Success && o != classify.Failure {
		return false
	}
	s.calls = append(s.calls, o == classify.Failure)
	if len(s.calls) > s.window {
		s.calls = s.calls[1:]
	}
	// The threshold is checked after every call, a success included.
	failures := 0
	for _, f := range s.calls {
		if f {
			failures++
		}
	}
	n := len(s.calls)
	return n >= s.minCalls && float64(failures)/float64(n) >= s.rate
}

func (s *modelRate) reset() { s.calls = s.calls[:0] }

// refModel is one breaker and its manager, as the contract and the package
// docs describe them, without goroutines: every step is applied at once,
// as a Sync after it makes the real manager do.
type refModel struct {
	name  string
	strat modelStrategy
	dur   func(n int, opening bool) time.Duration // the scripted Recover's periods

	now          time.Time
	state        breaker.State
	gen          uint64
	since, until time.Time
	forced       bool
	halted       bool
	deadline     time.Time // the timer of the current generation, if timed
	timed        bool

	recState     int // the scripted Recover's state: Timeout calls since Init
	panicTimeout bool
	panicInit    bool
	inits        int
	initFailures int

	maxRestarts int
	window      time.Duration
	restarts    []time.Time

	stats    modelStats
	events   []modelEvent      // expected events, since the last take
	timeouts []recover.Context // expected Recover.Timeout calls, since the last take
	cause    error             // the error of the call being released, for Context.Err
	opened   error             // what opened the breaker: its declined calls' OpenError.Cause

	// The slow start after a recovery (Config.SlowStart): one runs while
	// slowUntil is set, from slowFrom; its share is worked out again at
	// each tick, the last at slowTick.
	slow                          time.Duration
	slowFrom, slowUntil, slowTick time.Time
	slowShare                     float64
	either                        bool // the last acquire may go through or be declined, at random
}

func newRefModel(name string, strat modelStrategy, dur func(int, bool) time.Duration, now time.Time, maxRestarts int, window time.Duration) *refModel {
	return &refModel{
		name: name, strat: strat, dur: dur,
		now: now, state: breaker.Closed, gen: 1, since: now,
		inits: 1, maxRestarts: maxRestarts, window: window,
	}
}

// move makes a transition at at, and arms its timer if it needs one.
func (r *refModel) move(to breaker.State, cause breaker.Cause, o classify.Outcome, at time.Time) {
	from := r.state
	r.gen++
	r.state, r.since, r.until = to, at, time.Time{}
	r.forced = cause == breaker.CauseForceOpen
	switch to {
	case breaker.Open:
		r.opened = r.cause
	case breaker.Closed:
		r.opened = nil
	}
	r.timed = false
	if to == breaker.Closed {
		r.strat.reset()
	}
	r.slowFrom, r.slowUntil = time.Time{}, time.Time{}
	if to == breaker.Closed && cause == breaker.CauseProbe && r.slow > 0 {
		// A recovery: nothing goes through at the closing.
		r.slowFrom, r.slowUntil, r.slowTick, r.slowShare = at, at.Add(r.slow), at, 0
	}
	r.events = append(r.events, modelEvent{from, to, cause, o, r.gen, at, manager.EventTransition})
	tr := breaker.Transition{From: from, To: to}
	needsTimer := cause != breaker.CauseForceOpen &&
		(tr == breaker.Transition{From: breaker.Closed, To: breaker.Open} ||
			tr == breaker.Transition{From: breaker.Probing, To: breaker.Open} ||
			tr == breaker.Transition{From: breaker.HalfOpen, To: breaker.Probing})
	if !needsTimer {
		return
	}
	c := recover.Context{Name: r.name, Transition: tr, Outcome: o, At: at}
	if to == breaker.Open {
		c.Err = r.cause
	}
	r.timeouts = append(r.timeouts, c)
	if r.panicTimeout {
		r.panicTimeout = false
		r.restart()
		return
	}
	d := max(r.dur(r.recState, to == breaker.Open), 0)
	r.recState++
	r.deadline, r.timed = at.Add(d), true
	r.until = r.deadline
	r.fire()
}

// restart is the supervisor after a panic in a callback: it counts the
// panic against the limit, and either halts for good or calls Init again
// and closes the breaker (one forced open stays so).
func (r *refModel) restart() {
	kept := r.restarts[:0]
	for _, t := range r.restarts {
		if r.now.Sub(t) < r.window {
			kept = append(kept, t)
		}
	}
	r.restarts = append(kept, r.now)
	if len(r.restarts) >= r.maxRestarts {
		r.halted = true
		r.gen++ // Halt publishes one last snapshot, and says so
		r.events = append(r.events, modelEvent{Gen: r.gen, At: r.now, Kind: manager.EventHalted})
		r.timed = false
		return
	}
	r.timed = false
	r.inits++
	if r.panicInit {
		r.panicInit = false // Init failed: the breaker keeps its state
		r.initFailures++
	} else {
		r.recState = 0
	}
	switch {
	case r.state == breaker.Closed:
		r.strat.reset()
		r.slowFrom, r.slowUntil = time.Time{}, time.Time{} // a restart is not a recovery
	case !r.forced:
		r.move(breaker.Closed, breaker.CauseRestart, 0, r.now)
	}
}

// fire ends the current generation's timer if it is due.
func (r *refModel) fire() {
	if !r.timed || r.halted || r.deadline.After(r.now) {
		return
	}
	r.timed = false
	if !r.forced && (r.state == breaker.Open || r.state == breaker.Probing) {
		r.move(breaker.HalfOpen, breaker.CauseTimer, 0, r.deadline)
	}
}

// advance moves the clock to now, firing the timer on the way, and ticks
// the slow start.
func (r *refModel) advance(d time.Duration) {
	r.now = r.now.Add(d)
	r.fire()
	r.tickSlow()
}

// tickSlow works the slow start's share out at the last of its ticks that
// now has reached: the ticks divide it into 100 steps no shorter than
// 10ms, each with the share of its own instant, and the last is its end,
// which ends it.
func (r *refModel) tickSlow() {
	if r.slowUntil.IsZero() || r.halted {
		return
	}
	if !r.now.Before(r.slowUntil) {
		r.slowFrom, r.slowUntil = time.Time{}, time.Time{}
		return
	}
	total := r.slowUntil.Sub(r.slowFrom)
	step := max(total/100, 10*time.Millisecond)
	if tick := r.slowFrom.Add(r.now.Sub(r.slowFrom) / step * step); tick.After(r.slowTick) {
		r.slowTick, r.slowShare = tick, float64(tick.Sub(r.slowFrom))/float64(total)
	}
}

// admitted is Stats.Admitted.
func (r *refModel) admitted() float64 {
	switch {
	case r.halted || r.state != breaker.Closed:
		return 0
	case !r.slowUntil.IsZero():
		return r.slowShare
	}
	return 1
}

// slowStart is the slow start the snapshot shows: none once halted.
func (r *refModel) slowStart() (from, until time.Time) {
	if r.halted {
		return time.Time{}, time.Time{}
	}
	return r.slowFrom, r.slowUntil
}

// declineSlow is an Acquire the slow start declined, which the model
// allowed (either).
func (r *refModel) declineSlow() *breaker.OpenError {
	r.stats.Declined++
	return &breaker.OpenError{Name: r.name, State: breaker.Closed, Until: r.slowUntil}
}

// acquire returns what Acquire gives: a permit, a declined call's error, or
// another error (ErrStopped, or the context's error).
func (r *refModel) acquire(cancelled bool) (modelPermit, *breaker.OpenError, error) {
	r.either = false
	switch {
	case r.halted:
		return modelPermit{}, nil, manager.ErrStopped
	case r.state == breaker.Closed && !r.slowUntil.IsZero() && r.slowShare == 0:
		return modelPermit{}, r.declineSlow(), nil
	case r.state == breaker.Closed:
		// In a slow start, a share of calls goes through, drawn at
		// random: the caller sees which (declineSlow).
		r.either = !r.slowUntil.IsZero()
		return modelPermit{gen: r.gen}, nil, nil
	case r.state == breaker.Open || r.state == breaker.Probing:
		r.stats.Declined++
		return modelPermit{}, &breaker.OpenError{Name: r.name, State: r.state, Until: r.until, Cause: r.opened}, nil
	case cancelled:
		return modelPermit{}, nil, context.Canceled
	}
	// The probe's generation is the one this transition enters; a zero
	// probe time or a panic in Recover may move the breaker further before
	// Acquire returns.
	gen := r.gen + 1
	r.move(breaker.Probing, breaker.CauseProbe, 0, r.now)
	return modelPermit{gen: gen, probe: true}, nil, nil
}

// release reports the outcome of permit p, a call that returned err (nil
// for ReleaseOutcome).
func (r *refModel) release(p modelPermit, o classify.Outcome, err error) {
	r.cause = err
	defer func() { r.cause = nil }()
	switch o {
	case classify.Success:
		r.stats.Successes++
	case classify.Ignore:
		r.stats.Ignored++
	default:
		r.stats.Failures++
	}
	if p.probe {
		if r.halted || r.state != breaker.Probing || r.gen != p.gen {
			r.stats.Stale++
			return
		}
		switch o {
		case classify.Success:
			r.move(breaker.Closed, breaker.CauseProbe, o, r.now)
		case classify.Ignore:
			r.move(breaker.HalfOpen, breaker.CauseProbe, o, r.now)
		default:
			r.move(breaker.Open, breaker.CauseProbe, o, r.now)
		}
		return
	}
	if r.halted || r.state != breaker.Closed || r.gen != p.gen {
		r.stats.Stale++
		return
	}
	if r.strat.record(o) {
		r.move(breaker.Open, breaker.CauseTrip, o, r.now)
	}
}

// forceOpen is Breaker.ForceOpen.
func (r *refModel) forceOpen() error {
	switch {
	case r.halted:
		return manager.ErrStopped
	case r.forced:
		return nil
	}
	r.move(breaker.Open, breaker.CauseForceOpen, 0, r.now)
	return nil
}

// reset is Breaker.Reset.
func (r *refModel) reset() error {
	switch {
	case r.halted:
		return manager.ErrStopped
	case r.state == breaker.Closed:
		r.strat.reset()
		r.slowFrom, r.slowUntil = time.Time{}, time.Time{} // Reset lets every call through
		return nil
	}
	r.move(breaker.Closed, breaker.CauseReset, 0, r.now)
	return nil
}

// take returns the events and Timeout calls expected since the last take.
func (r *refModel) take() ([]modelEvent, []recover.Context) {
	evs, tos := r.events, r.timeouts
	r.events, r.timeouts = nil, nil
	return evs, tos
}
