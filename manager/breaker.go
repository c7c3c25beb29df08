package manager

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/machine"
	"github.com/fusebox-go/fusebox/internal/stripe"
	"github.com/fusebox-go/fusebox/recover"
)

// Breaker is a handle to one registered breaker. It is safe for concurrent
// use; keep it rather than looking it up by name for every call.
type Breaker struct {
	// Read on every call. The fields are in an order that leaves no
	// padding: a Breaker fits the allocator's 256-byte size class.
	mach        machine.Machine
	classify    atomic.Pointer[classify.Classifier]
	nilSucceeds atomic.Bool  // classify is classify.Default, which makes nil a Success
	timesCalls  atomic.Bool  // slowCall > 0 || durations != nil: permits carry their start
	slowCall    atomic.Int64 // Config.SlowCall, a time.Duration: a call this long is a failure; zero: calls are not timed
	mgr         *Manager
	truth       truth                     // where its state is decided: theLocal, or *shared
	durations   atomic.Pointer[durations] // nil unless Config.TimeCalls
	stats       stripe.Counters

	// hearsAll, chosen with truth before the breaker is published, says
	// that its truth hears of every closed-state outcome (a shared
	// breaker reports failures, and some successes, to its store);
	// otherwise it hears of those that trip the period's count only, and
	// a healthy call makes no call through the interface. Read on every
	// call, written never after: it sits in what was padding.
	hearsAll bool

	// Owned by the manager's goroutine.
	last     breaker.State // the state its handled steps left the breaker in
	removed  bool          // Manager.Remove removed it: its notes are dropped
	applying bool          // the manager is applying the step of generation nextGen
	// dryRun is Config.DryRun: read by callers, only once the breaker
	// has decided to decline a call. Here, in the padding after the
	// bytes above, it costs no room.
	dryRun   atomic.Bool
	rec      recover.Recover
	recState any
	nextGen  uint64 // the generation whose step the manager handles next
	early    []note
	dropped  atomic.Uint64
}

// Indices into Breaker.stats.
const (
	statSuccess = iota
	statFailure
	statIgnore
	statDeclined
	statStale
	statSlow
	statUnprotected
	statWouldDecline
)

func outcomeStat(o classify.Outcome) int {
	switch o {
	case classify.Success:
		return statSuccess
	case classify.Ignore:
		return statIgnore
	}
	return statFailure
}

// Name returns the name the breaker was registered under.
func (b *Breaker) Name() string { return b.mach.Name() }

// State returns the breaker's current state. A transition made by a call
// (a trip, a probe) shows at once; one made by a timer shows once the
// manager has handled it (see Manager.Sync). Once the breaker is removed
// (Manager.Remove) or its manager has stopped, State keeps returning the
// state it was in then; Snapshot and Stats say which. Once the manager has
// halted after too many panics in callbacks, State returns breaker.Halted.
func (b *Breaker) State() breaker.State { return b.mgr.reported(b.mach.Snapshot()) }

// Snapshot returns the breaker's current state in full: when it was entered,
// when its timer ends, whether it is forced open, and whether it is out of
// service (Halted, and Removed once Manager.Remove removed it).
func (b *Breaker) Snapshot() *breaker.Snapshot { return &b.mach.Snapshot().Snapshot }

// Permit is the right to make one call through a breaker, returned by
// Acquire. Report the call's result with exactly one Release or
// ReleaseOutcome. A Permit is a small value; copying it is cheap, but
// releasing two copies counts the call twice. The zero Permit's methods do
// nothing.
type Permit struct {
	b *Breaker
	t machine.Ticket
	// start is 1 + Manager.elapsed at Acquire for a breaker that times its
	// calls (Config.SlowCall, Config.TimeCalls), and zero for one that
	// does not.
	start time.Duration
}

// Probe reports whether the permit is the breaker's probe: the one call let
// through in half_open, whose outcome closes or re-opens the breaker.
func (p Permit) Probe() bool { return p.t.Probe }

// Acquire asks for a permit to make one call. It never waits for the
// manager. In the closed state it returns a permit at once, except in a
// slow start after a recovery (Config.SlowStart), which admits a growing
// share of calls and declines the others; in half_open the
// first caller gets the probe's permit; otherwise the call is declined with
// a *breaker.OpenError (errors.Is(err, breaker.ErrOpen) holds), built once
// per open period so that declining allocates nothing. Once the breaker is
// removed (Manager.Remove), Acquire returns ErrRemoved; once the manager has
// stopped, ErrStopped.
//
// ctx is consulted only when the call would become the probe: a caller whose
// context is already done gets ctx.Err() instead of taking the probe slot.
// A nil ctx is an error naming the breaker, and the call is not counted.
func (b *Breaker) Acquire(ctx context.Context) (Permit, error) {
	if ctx == nil {
		return Permit{}, b.misuse("Acquire", errNilContext)
	}
	s := b.mach.Snapshot()
	if s.Admits() {
		p := Permit{b: b, t: machine.Ticket{Gen: s.Gen}}
		if b.timesCalls.Load() {
			p.start = b.started()
		}
		return p, nil
	}
	if s.Declines() {
		if b.dryRun.Load() {
			return b.decline(s.Err)
		}
		b.stats.Add(statDeclined)
		return Permit{}, s.Err
	}
	if s.SlowStarting() {
		return b.acquireSlowStart(s)
	}
	return b.acquireSlow(ctx)
}

// acquireSlowStart is Acquire in a slow start: the call goes through with
// the share the slow start admits, which the manager works out again at
// each of its ticks, and is declined with the snapshot's error otherwise
// (let through, in a dry run). It draws a random number and reads no
// clock.
func (b *Breaker) acquireSlowStart(s *machine.Snapshot) (Permit, error) {
	if !s.SlowStartAdmits(rand.Uint64()) {
		return b.decline(s.Err)
	}
	return b.permit(machine.Ticket{Gen: s.Gen}), nil
}

// decline declines a call with oerr, or, in a dry run (Config.DryRun),
// lets it through and counts it as a call it would have declined. The
// permit of such a call has generation zero, which no breaker's is: its
// release counts the outcome and changes nothing else, as a stale one's
// would (the breaker decided without it).
func (b *Breaker) decline(oerr *breaker.OpenError) (Permit, error) {
	if b.dryRun.Load() {
		b.stats.Add(statWouldDecline)
		return b.permit(machine.Ticket{}), nil
	}
	b.stats.Add(statDeclined)
	return Permit{}, oerr
}

// acquireSlow is Acquire in half_open, where the caller may become the
// probe, and once the breaker is out of service.
func (b *Breaker) acquireSlow(ctx context.Context) (Permit, error) {
	if s := b.mach.Snapshot(); s.Halted {
		return b.halted(s)
	}
	if err := ctx.Err(); err != nil {
		return Permit{}, err
	}
	return b.truth.acquire(b, ctx)
}

// permit returns the permit of ticket t, started now if the breaker times
// its calls.
func (b *Breaker) permit(t machine.Ticket) Permit {
	p := Permit{b: b, t: t}
	if b.timesCalls.Load() {
		p.start = b.started()
	}
	return p
}

// started is a timed permit's start: never zero, which means untimed.
func (b *Breaker) started() time.Duration { return max(b.mgr.elapsed(), 0) + 1 }

// halted is Acquire once the breaker is out of service: ErrRemoved or
// ErrStopped, or, once the manager has halted with Options.FailOpen, an
// unprotected permit. That permit's generation is zero, which no breaker's
// is: its release counts the outcome and changes nothing else.
func (b *Breaker) halted(s *machine.Snapshot) (Permit, error) {
	if !s.Removed && b.mgr.failingOpen.Load() {
		b.stats.Add(statUnprotected)
		return Permit{b: b}, nil
	}
	return Permit{}, b.haltedErr(s)
}

// Release reports the result of the call, classified by the breaker's
// Classifier. See ReleaseOutcome.
func (p Permit) Release(err error) {
	b := p.b
	if b == nil {
		return
	}
	p.release(b.outcome(err), err)
}

// outcome classifies err with the breaker's Classifier.
func (b *Breaker) outcome(err error) classify.Outcome {
	if err == nil && b.nilSucceeds.Load() {
		return classify.Success
	}
	return (*b.classify.Load())(err)
}

// ReleaseOutcome reports the outcome of the call. In the closed state the
// outcome goes to the breaker's strategy, and the one outcome that trips the
// breaker opens it before ReleaseOutcome returns. A probe's outcome closes
// the breaker (Success), re-opens it (Failure) or gives the probe slot back
// (Ignore). A permit granted before the breaker last changed state is
// stale: its outcome is counted in the stats and changes nothing else. An
// outcome that is not Success, Failure or Ignore counts as Failure.
//
// On a shared breaker (Config.Store) whose store answers, a failure in the
// closed state makes one store round trip on the caller's goroutine, so
// that the fleet's count decides the trip before ReleaseOutcome returns; so
// does the first success after this process reported failures (it ends a
// Consecutive run), a success that may bring a TimeWindow to its threshold,
// and a probe's success or ignore. Each round trip ends within
// Options.StoreTimeout (500ms by default) whatever the store does; a
// healthy call makes none.
func (p Permit) ReleaseOutcome(o classify.Outcome) { p.release(o, nil) }

// ReleaseWith reports the outcome o of a call that returned err, for a
// caller that classifies calls itself (an HTTP or gRPC client that looks at
// more than the error): it is ReleaseOutcome(o), except that err is what
// opened the breaker if this call opens it (recover.Context.Err). err may
// be nil.
func (p Permit) ReleaseWith(o classify.Outcome, err error) { p.release(o, err) }

// release is ReleaseOutcome; err, when not nil, is the call's error, kept
// only by the call that opens the breaker.
func (p Permit) release(o classify.Outcome, err error) {
	b := p.b
	if b == nil {
		return
	}
	if o < classify.Success || o > classify.Ignore {
		o = classify.Failure
	}
	var took time.Duration // a slow call's: why it opens the breaker, if it does
	if p.start != 0 {
		d := b.mgr.elapsed() - (p.start - 1)
		if h := b.durations.Load(); h != nil {
			h.observe(d)
		}
		if slow := time.Duration(b.slowCall.Load()); slow > 0 && d >= slow {
			b.stats.Add(statSlow)
			o = classify.Failure
			took = d
		}
	}
	b.stats.Add(outcomeStat(o))
	if p.t.Probe {
		b.endProbe(p.t, o, b.slowErr(err, took))
		return
	}
	c := b.mach.Current(p.t)
	if c == nil {
		if p.t.Gen != 0 { // not an unprotected permit
			b.stats.Add(statStale)
		}
		return
	}
	var now time.Time
	if b.mach.UsesClock() {
		now = b.mgr.clk.Now()
	}
	// Recorded in the period's own count first, then told to the
	// breaker's truth, with the permit's generation.
	if trips := c.Record(o, now); trips || b.hearsAll {
		b.truth.outcome(b, p.t.Gen, o, trips, b.slowErr(err, took))
	}
}

// slowErr is the error of a call that opens the breaker: err, or, for a
// call that returned none but counted as a failure because it took took
// (not zero), a *SlowCallError that says so. It is made only for the call
// that opens the breaker.
func (b *Breaker) slowErr(err error, took time.Duration) error {
	if err != nil || took == 0 {
		return err
	}
	return b.slowCallError(took)
}

// slowCallError makes slowErr's error. It is kept out of line so that
// release, on every call's path, need not make room for it.
//
//go:noinline
func (b *Breaker) slowCallError(took time.Duration) error {
	return &SlowCallError{Took: took, SlowCall: time.Duration(b.slowCall.Load())}
}

// fleet returns the loop's side of a shared breaker (*shared), or nil for
// a local one. Only the loop asks, for what it applied, joining and
// leaving a store's hub, and Stats: never the call path.
func (b *Breaker) fleet() *shared {
	sh, _ := b.truth.(*shared)
	return sh
}

// trip opens the closed breaker of generation gen because of a call with
// outcome o and error err.
func (b *Breaker) trip(gen uint64, o classify.Outcome, err error) {
	if step, ok := b.mach.Trip(gen, o, err, b.mgr.clk.Now()); ok {
		b.mgr.notify(b, step)
	}
}

// endProbe ends the probe of ticket t with outcome o.
func (b *Breaker) endProbe(t machine.Ticket, o classify.Outcome, err error) {
	b.truth.endProbe(b, t, o, err)
}

// Do calls fn through the breaker: it acquires a permit, calls fn with ctx,
// and releases the permit with fn's error, which it returns. A declined call
// returns the *breaker.OpenError without calling fn. If fn, or the
// breaker's Classifier, panics, the call is released as a failure and the
// panic goes on. A nil fn or a nil ctx is an error that names Do and the
// breaker, asks for no permit and counts neither for nor against the
// service.
func (b *Breaker) Do(ctx context.Context, fn func(context.Context) error) error {
	if fn == nil {
		return b.misuse("Do", errNilFunc)
	}
	p, err := b.Acquire(ctx)
	if err != nil {
		if ctx == nil {
			// Acquire counted nothing; the error names Do.
			return b.misuse("Do", errNilContext)
		}
		return err
	}
	released := false
	defer func() {
		if !released {
			p.ReleaseOutcome(classify.Failure)
		}
	}()
	err = fn(ctx)
	o := b.outcome(err) // a panicking Classifier leaves the call to the deferred release
	released = true
	p.release(o, err)
	return err
}

// Call is Do for a function that returns a value: it returns fn's value and
// error, or T's zero value and the *breaker.OpenError of a declined call.
// A nil fn or a nil ctx is an error that names Call, as for Do.
func Call[T any](ctx context.Context, b *Breaker, fn func(context.Context) (T, error)) (T, error) {
	if fn == nil {
		var zero T
		return zero, b.misuse("Call", errNilFunc)
	}
	p, err := b.Acquire(ctx)
	if err != nil {
		var zero T
		if ctx == nil {
			// Acquire counted nothing; the error names Call.
			return zero, b.misuse("Call", errNilContext)
		}
		return zero, err
	}
	released := false
	defer func() {
		if !released {
			p.ReleaseOutcome(classify.Failure)
		}
	}()
	v, err := fn(ctx)
	o := b.outcome(err)
	released = true
	p.release(o, err)
	return v, err
}

// ForceOpen opens the breaker until Reset: every call is declined, and no
// timer ends it (an isolation switch). It returns ErrRemoved once the
// breaker is removed and ErrStopped once the manager has stopped; forcing a
// breaker that is already forced open does nothing.
//
// A shared breaker (Config.Store) is forced open in the store first, for
// every process that shares it: one store round trip on the caller's
// goroutine, bounded by Options.StoreTimeout, after which the other
// processes follow as they hear of it (a watch message, or their next
// resync), with an event of cause shared whose snapshot is Forced. Only a
// Reset, in any of them, lifts it. If the store cannot be reached, only
// this process's breaker is forced, and it falls back (see
// Config.Fallback); it forces the fleet once the store answers again.
func (b *Breaker) ForceOpen() error {
	b.truth.forceOpen(b)
	if s := b.mach.Snapshot(); s.Halted {
		return b.haltedErr(s)
	}
	return nil
}

// forceOpen forces the machine open.
func (b *Breaker) forceOpen() {
	if step, ok := b.mach.ForceOpen(b.mgr.clk.Now()); ok {
		b.mgr.notify(b, step)
	}
}

// Reset closes the breaker, whatever its state (a forced-open one included),
// and clears its strategy's counts. Resetting a breaker that is not closed
// is a transition, and a permit granted before it becomes stale; resetting
// a closed breaker only clears the counts, and permits already granted
// still count. It returns ErrRemoved once the breaker is removed and
// ErrStopped once the manager has stopped.
//
// A shared breaker (Config.Store) is closed in the store first, for every
// process that shares it: one store round trip on the caller's goroutine,
// bounded by Options.StoreTimeout, after which the other processes close
// as they hear of it (a watch message, or their next resync) with an event
// of cause shared. If the store cannot be reached, only this process's
// breaker is reset, and it falls back (see Config.Fallback).
func (b *Breaker) Reset() error {
	b.truth.reset(b)
	if s := b.mach.Snapshot(); s.Halted {
		return b.haltedErr(s)
	}
	return nil
}

// reset closes the machine, by hand.
func (b *Breaker) reset() {
	if step, ok := b.mach.Reset(b.mgr.clk.Now(), breaker.CauseReset); ok {
		b.mgr.notify(b, step)
	}
}

// misuse is the error of a method of b called with an argument it refuses:
// err, a sentinel, after the breaker and the method, without repeating the
// "fusebox: " its message starts with ("fusebox: breaker "payments": Do:
// nil context").
func (b *Breaker) misuse(method string, err error) error {
	return &prefixedError{prefix: fmt.Sprintf("fusebox: breaker %q: %s: ", b.Name(), method), err: err}
}
