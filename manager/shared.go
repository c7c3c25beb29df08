package manager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/fleet"
	"github.com/fusebox-go/fusebox/internal/machine"
	"github.com/fusebox-go/fusebox/internal/reasontext"
	"github.com/fusebox-go/fusebox/internal/sharepolicy"
	"github.com/fusebox-go/fusebox/store"
)

// This file is the caller's side of a breaker shared through a
// store.Store: the truth of such a breaker is the store's, and its snapshot
// mirrors it. Its hot path stays local; only failures, the first success
// after failures, the opening, the probe and manual actions reach the
// store.
//
// Every decision is fleet.Step's, a pure function; *shared owns its state
// (one lock per breaker, held only while Step runs and its change of the
// machine is applied: never across a store call) and carries out what it
// says:
//   - callers make their own store round trips (a failure's report, the
//     first success after failures, the probe's lease, a success's or an
//     ignore's verdict, ForceOpen and Reset) and feed the replies to the
//     step, so that a failure trips the breaker before its release
//     returns;
//   - the loop (sharedloop.go) feeds it what the hub hears, the steps it
//     applies, and the replies of the store calls it makes from
//     short-lived goroutines (an opening, a failed probe's verdict), and
//     asks Recover for periods;
//   - a hub per store (hub.go): the watch of the store's changes, and the
//     periodic resync of every shared breaker.

// Defaults of the store options.
const (
	defaultStoreTimeout = 500 * time.Millisecond
	defaultResync       = time.Second
)

// shared is the truth of a breaker shared through a store, and all the
// state only such a breaker has.
type shared struct {
	b        *Breaker
	st       store.Store
	hub      *hub                         // set on the loop as the breaker registers, before any caller has it
	queued   bool                         // owned by the loop: in hub.reads
	policy   atomic.Pointer[store.Policy] // the strategy as the store counts it; Reconfigure may change its thresholds
	fallback store.Fallback

	mu    sync.Mutex
	state fleet.State // guarded by mu

	// hints is what the healthy path reads of the state without the
	// lock (fleet.Hints.Quiet), published under mu after every step
	// that changed it: a success of a healthy breaker costs one atomic
	// load and no lock.
	hints atomic.Pointer[fleet.Hints]

	pending *pending // window: successes not reported yet, counted lock-free
	errors  atomic.Uint64

	// reported is closed when the failure reports on their way end (one
	// report and those of the failures folded into it meanwhile): the
	// callers whose failures were folded wait for it. Guarded by mu; nil
	// while none is on its way.
	reported chan struct{}

	// links are the events of the store link (EventStoreLost,
	// EventStoreRestored) steps decided, in order, for the loop to
	// publish (publishLinks); guarded by mu.
	links []EventKind
}

func isComparable(st store.Store) bool { return reflect.TypeOf(st).Comparable() }

// newShared validates a shared breaker's configuration. validateConfig
// has checked the Fallback.
func newShared(b *Breaker, name string, cfg Config) (*shared, error) {
	if !isComparable(cfg.Store) {
		return nil, registerError(name, "Store", fmt.Errorf("%T is not comparable; pass a pointer", cfg.Store))
	}
	p, err := sharepolicy.Of(cfg.Strategy)
	if err != nil {
		return nil, registerError(name, "Strategy", err)
	}
	if err := b.mgr.nameErr; err != nil {
		return nil, registerFailed(name, err)
	}
	p.Quorum, p.Reporter = cfg.Quorum, b.mgr.name
	if err := guardStore(cfg.Store, func() error { return cfg.Store.Check(name) }); err != nil {
		return nil, registerError(name, "Store", err)
	}
	sh := &shared{b: b, st: cfg.Store, fallback: cfg.Fallback}
	sh.policy.Store(&p)
	sh.state = fleet.State{Policy: p, Fallback: cfg.Fallback, DryRun: cfg.DryRun}
	h := sh.state.Hints()
	sh.hints.Store(&h)
	if p.Rate > 0 {
		sh.pending = newPending(p)
	}
	return sh, nil
}

// view is what the step sees of sh's machine in snapshot s.
func (sh *shared) view(s *machine.Snapshot) fleet.View {
	return fleet.View{State: s.State, Gen: s.Gen, Until: s.Until, Forced: s.Forced, Halted: s.Halted, Asked: sh.hub.asked.Load(), Opener: s.Opener()}
}

// step feeds msg to the breaker's Step and applies the change of the
// machine it decides, on the snapshot it decided on: if the machine moved
// meanwhile (a caller's trip, a timer), Step decides again on the new
// one. It then follows the statuses the step left for after its change.
// It returns the step's actions and the machine's steps for the loop,
// which the caller hands over once the lock is released (see handOver).
// callErr is the error of the call whose outcome a Trip or an EndProbe
// applies.
func (sh *shared) step(msg fleet.Msg, callErr error) (fleet.Actions, []note) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	a, notes := sh.stepLocked(msg, callErr, nil)
	for len(a.Then) > 0 {
		h := a.Then[0]
		a.Then = a.Then[1:]
		then, more := sh.stepLocked(h, nil, notes)
		notes = more
		a.Loop = append(a.Loop, then.Loop...)
		a.Then = append(a.Then, then.Then...)
	}
	return a, notes
}

func (sh *shared) stepLocked(msg fleet.Msg, callErr error, notes []note) (fleet.Actions, []note) {
	b := sh.b
	for {
		s := b.mach.Snapshot()
		v := sh.view(s)
		now := b.mgr.clk.Now()
		next, a := fleet.Step(sh.state, v, now, msg)
		if h := *sh.hints.Load(); h.Down && !next.Link.Down && a.Change != nil {
			// Back on the store: say so before the change lets calls
			// through, so that no call a fallback would decline is
			// admitted while Stats still says StoreDown.
			h.Down = false
			sh.hints.Store(&h)
		}
		notes, moved := sh.change(a.Change, s, callErr, now, notes)
		if moved {
			continue
		}
		if h := next.Hints(); h != *sh.hints.Load() {
			sh.hints.Store(&h)
		}
		reporting, was := next.Report.Kind == fleet.ReportInFlight, sh.state.Report.Kind == fleet.ReportInFlight
		switch {
		case reporting && !was:
			sh.reported = make(chan struct{})
		case !reporting && was:
			close(sh.reported)
			sh.reported = nil
		}
		sh.state = next
		if checkSteps {
			sh.check(msg)
		}
		for _, e := range a.Loop {
			switch e.(type) {
			case fleet.Lost:
				sh.links = append(sh.links, EventStoreLost)
			case fleet.Restored:
				sh.links = append(sh.links, EventStoreRestored)
			}
		}
		return a, notes
	}
}

// change applies the change of the machine a step decided on snapshot s
// (fleet.Apply), adding the machine's step to notes; moved says the step
// is to be decided again.
func (sh *shared) change(c fleet.Change, s *machine.Snapshot, callErr error, now time.Time, notes []note) (_ []note, moved bool) {
	b := sh.b
	step, made, moved, stale := fleet.Apply(&b.mach, c, s, callErr, now)
	if stale {
		b.stats.Add(statStale)
	}
	if made {
		notes = append(notes, note{b: b, step: step})
	}
	return notes, moved
}

// handOver hands the machine's steps and the loop's effects a step
// decided on a caller's goroutine to the loop, with the store link's
// events, and logs a fallback.
func (sh *shared) handOver(a fleet.Actions, notes []note) {
	m := sh.b.mgr
	var effects []fleet.Effect
	link := false
	for _, e := range a.Loop {
		switch e := e.(type) {
		case fleet.Lost:
			sh.logFallBack(e.Err)
			link = true
		case fleet.Restored:
			link = true
		}
		effects = append(effects, e)
	}
	for i, n := range notes {
		if i == len(notes)-1 && (link || effects != nil) {
			n.sh, n.effects = sh, effects
			link, effects = false, nil
		}
		m.send(n)
	}
	if link || effects != nil {
		m.send(note{b: sh.b, sh: sh, effects: effects})
	}
}

// publishLinks publishes, on the loop, the events of the store link that
// steps decided, in the order they were decided.
func (sh *shared) publishLinks() {
	sh.mu.Lock()
	links := sh.links
	sh.links = nil
	sh.mu.Unlock()
	for _, k := range links {
		sh.b.mgr.emitStore(sh.b, k)
	}
}

// logFallBack logs that the breaker falls back after a store call of its
// own failed.
func (sh *shared) logFallBack(err error) {
	sh.b.mgr.logError("fusebox: store call failed; the breaker falls back", "breaker", sh.b.Name(), "fallback", fallbackName(sh.fallback), "error", err)
}

// outcome implements truth: an outcome in the closed state, which the
// period's own count has recorded (trips: it trips that count, what the
// local fallback trips on). A window's success is counted as pending, to
// reach the store with the next report. What the step would decide
// nothing for (fleet.Hints.Quiet) is not stepped: a success of a healthy
// breaker so reads one atomic pointer and takes no lock.
func (sh *shared) outcome(b *Breaker, gen uint64, o classify.Outcome, trips bool, err error) {
	h := sh.hints.Load()
	var calls int64
	if sh.pending != nil && o == classify.Success && !h.DryRun {
		// The window's strategy read the clock for its own count: read
		// again for the bucket, a shared window's cost alone.
		idx := sharepolicy.Bucket(sh.policy.Load(), b.mgr.clk.Now())
		sh.pending.add(idx)
		if h.Failures > 0 {
			calls = h.Calls + sh.pending.total(idx)
		}
	}
	if h.Quiet(o, trips, calls) {
		return
	}
	sh.mu.Lock()
	a, notes := sh.stepLocked(fleet.Outcome{Gen: gen, Outcome: o, LocalTrip: trips}, err, nil)
	wait := sh.reported
	sh.mu.Unlock()
	sh.handOver(a, notes)
	if a.Stale {
		b.stats.Add(statStale)
	}
	for range a.Dropped {
		b.stats.Add(statStale) // folded failures of a closed generation that ended
	}
	if a.Folded && wait != nil {
		// Folded into the report on its way: wait for the verdict that
		// counts it, bounded as a report of its own would be.
		t := time.NewTimer(b.mgr.stores.timeout)
		select {
		case <-wait:
		case <-t.C:
		}
		t.Stop()
		return
	}
	// The reply of a failure report may ask this caller for the next
	// one, of the failures other callers released meanwhile.
	for r, ok := a.Call.(fleet.ReportCall); ok; r, ok = a.Call.(fleet.ReportCall) {
		a, notes = sh.step(sh.report(b, r), err)
		sh.handOver(a, notes)
		for range a.Dropped {
			b.stats.Add(statStale)
		}
	}
}

// report makes the store call of r on the caller's goroutine, with the
// window's pending successes, which go back if it fails, and returns its
// reply.
func (sh *shared) report(b *Breaker, r fleet.ReportCall) fleet.Recorded {
	at := b.mgr.clk.Now() // a healthy call reads no clock
	p := sh.policy.Load()
	var idx int64
	var succ []int64
	if sh.pending != nil {
		idx = sharepolicy.Bucket(p, at)
		succ = sh.pending.take(idx)
	}
	var v store.Verdict
	err := sh.call(func(ctx context.Context) (err error) {
		if r.Failure {
			v, err = sh.st.RecordFailure(ctx, b.Name(), *p, r.Failures, succ)
		} else {
			v, err = sh.st.RecordSuccess(ctx, b.Name(), *p, succ)
		}
		return err
	})
	if err != nil {
		sh.pending.restore(succ, idx)
	}
	// The verdict's deadlines count from its arrival (see statusMsg.at).
	return fleet.Recorded{Gen: r.Gen, Failure: r.Failure, Failures: r.Failures, LocalTrip: r.LocalTrip, Ends: r.Ends, Verdict: v, Err: err, At: b.mgr.clk.Now()}
}

// call runs a store call on a caller's goroutine, with the store deadline,
// turning a panic into an error.
func (sh *shared) call(f func(ctx context.Context) error) error {
	return sh.callCtx(context.Background(), f)
}

// callCtx is call with the caller's own ctx as the parent of the deadline.
// A call that fails is counted in Stats.StoreErrors, unless the caller
// gave up first.
func (sh *shared) callCtx(parent context.Context, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(parent, sh.b.mgr.stores.timeout)
	defer cancel()
	err := guardStore(sh.st, func() error { return f(ctx) })
	if err != nil && parent.Err() == nil {
		sh.errors.Add(1)
	}
	return err
}

// successReport is the resync's report of a window's successes not
// reported yet: made off the loop (the resync's goroutine), and stepped
// on the loop like the answer of any store call the loop makes.
type successReport struct {
	sh   *shared
	gen  uint64
	idx  int64   // the bucket succ counts back from
	succ []int64 // what was reported, by age
	v    store.Verdict
	err  error
	at   time.Time
}

// reportSuccesses reports, from the resync's goroutine, the successes of a
// window policy counted since the last report. It reports false if none
// were pending.
func (sh *shared) reportSuccesses(ctx context.Context, at time.Time) (successReport, bool) {
	p := sh.policy.Load()
	idx := sharepolicy.Bucket(p, at)
	succ := sh.pending.take(idx)
	if succ == nil {
		return successReport{}, false
	}
	r := successReport{sh: sh, gen: sh.b.mach.Snapshot().Gen, idx: idx, succ: succ}
	r.err = guardStore(sh.st, func() (err error) {
		r.v, err = sh.st.RecordSuccess(ctx, sh.b.Name(), *p, succ)
		return err
	})
	r.at = sh.b.mgr.clk.Now()
	return r, true
}

// reported steps the resync's report of successes, on the loop: a report
// that failed is a store error, and its successes go back to be reported
// again.
func (r successReport) handle() {
	sh := r.sh
	if sh.b.removed {
		return
	}
	if r.err != nil {
		sh.errors.Add(1)
		sh.pending.restore(r.succ, r.idx)
	}
	sh.loopStep(fleet.Recorded{Gen: r.gen, Verdict: r.v, Err: r.err, At: r.at})
}

// reason is who opened the breaker and why, for the store: this process,
// and the error of the call that opened it here, unless the breaker
// follows an opening of another process's.
func (sh *shared) reason() store.Reason {
	var cause error
	if e := sh.b.mach.Snapshot().Err; e != nil {
		cause = e.Cause
	}
	if o, ok := cause.(*breaker.OpenedError); ok {
		return store.Reason{By: o.By, Why: o.Text}
	}
	r := store.Reason{By: sh.b.mgr.name}
	if cause != nil {
		r.Why = reasontext.Line(cause.Error(), reasontext.Max)
	}
	return r
}

// newToken returns a probe lease's token: the process's name, which
// the store shows as the lease's holder, and a random part, which keeps
// every lease's token its own.
func (m *Manager) newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return m.name + "/" + hex.EncodeToString(b[:])
}

// acquire is Acquire in half_open: the caller that wins the local probe
// slot takes the store's probe lease before calling. It returns the
// permit, or declines the caller when another process holds the lease or
// the breaker is still open in the store. While the store is unreachable
// the local probe goes ahead. The slot is won under the step's lock, so
// that nothing the loop hears meanwhile takes the probe for another
// process's.
func (sh *shared) acquire(b *Breaker, ctx context.Context) (Permit, error) {
	now := b.mgr.clk.Now()
	token := b.mgr.newToken()
	sh.mu.Lock()
	t, step, oerr := b.mach.Acquire(now)
	won := oerr == nil && t.Gen != 0 && step.Gen != 0
	var a fleet.Actions
	var notes []note
	if won {
		a, notes = sh.stepLocked(fleet.ProbeWon{Gen: t.Gen, Token: token}, nil, nil)
	}
	sh.mu.Unlock()
	call, asks := a.Call.(fleet.AcquireCall)
	switch {
	case oerr != nil:
		return b.decline(oerr)
	case t.Gen == 0:
		return b.halted(b.mach.Snapshot())
	case step.Gen == 0:
		return b.permit(t), nil
	case !asks:
		// The store is unreachable: the local probe goes ahead, for the
		// lease Recover decided, unless the breaker fails closed.
		step.Until = machine.After(step.At, a.Probe.Hold)
		b.mgr.notify(b, step)
		sh.handOver(a, notes)
		if a.Probe.Decline {
			return sh.decline(b)
		}
		return b.permit(t), nil
	}
	sh.handOver(a, notes)
	var got bool
	var st store.Status
	err := sh.callCtx(ctx, func(ctx context.Context) (err error) {
		got, st, err = sh.st.AcquireProbe(ctx, b.Name(), call.Token, call.Epoch, call.Lease)
		return err
	})
	canceled := err != nil && ctx.Err() != nil
	if canceled {
		err = nil
	}
	l := fleet.Lease{Gen: t.Gen, Token: call.Token, Epoch: call.Epoch, For: call.Lease, Asked: call.Asked}
	reply, notes := sh.step(fleet.ProbeReply{Lease: l, Won: got, Status: st, Err: err, Canceled: canceled, At: b.mgr.clk.Now()}, nil)
	// The probing step first: the loop arms its timer for the lease.
	step.Until = machine.After(step.At, reply.Probe.Hold)
	b.mgr.notify(b, step)
	sh.handOver(reply, notes)
	switch {
	case reply.Probe.GiveBack:
		sh.endProbe(b, t, classify.Ignore, nil)
		return Permit{}, ctx.Err()
	case reply.Probe.Decline:
		return sh.decline(b)
	}
	return b.permit(t), nil
}

// decline declines the caller that won the local probe: another process
// probes, the fleet moved on, or the breaker fails closed.
func (sh *shared) decline(b *Breaker) (Permit, error) {
	if s := b.mach.Snapshot(); s.Err != nil {
		return b.decline(s.Err)
	}
	return b.decline(&breaker.OpenError{Name: b.Name(), State: breaker.Probing})
}

// endProbe ends the probe of ticket t with outcome o. A success's or an
// ignore's verdict is applied in the store first, so that no call this
// process admits afterwards counts against the run of failures it
// clears, nor finds the lease still held; a failure opens the breaker
// here at once, and the loop resolves the lease with the period Recover
// decides.
func (sh *shared) endProbe(b *Breaker, t machine.Ticket, o classify.Outcome, err error) {
	a, notes := sh.step(fleet.ProbeEnded{Gen: t.Gen, Outcome: o}, err)
	sh.handOver(a, notes)
	r, ok := a.Call.(fleet.ResolveCall)
	if !ok {
		return
	}
	var st store.Status
	var applied bool
	serr := sh.call(func(ctx context.Context) (err error) {
		// A success starts the fleet's slow start, of this process's
		// length; the store counts it down for every process.
		st, applied, err = sh.st.Resolve(ctx, b.Name(), r.Lease.Token, r.Lease.Epoch, r.Outcome, b.mach.SlowStart(), store.Reason{})
		return err
	})
	a, notes = sh.step(fleet.VerdictReply{Gen: t.Gen, Outcome: o, Applied: applied, Status: st, Err: serr, At: b.mgr.clk.Now()}, err)
	sh.handOver(a, notes)
}

// forceOpen implements truth: ForceOpen in the store first, then here.
func (sh *shared) forceOpen(b *Breaker) {
	sh.manual(b, true)
	b.forceOpen()
}

// reset implements truth: Reset in the store first, then here.
func (sh *shared) reset(b *Breaker) {
	if !sh.manual(b, false) {
		b.reset()
	}
}

// manual runs a manual action (ForceOpen or Reset) in the store first, for
// every process, unless the store is unreachable (the action is then this
// process's alone, until it answers): one round trip on the caller's
// goroutine, bounded by the store timeout. The fleet moves to a new epoch,
// which ends any lease and fences every decision of the epochs before.
// It reports whether the step held the breaker open itself, a Reset
// failing closed while the store is unreachable, so that the machine is
// not reset.
func (sh *shared) manual(b *Breaker, force bool) (held bool) {
	a, notes := sh.step(fleet.Manual{Force: force}, nil)
	sh.handOver(a, notes)
	if _, ok := a.Call.(fleet.ManualCall); !ok {
		return !force && heldOpen(a.Change)
	}
	var st store.Status
	err := sh.call(func(ctx context.Context) (err error) {
		if force {
			st, err = sh.st.ForceOpen(ctx, b.Name())
		} else {
			st, err = sh.st.Reset(ctx, b.Name())
		}
		return err
	})
	a, notes = sh.step(fleet.ManualReply{Force: force, Status: st, Err: err}, nil)
	sh.handOver(a, notes)
	return !force && heldOpen(a.Change)
}

// heldOpen reports whether c holds the machine open, or moves it there:
// a step's answer to a Reset failing closed while the store is
// unreachable.
func heldOpen(c fleet.Change) bool {
	switch c := c.(type) {
	case fleet.Hold:
		return true
	case fleet.Move:
		return c.State == breaker.Open
	}
	return false
}

// link returns st with what Stats says of the breaker's link to its
// store filled in.
func (sh *shared) link(st Stats) Stats {
	h := sh.hints.Load()
	st.Shared, st.StoreDown, st.StoreErrors = true, h.Down, sh.errors.Load()
	st.Processes = h.Processes
	if st.OpenedBy == "" && !st.Forced && st.State != breaker.Closed && st.State != breaker.Halted {
		st.OpenedBy = sh.b.mgr.name
	}
	return st
}

// reconfigure implements truth: cfg keeps the store and the fallback, and
// what the store's layout of the breaker depends on (the kind of strategy,
// a window's period and buckets); its thresholds and quorum may change,
// and apply, on the loop, to the next outcome.
func (sh *shared) reconfigure(b *Breaker, cfg Config) (func(), error) {
	switch {
	case !sameValue(cfg.Store, sh.st):
		return nil, b.unchangeable("Store", "on a registered breaker")
	case cfg.Fallback != sh.fallback:
		return nil, b.unchangeable("Fallback", "on a shared breaker")
	}
	old, cur := sh.policy.Load(), b.mach.Strategy()
	if reflect.TypeOf(cfg.Strategy) != reflect.TypeOf(cur) {
		return nil, b.unchangeable("Strategy", fmt.Sprintf("from %T to %T on a shared breaker, whose store counts each kind in a layout of its own", cur, cfg.Strategy))
	}
	p, err := sharepolicy.Of(cfg.Strategy)
	if err != nil {
		return nil, configError(opReconfigure, b.Name(), "Strategy", err)
	}
	switch {
	case (p.Rate > 0) != (old.Rate > 0):
		return nil, b.unchangeable("Strategy", "between a count and a window on a shared breaker, whose store counts each in a layout of its own")
	case p.Period != old.Period:
		return nil, b.unchangeable("Strategy.Period", fmt.Sprintf("from %v to %v on a shared breaker, whose store keeps its window in buckets of Period/Buckets", old.Period, p.Period))
	case p.Buckets != old.Buckets:
		return nil, b.unchangeable("Strategy.Buckets", fmt.Sprintf("from %d to %d on a shared breaker, whose store keeps its window in buckets of Period/Buckets", old.Buckets, p.Buckets))
	}
	p.Quorum, p.Reporter = cfg.Quorum, old.Reporter
	return func() {
		sh.policy.Store(&p)
		sh.step(fleet.Reconfigured{Policy: p}, nil)
		sh.step(fleet.DryRunSet{On: cfg.DryRun}, nil)
	}, nil
}

// guardStore runs f, a call of store st, and turns a panic into an error:
// a store's bug makes its breakers fall back, and never reaches a caller
// or the manager's goroutines.
func guardStore(st store.Store, f func() error) error {
	var err error
	if p := guard(func() { err = f() }); p != nil {
		return fmt.Errorf("fusebox: store %T panicked: %v", st, p.value)
	}
	return err
}
