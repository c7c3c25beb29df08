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
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

// This file is the part of the manager that shares breakers through a
// store.Store (DESIGN.md §6). A shared breaker keeps its hot path local: its
// snapshot mirrors the shared state, and only failures, the first success
// after failures, the opening, and the probe reach the store.
//
// Who does what:
//   - callers: a failure in the closed state is recorded in the store on the
//     caller's goroutine, and the reply (the shared count, or the open
//     period already set) trips or mirrors the breaker at once; a caller that
//     wins the local probe takes the store's probe lease before calling;
//   - the loop: it asks Recover for periods, sends openings and verdicts to
//     the store from short-lived goroutines (their results come back as
//     messages), mirrors what the store says, and runs the fallback;
//   - a hub per store: a goroutine watching the store's changes and one
//     resyncing every shared breaker periodically.

// Defaults of the store options.
const (
	DefaultStoreTimeout = 500 * time.Millisecond
	DefaultResync       = time.Second
	// defaultLease is a shared probe's lease when no probe time was decided
	// for it yet.
	defaultLease = 10 * time.Second
)

// sharing is the part of a Breaker shared through a store.
type sharing struct {
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
	probe    atomic.Pointer[heldLease]
	down     atomic.Bool // the store could not be reached: the fallback is in effect; set by the loop once it applies
	losing   atomic.Bool // a failed store call was reported to the loop, which has yet to apply the fallback
	forcing  atomic.Bool // forced open while the store was unreachable: the fleet's forcing is on its way, and nothing the store says before it is followed
	downAt   uint64      // owned by the loop: the hub's status calls started when the fallback applied
	errors   atomic.Uint64
}

// heldLease is the probe lease this process holds.
type heldLease struct {
	gen   uint64 // the probing generation
	token string
	epoch uint64 // the store's epoch the lease belongs to
}

// storeMsg is a result of the store coming back to the loop.
type storeMsg struct {
	hub *hub
	b   *Breaker

	kind     storeMsgKind
	change   store.Change
	names    []*Breaker
	statuses []store.Status
	status   store.Status // the status an Open or a Resolve left
	won      bool         // that Open opened, or that Resolve applied its verdict
	err      error
	// at is when the call was made, on the manager's clock: durations
	// the store returned count from there, however late the reply is
	// handled.
	at time.Time
	// seq numbers a status call among the hub's (hub.asked): only one
	// started after a breaker fell back is news that its store answers.
	seq uint64
	// resync marks the answer to the hub's periodic resync.
	resync bool
}

type storeMsgKind uint8

const (
	msgChange   storeMsgKind = iota + 1 // a change seen by the hub's watcher
	msgStatus                           // a resync's statuses, or its error
	msgOpened                           // the result of Open for the breaker's trip, or of ForceOpen
	msgResolved                         // the result of Resolve
	msgFailed                           // a caller's store call failed
)

func isComparable(st store.Store) bool { return reflect.TypeOf(st).Comparable() }

// newSharing validates a shared breaker's configuration.
func newSharing(name string, cfg Config) (*sharing, error) {
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
	if err := checkStore(cfg.Store, name); err != nil {
		return nil, registerError(name, "Store", err)
	}
	sh := &sharing{st: cfg.Store, policy: p, fallback: cfg.Fallback}
	if p.Window() {
		sh.pending = newPending(p)
	}
	return sh, nil
}

// goStore runs a store call off the loop, with the store deadline, and
// hands its result to the loop. A store that panics fails the call: the
// hub's breakers, or b's alone if b is not nil, fall back.
func (m *Manager) goStore(h *hub, b *Breaker, call func(ctx context.Context) storeMsg) {
	m.wg.Add(1)
	m.storeCalls.add()
	go func() {
		defer m.wg.Done()
		// Done once the loop has received the result (or the manager
		// stopped): the loop handles it before any later request, Sync's
		// included.
		defer m.storeCalls.done()
		ctx, cancel := context.WithTimeout(context.Background(), m.storeTimeout)
		defer cancel()
		stop := context.AfterFunc(m.stopCtx, cancel)
		defer stop()
		at := m.clk.Now()
		var msg storeMsg
		if err := m.guardStore(h.st, func() error { msg = call(ctx); return nil }); err != nil {
			msg = storeMsg{b: b, kind: msgFailed, err: err}
		}
		msg.hub = h
		if msg.at.IsZero() {
			msg.at = at
		}
		m.sendStore(msg)
	}()
}

// checkStore is st.Check(name), with a panic turned into an error.
func checkStore(st store.Store, name string) error {
	var err error
	if p := guard(func() { err = st.Check(name) }); p != nil {
		return fmt.Errorf("%T.Check panicked: %v", st, p.value)
	}
	return err
}

// guardStore runs f, a call of store st, and turns a panic into an error:
// a store's bug makes its breakers fall back, and never reaches a caller
// or the manager's goroutines.
func (m *Manager) guardStore(st store.Store, f func() error) error {
	var err error
	if p := guard(func() { err = f() }); p != nil {
		return fmt.Errorf("fusebox: store %T panicked: %v", st, p.value)
	}
	return err
}

func (m *Manager) sendStore(msg storeMsg) {
	select {
	case m.storec <- msg:
	case <-m.stopCtx.Done():
	}
}

// flushSuccesses reports the successes of a window policy counted since the
// last report.
func (b *Breaker) flushSuccesses(ctx context.Context) {
	sh := b.sharing
	succ := sh.pending.take(sh.policy.Bucket(b.mgr.clk.Now()))
	if succ == nil {
		return
	}
	if v, err := sh.hub.st.RecordSuccess(ctx, b.Name(), sh.policy, succ); err == nil {
		sh.counted(v)
	}
}

// counted keeps the window's counts of a store's verdict.
func (sh *sharing) counted(v store.Verdict) {
	sh.calls.Store(v.Calls)
	sh.failures.Store(v.Failures)
}

// mayTrip reports whether, by the store's last counts and the successes
// pending here, a success in bucket idx might bring the shared window to
// its threshold. A window with no failure in it cannot trip, so healthy
// calls never ask.
func (sh *sharing) mayTrip(idx int64) bool {
	f := sh.failures.Load()
	if f == 0 {
		return false
	}
	return sh.policy.Trips(store.Verdict{Calls: sh.calls.Load() + sh.pending.total(idx), Failures: f})
}

func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// storeCtx returns a context for a store call made on a caller's goroutine.
func (m *Manager) storeCtx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, m.storeTimeout)
}

// --- the caller's side ---

// releaseShared is Release in the closed state for a shared breaker.
func (b *Breaker) releaseShared(c breaker.Counter, t machine.Ticket, o classify.Outcome, err error) {
	sh := b.sharing
	switch {
	case !sh.down.Load():
		b.recordShared(c, t, o, err)
	case sh.fallback == store.FallbackLocal:
		b.recordLocal(c, t, o, err)
	}
}

// recordShared is Release in the closed state for a shared breaker whose
// store is reachable. The breaker's own counter counts every outcome too:
// it is what a success checks first (with the store's last counts) before
// asking the store whether it reached the threshold, and what the fallback
// trips on when the store call fails.
func (b *Breaker) recordShared(c breaker.Counter, t machine.Ticket, o classify.Outcome, cause error) {
	sh := b.sharing
	var now time.Time
	if b.mach.UsesClock() {
		now = b.mgr.clk.Now()
	}
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
		ctx, cancel := b.mgr.storeCtx(context.Background())
		err = b.mgr.guardStore(sh.st, func() (err error) { v, err = sh.st.RecordFailure(ctx, b.Name(), sh.policy, succ); return err })
		cancel()
		if err == nil {
			sh.dirty.Store(true)
		}
	case o != classify.Success:
		return
	case sh.pending != nil:
		// The threshold is checked after every outcome: a success that
		// may bring the window to it, by this process's count or by the
		// store's last counts, is reported at once.
		idx := sh.policy.Bucket(now)
		sh.pending.add(idx)
		if !localTrip && !sh.mayTrip(idx) {
			return
		}
		at = b.mgr.clk.Now()
		ctx, cancel := b.mgr.storeCtx(context.Background())
		err = b.mgr.guardStore(sh.st, func() (err error) {
			v, err = sh.st.RecordSuccess(ctx, b.Name(), sh.policy, sh.pending.take(idx))
			return err
		})
		cancel()
	default:
		if !sh.dirty.Load() || !sh.dirty.CompareAndSwap(true, false) {
			return
		}
		ctx, cancel := b.mgr.storeCtx(context.Background())
		err = b.mgr.guardStore(sh.st, func() (err error) { _, err = sh.st.RecordSuccess(ctx, b.Name(), sh.policy, nil); return err })
		cancel()
		if err != nil {
			sh.dirty.Store(true)
			b.storeFailed(err)
		}
		return
	}
	if err != nil {
		b.storeFailed(err)
		if sh.fallback == store.FallbackLocal && localTrip {
			b.trip(t.Gen, o, cause)
		}
		return
	}
	if sh.pending != nil {
		sh.counted(v)
	}
	switch {
	case v.Opened():
		// The fleet is open already: follow it.
		b.followStore(v.Status, at, false)
	case sh.policy.Trips(v):
		// The trip belongs to the closed epoch the store counted in.
		sh.raiseEpoch(v.Epoch)
		b.trip(t.Gen, o, cause)
	}
}

// recordLocal is Release in the closed state on the breaker's own counter.
func (b *Breaker) recordLocal(c breaker.Counter, t machine.Ticket, o classify.Outcome, cause error) {
	var now time.Time
	if b.mach.UsesClock() {
		now = b.mgr.clk.Now()
	}
	if c.Record(o, now) {
		b.trip(t.Gen, o, cause)
	}
}

// acquireShared takes the store's probe lease for the local probe t, won at
// step. It returns the permit, or declines the caller when another process
// holds the lease or the breaker is still open in the store.
func (b *Breaker) acquireShared(ctx context.Context, t machine.Ticket, step machine.Step) (Permit, error) {
	sh := b.sharing
	lease := time.Duration(sh.lease.Load())
	if lease <= 0 {
		lease = defaultLease
	}
	token, epoch := newToken(), sh.epoch.Load()
	at := b.mgr.clk.Now()
	call, cancel := b.mgr.storeCtx(ctx)
	var won bool
	var st store.Status
	err := b.mgr.guardStore(sh.st, func() (err error) { won, st, err = sh.st.AcquireProbe(call, b.Name(), token, epoch, lease); return err })
	cancel()
	switch {
	case err != nil && ctx != nil && ctx.Err() != nil:
		// The caller gave up: give the probe slot back.
		b.mgr.notifyHeld(b, step, lease)
		b.endProbe(t, classify.Ignore, nil)
		return Permit{}, ctx.Err()
	case err != nil:
		b.storeFailed(err)
		b.mgr.notifyHeld(b, step, lease)
		return b.permit(t), nil
	case won:
		sh.probe.Store(&heldLease{gen: t.Gen, token: token, epoch: epoch})
		b.mgr.notifyHeld(b, step, lease)
		return b.permit(t), nil
	}
	// Another process probes, the store's open period is not over, or the
	// fleet moved to another epoch (a close or an opening this process
	// missed): decline, and follow what the store says.
	b.mgr.notifyHeld(b, step, max(st.Probe, time.Millisecond))
	b.followStore(st, at, false)
	b.stats.Add(statDeclined)
	if s := b.mach.Snapshot(); s.Err() != nil {
		return Permit{}, s.Err()
	}
	return Permit{}, &breaker.OpenError{Name: b.Name(), State: breaker.Probing}
}

// resolveFirst applies a successful or ignored probe's verdict in the store
// before the breaker changes here, so that no call this process admits
// afterwards can count against the run of failures the verdict clears, nor
// find the lease still held. It returns the lease the manager must still
// resolve (a failure's, whose period Recover decides), the outcome to apply
// here, and what to do once it is applied. A verdict the store refuses as
// stale (its lease or its epoch is over) is applied here as Ignore, and the
// breaker then follows the store.
func (b *Breaker) resolveFirst(t machine.Ticket, o classify.Outcome) (*heldLease, classify.Outcome, func()) {
	sh := b.sharing
	l := sh.leaseOf(t.Gen)
	if l == nil || o == classify.Failure || sh.down.Load() {
		return l, o, nil
	}
	at := b.mgr.clk.Now()
	ctx, cancel := b.mgr.storeCtx(context.Background())
	var st store.Status
	var applied bool
	err := b.mgr.guardStore(sh.st, func() (err error) {
		st, applied, err = sh.st.Resolve(ctx, b.Name(), l.token, l.epoch, o, 0)
		return err
	})
	cancel()
	switch {
	case err != nil:
		b.storeFailed(err)
	case applied:
		sh.raiseEpoch(st.Epoch)
	default:
		return nil, classify.Ignore, func() { b.followStore(st, at, false) }
	}
	return nil, o, nil
}

// leaseOf returns the lease this process holds for the probe of
// generation gen, and forgets it.
func (sh *sharing) leaseOf(gen uint64) *heldLease {
	if l := sh.probe.Load(); l != nil && l.gen == gen && sh.probe.CompareAndSwap(l, nil) {
		return l
	}
	return nil
}

// raiseEpoch moves the breaker's epoch up to e, noting which status calls
// had started by then: a later one that finds the store below is no late
// answer, and means the store lost its data.
func (sh *sharing) raiseEpoch(e uint64) {
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

// resetShared closes a shared breaker in the store, for every process, as
// Reset closes it here: one store round trip on the caller's goroutine,
// bounded by the store timeout. The fleet moves to a new closed epoch, which
// ends any lease and fences every decision of the epochs before.
func (b *Breaker) resetShared() {
	sh := b.sharing
	if sh.down.Load() {
		return
	}
	ctx, cancel := b.mgr.storeCtx(context.Background())
	var st store.Status
	err := b.mgr.guardStore(sh.st, func() (err error) { st, err = sh.st.Reset(ctx, b.Name()); return err })
	cancel()
	if err != nil {
		b.storeFailed(err)
		return
	}
	sh.probe.Store(nil)
	sh.raiseEpoch(st.Epoch)
}

// forceShared forces a shared breaker open in the store, for every process,
// as ForceOpen forces it here: one store round trip on the caller's
// goroutine, bounded by the store timeout. The fleet moves to a new opened
// epoch, which ends any lease and fences the verdict of a probe in flight.
func (b *Breaker) forceShared() {
	sh := b.sharing
	if sh.down.Load() {
		return
	}
	ctx, cancel := b.mgr.storeCtx(context.Background())
	var st store.Status
	err := b.mgr.guardStore(sh.st, func() (err error) { st, err = sh.st.ForceOpen(ctx, b.Name()); return err })
	cancel()
	if err != nil {
		b.storeFailed(err)
		return
	}
	sh.probe.Store(nil)
	sh.raiseEpoch(st.Epoch)
}

// storeFailed switches the breaker's store to its fallback.
func (b *Breaker) storeFailed(err error) {
	sh := b.sharing
	sh.errors.Add(1)
	if !sh.down.Load() && sh.losing.CompareAndSwap(false, true) {
		b.mgr.sendStore(storeMsg{hub: sh.hub, b: b, kind: msgFailed, err: err})
	}
}

// --- the loop's side ---

// applyShared does, after apply, what a shared breaker's step needs of the
// store. d is the period Recover decided for the step, if any.
func (m *Manager) applyShared(b *Breaker, s machine.Step, n note, d time.Duration) {
	sh := b.sharing
	name := b.Name()
	if s.To == breaker.Open && s.Cause != breaker.CauseForceOpen {
		m.decideLease(b)
	}
	if sh.down.Load() {
		return
	}
	switch {
	case s.Transition == breaker.Transition{From: breaker.Closed, To: breaker.Open} && s.Cause == breaker.CauseTrip:
		m.openInStore(b, sh.epoch.Load(), after(s.At, d))
	case s.Transition == breaker.Transition{From: breaker.Probing, To: breaker.Open} && n.lease != nil:
		// A failed probe: the breaker is open here already, and the
		// lease keeps the fleet from probing until the new period is in
		// the store.
		l, o := n.lease, s.Outcome
		m.goStore(sh.hub, b, func(ctx context.Context) storeMsg {
			st, applied, err := sh.hub.st.Resolve(ctx, name, l.token, l.epoch, o, d)
			return storeMsg{b: b, kind: msgResolved, status: st, won: applied, err: err}
		})
	}
}

// openInStore opens the breaker in the store until until, from the closed
// epoch its trip was decided in: the fleet's open period ends when the
// opener's does, however late the call reaches the store.
func (m *Manager) openInStore(b *Breaker, epoch uint64, until time.Time) {
	h, name := b.sharing.hub, b.Name()
	m.goStore(h, b, func(ctx context.Context) storeMsg {
		st, won, err := h.st.Open(ctx, name, epoch, max(until.Sub(m.clk.Now()), 0))
		return storeMsg{b: b, kind: msgOpened, status: st, won: won, err: err}
	})
}

// decideLease asks Recover, as the breaker opens, how long its next probe
// may run: the lease a caller takes in the store when the breaker turns
// half-open.
func (m *Manager) decideLease(b *Breaker) {
	c := recover.Context{Name: b.Name(), Transition: breaker.Transition{From: breaker.HalfOpen, To: breaker.Probing}}
	d, ok := m.askRecover(b, c)
	if !ok {
		return
	}
	b.sharing.lease.Store(int64(max(d, time.Millisecond)))
}

// handleStore takes a result of the store on the loop.
func (m *Manager) handleStore(msg storeMsg) {
	h := msg.hub
	switch msg.kind {
	case msgFailed:
		if msg.b == nil {
			h.resyncing = false
		}
		m.storeDown(h, msg.b, msg.err)
	case msgStatus:
		if msg.resync {
			h.resyncing = false
		}
		if msg.err != nil {
			m.storeDown(h, msg.b, msg.err)
			return
		}
		m.storeUp(h, msg)
		for i, b := range msg.names {
			if i >= len(msg.statuses) || b.sharing.down.Load() {
				continue
			}
			st, sh := msg.statuses[i], b.sharing
			if st.Epoch < sh.epoch.Load() && msg.seq > sh.epochAt.Load() {
				// The store is below what this process knows, in an
				// answer asked for after that: the store lost its data
				// (a restart, FLUSHALL). Its numbering is the fleet's
				// from now on.
				sh.epoch.Store(st.Epoch)
			}
			b.followStore(st, msg.at, true)
		}
	case msgChange:
		b, ok := m.byName[msg.change.Name]
		if !ok || b.sharing == nil || b.sharing.hub != h || b.sharing.down.Load() {
			return
		}
		b.followStore(msg.change.Status(), msg.at, true)
	case msgOpened, msgResolved:
		b := msg.b
		b.sharing.forcing.Store(false)
		switch {
		case msg.err != nil:
			m.storeDown(h, b, msg.err)
		case b.sharing.down.Load():
		case msg.won:
			// This process's opening or verdict stands: its state is
			// the fleet's, in the new epoch.
			b.sharing.raiseEpoch(msg.status.Epoch)
		default:
			// Another process opened first, or the verdict was stale:
			// follow what stands.
			b.followStore(msg.status, msg.at, true)
		}
	}
}

// extend moves the end of the open period of generation gen to until.
func (m *Manager) extend(b *Breaker, gen uint64, until time.Time) {
	s := b.mach.Snapshot()
	if s.Gen != gen || s.State != breaker.Open {
		return
	}
	if b.mach.SetUntil(gen, until) {
		m.timers.push(deadline{at: until, b: b, gen: gen})
	}
}

// followStore moves the breaker as store.Follow, the mirror's pure rule,
// says for status st, asked for at at. On the loop it also corrects the end
// of the current state's timer; a caller leaves that to the loop's next
// resync. A halted breaker follows nothing.
func (b *Breaker) followStore(st store.Status, at time.Time, onLoop bool) {
	sh := b.sharing
	s := b.mach.Snapshot()
	if s.Halted || sh.forcing.Load() {
		return
	}
	now := b.mgr.clk.Now()
	held := sh.probe.Load()
	cur := store.Mirror{State: s.State, Epoch: sh.epoch.Load(), Until: s.Until, Forced: s.Forced, Holder: held != nil}
	next, changed := store.Follow(cur, st, at, now)
	if !changed {
		return
	}
	if next.Epoch > cur.Epoch {
		sh.raiseEpoch(next.Epoch)
		if held != nil {
			// A new epoch ends the lease this process held.
			sh.probe.CompareAndSwap(held, nil)
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

// mirror moves b to st on the loop, for the fallback, for a state that
// lasts d from from (zero: no timer). A state whose time is already over is
// not mirrored, nor is a breaker forced open: only Reset lifts that.
func (m *Manager) mirror(b *Breaker, st breaker.State, from time.Time, d time.Duration) {
	if b.mach.Snapshot().Forced {
		return
	}
	now := m.clk.Now()
	var until time.Time
	var hold time.Duration
	if d > 0 {
		until = from.Add(d)
		if hold = until.Sub(now); hold <= 0 {
			return
		}
	}
	if step, ok := b.mach.Mirror(st, until, false, now); ok {
		m.handleNote(note{b: b, step: step, hold: hold, held: true})
	}
}

// storeDown switches breaker b to its fallback when a call of its own
// failed, or, for b nil, every breaker of the hub when the hub's watch or
// resync failed: one breaker's store error (a name the store refuses, say)
// is that breaker's problem, not its store's.
func (m *Manager) storeDown(h *hub, b *Breaker, err error) {
	if b != nil {
		if m.fallBack(b) {
			m.logError("fusebox: store call failed; the breaker falls back", "breaker", b.Name(), "fallback", b.sharing.fallback.String(), "error", err)
		}
		return
	}
	list := *h.breakers.Load()
	if !h.down {
		h.down = true
		m.logError("fusebox: store unreachable; shared breakers fall back", "breakers", len(list), "error", err)
	}
	for _, b := range list {
		m.fallBack(b)
	}
}

// fallBack applies the breaker's fallback and only then sets StoreDown, so
// that no caller reads StoreDown before the fallback is in effect. It
// reports whether the breaker was not down yet.
func (m *Manager) fallBack(b *Breaker) bool {
	sh := b.sharing
	sh.losing.Store(false)
	if sh.down.Load() {
		return false
	}
	sh.downAt = sh.hub.asked.Load()
	switch sh.fallback {
	case store.FailOpen:
		m.mirror(b, breaker.Closed, time.Time{}, 0)
	case store.FailClosed:
		m.mirror(b, breaker.Open, time.Time{}, 0)
	}
	sh.down.Store(true)
	m.emitStore(b, EventStoreLost)
	return true
}

// storeUp ends the fallback of every breaker whose status msg, a status
// call started after the breaker fell back, brought; the statuses reconcile
// them.
func (m *Manager) storeUp(h *hub, msg storeMsg) {
	list := msg.names
	if h.down && msg.b == nil {
		h.down = false
		m.logInfo("fusebox: store reachable again; shared breakers follow it", "breakers", len(list))
	}
	for _, b := range list {
		sh := b.sharing
		if !sh.down.Load() || msg.seq <= sh.downAt {
			continue
		}
		sh.down.Store(false)
		// The counter counted the outage's calls; the store counts again.
		b.mach.Renew()
		m.emitStore(b, EventStoreRestored)
		s := b.mach.Snapshot()
		switch {
		case sh.fallback == store.FailClosed && s.State == breaker.Open && s.Until.IsZero():
			m.mirror(b, breaker.Closed, time.Time{}, 0)
		case s.Forced:
			// Forced open during the outage: force the fleet.
			sh.forcing.Store(true)
			name := b.Name()
			m.goStore(h, b, func(ctx context.Context) storeMsg {
				st, err := h.st.ForceOpen(ctx, name)
				return storeMsg{b: b, kind: msgOpened, status: st, won: true, err: err}
			})
		case s.State == breaker.Open && !s.Until.IsZero():
			// Opened locally during the outage: tell the fleet.
			if s.Until.After(m.clk.Now()) {
				m.openInStore(b, sh.epoch.Load(), s.Until)
			}
		}
	}
}

// emitStore publishes a change of the breaker's link to its store, an
// event of kind k (EventStoreLost or EventStoreRestored): not a transition,
// so its Transition is zero and its Gen the generation of the breaker's last
// event.
func (m *Manager) emitStore(b *Breaker, k EventKind) {
	if len(m.subs) == 0 {
		return
	}
	c := breaker.CauseStoreLost
	if k == EventStoreRestored {
		c = breaker.CauseStoreRestored
	}
	m.publish(b, Event{Kind: k, Name: b.Name(), At: m.clk.Now(), Cause: c, Gen: b.nextGen - 1})
}
