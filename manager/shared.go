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

	// What the healthy path reads without the lock: written under mu
	// after every step, so that a success of a healthy breaker costs two
	// atomic loads and no lock.
	hints     atomic.Uint32 // hintDown, hintDirty
	calls     atomic.Int64  // window: state.Calls
	failures  atomic.Int64  // window: state.Failures
	processes atomic.Int64  // state.Processes, for Stats

	pending *pending // window: successes not reported yet, counted lock-free
	errors  atomic.Uint64

	// links are the events of the store link (EventStoreLost,
	// EventStoreRestored) steps decided, in order, for the loop to
	// publish (publishLinks); guarded by mu.
	links []EventKind
}

// Bits of shared.hints.
const (
	hintDown  = 1 << iota // state.Down: only the fallback counts
	hintDirty             // state.Dirty: the next success ends the shared run
)

func isComparable(st store.Store) bool { return reflect.TypeOf(st).Comparable() }

// newShared validates a shared breaker's configuration, and makes b's
// machine record in the store as its counters count. It runs before the
// machine's Init. validateConfig has checked the Fallback.
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
	sh.state = fleet.State{Policy: p, Fallback: cfg.Fallback}
	if p.Rate > 0 {
		sh.pending = newPending(p)
	}
	b.mach.Wrap(sh.counter)
	return sh, nil
}

// step feeds msg to the breaker's Step and applies the change of the
// machine it decides, on the snapshot it decided on: if the machine moved
// meanwhile (a caller's trip, a timer), Step decides again on the new
// one. It then follows the statuses the step left for after its change.
// It returns the step's actions and the machine's steps for the loop,
// which the caller hands over once the lock is released (see handOver).
// probeErr is the error of the probe an End action ends.
func (sh *shared) step(msg fleet.Msg, probeErr error) (fleet.Actions, []note) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	a, notes := sh.stepLocked(msg, probeErr, nil)
	for len(a.Then) > 0 {
		h := a.Then[0]
		a.Then = a.Then[1:]
		then, more := sh.stepLocked(h, nil, notes)
		notes = more
		if !then.Extend.IsZero() {
			a.Extend, a.ExtendGen = then.Extend, then.ExtendGen
		}
		a.Then = append(a.Then, then.Then...)
	}
	return a, notes
}

func (sh *shared) stepLocked(msg fleet.Msg, probeErr error, notes []note) (fleet.Actions, []note) {
	b := sh.b
	for {
		s := b.mach.Snapshot()
		v := fleet.View{State: s.State, Gen: s.Gen, Until: s.Until, Forced: s.Forced, Halted: s.Halted, Asked: sh.hub.asked.Load()}
		now := b.mgr.clk.Now()
		next, a := fleet.Step(sh.state, v, now, msg)
		moved := false
		switch {
		case a.Move != nil:
			mv := a.Move
			step, ok := b.mach.Mirror(mv.Gen, mv.State, mv.Until, mv.Forced, openedError(mv.Reason), now)
			if ok {
				notes = append(notes, note{b: b, step: step})
			}
			moved = !ok && b.mach.Snapshot().Gen != s.Gen
		case a.Clear != 0:
			moved = !b.mach.Hold(a.Clear) && b.mach.Snapshot().Gen != s.Gen
		case a.End != 0:
			gen := probeGen(msg)
			step, r := b.mach.EndProbe(machine.Ticket{Gen: gen, Probe: true}, a.End, probeErr, now)
			if r == machine.Stale {
				b.stats.Add(statStale)
			} else {
				notes = append(notes, note{b: b, step: step})
			}
		case a.Renew:
			b.mach.Renew()
		}
		if moved {
			continue
		}
		sh.state = next
		sh.publishHints()
		if a.Lost {
			sh.links = append(sh.links, EventStoreLost)
		}
		if a.Restored {
			sh.links = append(sh.links, EventStoreRestored)
		}
		return a, notes
	}
}

// probeGen is the probing generation a message that ends a probe names.
func probeGen(msg fleet.Msg) uint64 {
	switch m := msg.(type) {
	case fleet.ProbeEnded:
		return m.Gen
	case fleet.VerdictReply:
		return m.Gen
	}
	return 0
}

// publishHints copies what the healthy path reads of the state; mu is
// held.
func (sh *shared) publishHints() {
	var h uint32
	if sh.state.Down {
		h |= hintDown
	}
	if sh.state.Dirty {
		h |= hintDirty
	}
	sh.hints.Store(h)
	if sh.pending != nil {
		sh.calls.Store(sh.state.Calls)
		sh.failures.Store(sh.state.Failures)
	}
	sh.processes.Store(sh.state.Processes)
}

// tripCause implements truth: a trip this process decides alone, short of
// the fleet's quorum, says so.
func (sh *shared) tripCause(gen uint64) breaker.Cause {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.state.TripCause(gen)
}

// handOver hands the machine's steps to the loop, from a caller's
// goroutine, with the store link's event the step decided, if any, and
// logs a fallback.
func (sh *shared) handOver(a fleet.Actions, notes []note) {
	m := sh.b.mgr
	if a.FellBack != nil {
		sh.logFallBack(a.FellBack)
	}
	link := a.Lost || a.Restored
	for i, n := range notes {
		if i == len(notes)-1 && link {
			n.links, link = sh, false
		}
		m.send(n)
	}
	if link {
		m.send(note{b: sh.b, links: sh})
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

// counter wraps the counter of one closed period of the breaker.
func (sh *shared) counter(c breaker.Counter) breaker.Counter {
	sc := sharedCounter{Counter: c, sh: sh}
	if _, ok := c.(machine.Windowed); ok {
		return &sharedWindowCounter{sc}
	}
	return &sc
}

// sharedCounter is the counter of a shared breaker's closed period: the
// strategy's own counter, which counts every outcome here, and the store,
// which counts the fleet's (see shared.record).
type sharedCounter struct {
	breaker.Counter
	sh *shared
}

// Record implements breaker.Counter: it reports whether the outcome trips
// the breaker.
func (c *sharedCounter) Record(o classify.Outcome, now time.Time) bool {
	return c.sh.record(c.Counter, o, now)
}

// sharedWindowCounter is a sharedCounter whose strategy keeps a window.
type sharedWindowCounter struct{ sharedCounter }

// Window implements machine.Windowed: the window this process counted.
func (c *sharedWindowCounter) Window(now time.Time) (calls, failures uint64) {
	return c.Counter.(machine.Windowed).Window(now)
}

// record is an outcome in the closed state. Its own counter c counts every
// outcome: it is what the local fallback trips on, and what a window's
// success checks first, with the store's last counts, before the step is
// asked whether the store must hear of it. A success of a healthy breaker
// so reads two atomic hints and takes no lock.
func (sh *shared) record(c breaker.Counter, o classify.Outcome, now time.Time) bool {
	localTrip := c.Record(o, now)
	switch h := sh.hints.Load(); {
	case h&hintDown != 0 && !localTrip, o == classify.Ignore:
		// While the store is unreachable only what trips the local
		// count matters (the step says what the fallback makes of it).
		return false
	case o == classify.Failure || h&hintDown != 0:
	case sh.pending != nil:
		// The threshold is checked after every outcome: a success that
		// may bring the window to it, by this process's count or by the
		// store's last counts, is reported at once.
		idx := sharepolicy.Bucket(sh.policy.Load(), now)
		sh.pending.add(idx)
		if !localTrip && !sh.mayTrip(idx) {
			return false
		}
	case h&hintDirty == 0:
		return false
	}
	gen := sh.b.mach.Snapshot().Gen
	a, notes := sh.step(fleet.Outcome{Gen: gen, Outcome: o, LocalTrip: localTrip}, nil)
	sh.handOver(a, notes)
	if a.Report == fleet.ReportNone {
		return a.Trip
	}
	b := sh.b
	at := b.mgr.clk.Now() // a healthy call reads no clock
	var v store.Verdict
	failure := a.Report == fleet.ReportFailure
	p := sh.policy.Load()
	var succ []int64
	if sh.pending != nil {
		succ = sh.pending.take(sharepolicy.Bucket(p, now))
	}
	err := sh.call(func(ctx context.Context) (err error) {
		if failure {
			v, err = sh.st.RecordFailure(ctx, b.Name(), *p, succ)
		} else {
			v, err = sh.st.RecordSuccess(ctx, b.Name(), *p, succ)
		}
		return err
	})
	a, notes = sh.step(fleet.Recorded{Gen: gen, Failure: failure, LocalTrip: localTrip, Verdict: v, Err: err, At: at}, nil)
	sh.handOver(a, notes)
	return a.Trip
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

// mayTrip reports whether, by the store's last counts and the successes
// pending here, a success in bucket idx might bring the shared window to
// its threshold. A window with no failure in it cannot trip, so healthy
// calls never ask.
func (sh *shared) mayTrip(idx int64) bool {
	f := sh.failures.Load()
	if f == 0 {
		return false
	}
	return sharepolicy.Reached(*sh.policy.Load(), store.Verdict{Calls: sh.calls.Load() + sh.pending.total(idx), Failures: f})
}

// flushSuccesses reports the successes of a window policy counted since
// the last report, off the loop (the resync's goroutine): the store's
// counts, and a trip they may make, go through the step as a caller's
// report does.
func (sh *shared) flushSuccesses(ctx context.Context) {
	b := sh.b
	at := b.mgr.clk.Now()
	p := sh.policy.Load()
	succ := sh.pending.take(sharepolicy.Bucket(p, at))
	if succ == nil {
		return
	}
	gen := b.mach.Snapshot().Gen
	v, err := sh.st.RecordSuccess(ctx, b.Name(), *p, succ)
	if err != nil {
		// The resync's read that follows reports the store's state.
		return
	}
	a, notes := sh.step(fleet.Recorded{Gen: gen, Verdict: v, At: at}, nil)
	sh.handOver(a, notes)
	if a.Trip {
		b.trip(gen, classify.Success, nil)
	}
}

// openedError is the cause of an opening another process made, for r,
// what the store says of it: nil for none.
func openedError(r store.Reason) error {
	if r == (store.Reason{}) {
		return nil
	}
	return &breaker.OpenedError{By: r.By, Text: r.Why}
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
	return store.ReasonOf(sh.b.mgr.name, cause)
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
	if won {
		a, _ = sh.stepLocked(fleet.ProbeWon{Gen: t.Gen, Token: token}, nil, nil)
	}
	sh.mu.Unlock()
	switch {
	case oerr != nil:
		return b.decline(oerr)
	case t.Gen == 0:
		return b.halted(b.mach.Snapshot())
	case step.Gen == 0:
		return b.permit(t), nil
	case a.Acquire == nil:
		// The store is unreachable: the local probe goes ahead, for the
		// lease Recover decided.
		step.Until = after(step.At, a.Hold)
		b.mgr.notify(b, step)
		return b.permit(t), nil
	}
	at := b.mgr.clk.Now()
	var got bool
	var st store.Status
	call := a.Acquire
	err := sh.callCtx(ctx, func(ctx context.Context) (err error) {
		got, st, err = sh.st.AcquireProbe(ctx, b.Name(), call.Token, call.Epoch, call.Lease)
		return err
	})
	canceled := err != nil && ctx.Err() != nil
	if canceled {
		err = nil
	}
	l := fleet.Lease{Gen: t.Gen, Token: call.Token, Epoch: call.Epoch, For: call.Lease}
	reply, notes := sh.step(fleet.ProbeReply{Lease: l, Won: got, Status: st, Err: err, Canceled: canceled, At: at}, nil)
	// The probing step first: the loop arms its timer for the lease.
	step.Until = after(step.At, reply.Hold)
	b.mgr.notify(b, step)
	sh.handOver(reply, notes)
	switch {
	case reply.GiveBack:
		sh.endProbe(b, t, classify.Ignore, nil)
		return Permit{}, ctx.Err()
	case reply.Decline:
		if s := b.mach.Snapshot(); s.Err != nil {
			return b.decline(s.Err)
		}
		return b.decline(&breaker.OpenError{Name: b.Name(), State: breaker.Probing})
	}
	return b.permit(t), nil
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
	r := a.Resolve
	if r == nil {
		return
	}
	at := b.mgr.clk.Now()
	var st store.Status
	var applied bool
	serr := sh.call(func(ctx context.Context) (err error) {
		st, applied, err = sh.st.Resolve(ctx, b.Name(), r.Lease.Token, r.Lease.Epoch, r.Outcome, 0, store.Reason{})
		return err
	})
	a, notes = sh.step(fleet.VerdictReply{Gen: t.Gen, Outcome: o, Applied: applied, Status: st, Err: serr, At: at}, err)
	sh.handOver(a, notes)
}

// manual runs a manual action (ForceOpen or Reset) in the store first, for
// every process, unless the store is unreachable (the action is then this
// process's alone, until it answers): one round trip on the caller's
// goroutine, bounded by the store timeout. The fleet moves to a new epoch,
// which ends any lease and fences every decision of the epochs before.
func (sh *shared) manual(b *Breaker, force bool) {
	a, notes := sh.step(fleet.Manual{Force: force}, nil)
	sh.handOver(a, notes)
	if !a.Force && !a.Reset {
		return
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
	a, notes = sh.step(fleet.ManualReply{Status: st, Err: err}, nil)
	sh.handOver(a, notes)
}

// link implements truth.
func (sh *shared) link(st Stats) Stats {
	st.Shared, st.StoreDown, st.StoreErrors = true, sh.hints.Load()&hintDown != 0, sh.errors.Load()
	st.Processes = sh.processes.Load()
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
