package manager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
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
// Who does what:
//   - callers: a failure in the closed state is recorded in the store on the
//     caller's goroutine, by the counter of the closed period
//     (sharedCounter), and the reply (the shared count, or the open period
//     already set) trips or mirrors the breaker at once; a caller that wins
//     the local probe takes the store's probe lease before calling; ForceOpen
//     and Reset act in the store first;
//   - the loop (sharedloop.go): it asks Recover for periods, sends openings
//     and verdicts to the store from short-lived goroutines (their results
//     come back as typed messages, storemsg.go), mirrors what the store says,
//     and runs the fallback;
//   - a hub per store (hub.go): the watch of the store's changes, and the
//     periodic resync of every shared breaker.

// Defaults of the store options.
const (
	DefaultStoreTimeout = 500 * time.Millisecond
	DefaultResync       = time.Second
	// defaultLease is a shared probe's lease when no probe time was decided
	// for it yet.
	defaultLease = 10 * time.Second
)

// shared is the truth of a breaker shared through a store, and all the
// state only such a breaker has.
type shared struct {
	b        *Breaker
	st       store.Store
	hub      *hub
	policy   store.Policy
	fallback store.Fallback

	dirty    atomic.Bool   // consecutive: a failure was reported since the last success report
	pending  *pending      // window: successes not reported yet
	calls    atomic.Int64  // window: the calls in the window, as the store last counted them
	failures atomic.Int64  // window: the failures in the window, as the store last counted them
	lease    atomic.Int64  // the next probe's lease, decided by Recover when the breaker opened
	epoch    atomic.Uint64 // the store's epoch the breaker's state follows
	epochAt  atomic.Uint64 // the hub's status calls started when epoch last changed
	probeOf  atomic.Pointer[heldLease]
	failing  atomic.Pointer[heldLease] // the lease of a failed probe, which the loop resolves with the period Recover decides
	joined   joined                    // what the store said as the breaker registered
	down     atomic.Bool               // the store could not be reached: the fallback is in effect; set by the loop once it applies
	losing   atomic.Bool               // a failed store call was reported to the loop, which has yet to apply the fallback
	forcing  atomic.Bool               // forced open while the store was unreachable: the fleet's forcing is on its way, and nothing the store says before it is followed
	deciding atomic.Bool               // a caller is applying its probe's verdict in the store: the loop defers what it hears meanwhile
	deferred atomic.Pointer[heard]     // the last status the loop heard while a caller was deciding
	downAt   uint64                    // owned by the loop: the hub's status calls started when the fallback applied
	errors   atomic.Uint64
}

// joined is what the store said of a shared breaker as it registered: its
// status, read at at, or the error of that read.
type joined struct {
	status store.Status
	at     time.Time
	err    error
}

// heldLease is the probe lease this process holds.
type heldLease struct {
	gen   uint64 // the probing generation
	token string
	epoch uint64 // the store's epoch the lease belongs to
}

func isComparable(st store.Store) bool { return reflect.TypeOf(st).Comparable() }

// newShared validates a shared breaker's configuration, and makes b's
// machine record in the store as its counters count. It runs before the
// machine's Init.
func newShared(b *Breaker, name string, cfg Config) (*shared, error) {
	if !isComparable(cfg.Store) {
		return nil, registerError(name, "Store", fmt.Errorf("%T is not comparable; pass a pointer", cfg.Store))
	}
	p, err := sharepolicy.Of(cfg.Strategy)
	if err != nil {
		return nil, registerError(name, "Strategy", err)
	}
	if cfg.Fallback > store.FailClosed {
		return nil, registerError(name, "Fallback", fmt.Errorf("unknown value %d", cfg.Fallback))
	}
	if err := guardStore(cfg.Store, func() error { return cfg.Store.Check(name) }); err != nil {
		return nil, registerError(name, "Store", err)
	}
	sh := &shared{b: b, st: cfg.Store, policy: p, fallback: cfg.Fallback}
	if p.Window() {
		sh.pending = newPending(p)
	}
	b.mach.Wrap(sh.counter)
	return sh, nil
}

// heard is a status a mirror heard, at at.
type heard struct {
	st store.Status
	at time.Time
}

// deferTo keeps st, heard on the loop while a caller applies its probe's
// verdict, for the caller to follow once the verdict is applied (endVerdict):
// the verdict's own change, which the store may deliver before the verdict
// returns, must not move the breaker first. Of what the loop hears
// meanwhile, the status of the newest epoch is kept. It returns nil if the
// status waits for the caller; otherwise the caller finished meanwhile, and
// the loop follows what it returns itself.
func (sh *shared) deferTo(st store.Status, at time.Time) *heard {
	h := &heard{st: st, at: at}
	for {
		old := sh.deferred.Load()
		if old != nil && old.st.Epoch > st.Epoch {
			h = old
			break
		}
		if sh.deferred.CompareAndSwap(old, h) {
			break
		}
	}
	if sh.deciding.Load() || !sh.deferred.CompareAndSwap(h, nil) {
		return nil // the caller follows it, or took it already
	}
	return h
}

// endVerdict ends a caller's verdict: it follows what the loop heard
// meanwhile, which a newer epoch (another process's ForceOpen, say) makes
// news, and the verdict's own change leaves as it is.
func (sh *shared) endVerdict() {
	sh.deciding.Store(false)
	if h := sh.deferred.Swap(nil); h != nil {
		sh.follow(h.st, h.at, false)
	}
}

// join reads the breaker's shared state as it registers, on the caller's
// goroutine, for the loop to start from.
func (sh *shared) join() {
	sh.joined.at = sh.b.mgr.clk.Now()
	var st []store.Status
	sh.joined.err = sh.call(func(ctx context.Context) (err error) {
		st, err = sh.st.Status(ctx, []string{sh.b.Name()})
		return err
	})
	if sh.joined.err == nil && len(st) == 1 {
		sh.joined.status = st[0]
	}
}

// counter wraps the counter of one closed period of the breaker.
func (sh *shared) counter(c breaker.Counter) breaker.Counter {
	sc := sharedCounter{Counter: c, sh: sh}
	if _, ok := c.(breaker.Windowed); ok {
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

// Window implements breaker.Windowed: the window this process counted.
func (c *sharedWindowCounter) Window(now time.Time) (calls, failures uint64) {
	return c.Counter.(breaker.Windowed).Window(now)
}

// record is an outcome in the closed state. Its own counter c counts every
// outcome: it is what a success checks first (with the store's last
// counts) before asking the store whether it reached the threshold, and
// what the local fallback trips on. While the store is unreachable only
// the local fallback counts.
func (sh *shared) record(c breaker.Counter, o classify.Outcome, now time.Time) bool {
	if sh.down.Load() {
		return sh.fallback == store.FallbackLocal && c.Record(o, now)
	}
	b := sh.b
	localTrip := c.Record(o, now)
	var (
		v   store.Verdict
		err error
		at  time.Time // when the store call was made: a healthy call reads no clock
	)
	switch {
	case o == classify.Failure:
		var succ []int64
		if sh.pending != nil {
			succ = sh.pending.take(sh.policy.Bucket(now))
		}
		at = b.mgr.clk.Now()
		err = sh.call(func(ctx context.Context) (err error) {
			v, err = sh.st.RecordFailure(ctx, b.Name(), sh.policy, succ)
			return err
		})
		if err == nil {
			sh.dirty.Store(true)
		}
	case o != classify.Success:
		return false
	case sh.pending != nil:
		// The threshold is checked after every outcome: a success that
		// may bring the window to it, by this process's count or by the
		// store's last counts, is reported at once.
		idx := sh.policy.Bucket(now)
		sh.pending.add(idx)
		if !localTrip && !sh.mayTrip(idx) {
			return false
		}
		at = b.mgr.clk.Now()
		err = sh.call(func(ctx context.Context) (err error) {
			v, err = sh.st.RecordSuccess(ctx, b.Name(), sh.policy, sh.pending.take(idx))
			return err
		})
	default:
		if !sh.dirty.Load() || !sh.dirty.CompareAndSwap(true, false) {
			return false
		}
		err = sh.call(func(ctx context.Context) (err error) {
			_, err = sh.st.RecordSuccess(ctx, b.Name(), sh.policy, nil)
			return err
		})
		if err != nil {
			sh.dirty.Store(true)
			sh.failed(err)
		}
		return false
	}
	if err != nil {
		sh.failed(err)
		return sh.fallback == store.FallbackLocal && localTrip
	}
	if sh.pending != nil {
		sh.counted(v)
	}
	switch {
	case v.Opened():
		// The fleet is open already: follow it.
		sh.follow(v.Status, at, false)
	case sh.policy.Trips(v):
		// The trip belongs to the closed epoch the store counted in.
		sh.raiseEpoch(v.Epoch)
		return true
	}
	return false
}

// call runs a store call on a caller's goroutine, with the store deadline,
// turning a panic into an error.
func (sh *shared) call(f func(ctx context.Context) error) error {
	return sh.callCtx(context.Background(), f)
}

// callCtx is call with the caller's own ctx as the parent of the deadline.
func (sh *shared) callCtx(parent context.Context, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(parent, sh.b.mgr.storeTimeout)
	defer cancel()
	return guardStore(sh.st, func() error { return f(ctx) })
}

// counted keeps the window's counts of a store's verdict.
func (sh *shared) counted(v store.Verdict) {
	sh.calls.Store(v.Calls)
	sh.failures.Store(v.Failures)
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
	return sh.policy.Trips(store.Verdict{Calls: sh.calls.Load() + sh.pending.total(idx), Failures: f})
}

// flushSuccesses reports the successes of a window policy counted since the
// last report.
func (sh *shared) flushSuccesses(ctx context.Context) {
	succ := sh.pending.take(sh.policy.Bucket(sh.b.mgr.clk.Now()))
	if succ == nil {
		return
	}
	if v, err := sh.st.RecordSuccess(ctx, sh.b.Name(), sh.policy, succ); err == nil {
		sh.counted(v)
	}
}

func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// probe takes the store's probe lease for the local probe t, won at step.
// It returns the permit, or declines the caller when another process holds
// the lease or the breaker is still open in the store. While the store is
// unreachable the local probe goes ahead.
func (sh *shared) probe(b *Breaker, ctx context.Context, t machine.Ticket, step machine.Step) (Permit, error) {
	lease := time.Duration(sh.lease.Load())
	if lease <= 0 {
		lease = defaultLease
	}
	if sh.down.Load() {
		// The local probe goes ahead, for the lease Recover decided.
		b.mgr.notifyHeld(b, step, max(time.Duration(sh.lease.Load()), time.Millisecond))
		return b.permit(t), nil
	}
	token, epoch := newToken(), sh.epoch.Load()
	at := b.mgr.clk.Now()
	var won bool
	var st store.Status
	err := sh.callCtx(ctx, func(ctx context.Context) (err error) {
		won, st, err = sh.st.AcquireProbe(ctx, b.Name(), token, epoch, lease)
		return err
	})
	switch {
	case err != nil && ctx.Err() != nil:
		// The caller gave up: give the probe slot back.
		b.mgr.notifyHeld(b, step, lease)
		b.endProbe(t, classify.Ignore, nil)
		return Permit{}, ctx.Err()
	case err != nil:
		sh.failed(err)
		b.mgr.notifyHeld(b, step, lease)
		return b.permit(t), nil
	case won:
		sh.probeOf.Store(&heldLease{gen: t.Gen, token: token, epoch: epoch})
		b.mgr.notifyHeld(b, step, lease)
		return b.permit(t), nil
	}
	// Another process probes, the store's open period is not over, or the
	// fleet moved to another epoch (a close or an opening this process
	// missed): decline, and follow what the store says.
	b.mgr.notifyHeld(b, step, max(st.Probe, time.Millisecond))
	sh.follow(st, at, false)
	b.stats.Add(statDeclined)
	if s := b.mach.Snapshot(); s.Err() != nil {
		return Permit{}, s.Err()
	}
	return Permit{}, &breaker.OpenError{Name: b.Name(), State: breaker.Probing}
}

// verdict applies a successful or ignored probe's verdict in the store
// before the breaker changes here, so that no call this process admits
// afterwards can count against the run of failures the verdict clears, nor
// find the lease still held. A failure's lease is kept for the loop, which
// resolves it with the period Recover decides (see applied). A verdict the
// store refuses as stale (its lease or its epoch is over) is applied here
// as Ignore, and the breaker then follows the store.
func (sh *shared) verdict(b *Breaker, t machine.Ticket, o classify.Outcome) (classify.Outcome, func()) {
	l := sh.leaseOf(t.Gen)
	if l != nil && o == classify.Failure {
		sh.failing.Store(l)
	}
	if l == nil || o == classify.Failure || sh.down.Load() {
		return o, nil
	}
	// The store delivers the change the verdict makes to this process's
	// own watch, maybe before Resolve returns: the loop must not follow it
	// before the verdict is applied here, which would close the breaker as
	// someone else's decision and make the probe's release stale.
	sh.deciding.Store(true)
	done := sh.endVerdict
	at := b.mgr.clk.Now()
	var st store.Status
	var applied bool
	err := sh.call(func(ctx context.Context) (err error) {
		st, applied, err = sh.st.Resolve(ctx, b.Name(), l.token, l.epoch, o, 0)
		return err
	})
	switch {
	case err != nil:
		sh.failed(err)
	case applied:
		sh.raiseEpoch(st.Epoch)
	default:
		return classify.Ignore, func() { done(); sh.follow(st, at, false) }
	}
	return o, done
}

// leaseOf returns the lease this process holds for the probe of
// generation gen, and forgets it.
func (sh *shared) leaseOf(gen uint64) *heldLease {
	if l := sh.probeOf.Load(); l != nil && l.gen == gen && sh.probeOf.CompareAndSwap(l, nil) {
		return l
	}
	return nil
}

// raiseEpoch moves the breaker's epoch up to e, noting which status calls
// had started by then: a later one that finds the store below is no late
// answer, and means the store lost its data.
func (sh *shared) raiseEpoch(e uint64) {
	for {
		cur := sh.epoch.Load()
		if e <= cur {
			return
		}
		if sh.epoch.CompareAndSwap(cur, e) {
			sh.epochAt.Store(sh.hub.asked.Load())
			return
		}
	}
}

// reset closes the breaker in the store, for every process, as Reset
// closes it here: one store round trip on the caller's goroutine, bounded
// by the store timeout. The fleet moves to a new closed epoch, which ends
// any lease and any forcing, and fences every decision of the epochs
// before.
func (sh *shared) reset(b *Breaker) {
	sh.manual(func(ctx context.Context) (store.Status, error) { return sh.st.Reset(ctx, b.Name()) })
}

// force forces the breaker open in the store, for every process, as
// ForceOpen forces it here. The fleet moves to a new opened epoch, which
// ends any lease and fences the verdict of a probe in flight.
func (sh *shared) force(b *Breaker) {
	sh.manual(func(ctx context.Context) (store.Status, error) { return sh.st.ForceOpen(ctx, b.Name()) })
}

// manual runs a manual action in the store, unless the store is
// unreachable (the action is then this process's alone).
func (sh *shared) manual(act func(ctx context.Context) (store.Status, error)) {
	if sh.down.Load() {
		return
	}
	var st store.Status
	err := sh.call(func(ctx context.Context) (err error) {
		st, err = act(ctx)
		return err
	})
	if err != nil {
		sh.failed(err)
		return
	}
	sh.probeOf.Store(nil)
	sh.raiseEpoch(st.Epoch)
}

// failed switches the breaker to its fallback after a store call of its
// own failed.
func (sh *shared) failed(err error) {
	sh.errors.Add(1)
	if !sh.down.Load() && sh.losing.CompareAndSwap(false, true) {
		sh.b.mgr.sendStore(failedMsg{h: sh.hub, sh: sh, err: err})
	}
}

// follow moves the breaker as store.Follow, the mirror's pure rule, says
// for status st, asked for at at. On the loop it also corrects the end of
// the current state's timer; a caller leaves that to the loop's next
// resync. A halted breaker follows nothing, nor one whose forcing is on
// its way to the store. While a caller applies its probe's verdict, what
// the loop hears waits for the verdict (see deferTo).
func (sh *shared) follow(st store.Status, at time.Time, onLoop bool) {
	b := sh.b
	if onLoop && sh.deciding.Load() {
		h := sh.deferTo(st, at)
		if h == nil {
			return
		}
		st, at = h.st, h.at
	}
	s := b.mach.Snapshot()
	if s.Halted || sh.forcing.Load() {
		return
	}
	now := b.mgr.clk.Now()
	// This process holds the lease while its probe is the breaker's
	// current state: once the probe's time ran out here (the lease's
	// too), another process may hold it.
	held := sh.probeOf.Load()
	holder := held != nil && held.gen == s.Gen && s.State == breaker.Probing
	cur := store.Mirror{State: s.State, Epoch: sh.epoch.Load(), Until: s.Until, Forced: s.Forced, Holder: holder}
	next, changed := store.Follow(cur, st, at, now)
	if !changed {
		return
	}
	if next.Epoch > cur.Epoch {
		sh.raiseEpoch(next.Epoch)
		if held != nil {
			// A new epoch ends the lease this process held.
			sh.probeOf.CompareAndSwap(held, nil)
		}
	}
	var hold time.Duration
	if !next.Until.IsZero() {
		hold = next.Until.Sub(now)
	}
	if next.State == s.State && next.Forced == s.Forced {
		if onLoop && !next.Until.IsZero() && !next.Until.Equal(s.Until) {
			b.mgr.extend(b, s.Gen, next.Until)
		}
		return
	}
	step, ok := b.mach.Mirror(next.State, next.Until, next.Forced, now)
	if !ok {
		return
	}
	if onLoop {
		b.mgr.handleNote(note{b: b, step: step, hold: hold, held: true})
	} else {
		b.mgr.notifyHeld(b, step, hold)
	}
}

// link implements truth.
func (sh *shared) link() storeLink {
	return storeLink{shared: true, down: sh.down.Load(), errors: sh.errors.Load()}
}

// fixed checks that cfg keeps the store, the fallback and the strategy,
// which a shared breaker counts with in the store.
func (sh *shared) fixed(b *Breaker, cfg Config) error {
	switch {
	case !sameValue(cfg.Store, sh.st):
		return b.unchangeable("Store", "on a registered breaker")
	case cfg.Fallback != sh.fallback:
		return b.unchangeable("Fallback", "on a shared breaker")
	case !sameValue(cfg.Strategy, b.mach.Strategy()):
		return b.unchangeable("Strategy", "on a shared breaker, which counts with it in the store")
	}
	return nil
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
