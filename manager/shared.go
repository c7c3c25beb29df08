package manager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
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
	downAt   uint64      // owned by the loop: the hub's status calls started when the fallback applied
	errors   atomic.Uint64
}

// heldLease is the probe lease this process holds.
type heldLease struct {
	gen   uint64 // the probing generation
	token string
	epoch uint64 // the store's epoch the lease belongs to
}

// hub connects a manager to one store: every shared breaker of the manager
// on that store goes through it.
type hub struct {
	st       store.Store
	breakers atomic.Pointer[[]*Breaker] // copy-on-write, written by the loop
	cancel   context.CancelFunc
	down     bool          // owned by the loop: the store is unreachable
	asked    atomic.Uint64 // status calls started, numbered from 1
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
}

type storeMsgKind uint8

const (
	msgChange   storeMsgKind = iota + 1 // a change seen by the hub's watcher
	msgStatus                           // a resync's statuses, or its error
	msgOpened                           // the result of Open for the breaker's trip
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
	if err := cfg.Store.Check(name); err != nil {
		return nil, registerError(name, "Store", err)
	}
	sh := &sharing{st: cfg.Store, policy: p, fallback: cfg.Fallback}
	if p.Window() {
		sh.pending = newPending(p)
	}
	return sh, nil
}

// attach joins b to the hub of its store, starting the hub if it is the
// first breaker on that store. It runs on the loop.
func (m *Manager) attach(b *Breaker, st store.Store) {
	h := m.hubs[st]
	if h == nil {
		ctx, cancel := context.WithCancel(context.Background())
		h = &hub{st: st, cancel: cancel}
		h.breakers.Store(&[]*Breaker{})
		m.hubs[st] = h
		m.wg.Add(2)
		// The ticker is made here, on the loop, so that a mock clock
		// advanced right after Register already drives it.
		go m.watch(ctx, h)
		go m.resync(ctx, h, m.clk.Ticker(m.resyncEvery))
	}
	list := append(append([]*Breaker(nil), *h.breakers.Load()...), b)
	h.breakers.Store(&list)
	b.sharing.hub = h
	if h.down {
		m.fallBack(b)
	}
}

// goStore runs a store call off the loop, with the store deadline, and
// hands its result to the loop.
func (m *Manager) goStore(h *hub, call func(ctx context.Context) storeMsg) {
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
		msg := call(ctx)
		msg.hub = h
		if msg.at.IsZero() {
			msg.at = at
		}
		m.sendStore(msg)
	}()
}

func (m *Manager) sendStore(msg storeMsg) {
	select {
	case m.storec <- msg:
	case <-m.stopCtx.Done():
	}
}

// watch delivers the store's changes to the loop, resubscribing after a
// failure with a pause that grows while subscribing keeps failing, and
// starts small again once a subscription worked.
func (m *Manager) watch(ctx context.Context, h *hub) {
	defer m.wg.Done()
	const firstPause = 50 * time.Millisecond
	pause := firstPause
	for {
		subscribed := false
		err := h.st.Watch(ctx, func() {
			subscribed = true
			// Subscribed: read what changed before, now that nothing
			// more can be missed.
			m.goStore(h, func(ctx context.Context) storeMsg { return m.status(ctx, h) })
		}, func(c store.Change) {
			m.sendStore(storeMsg{hub: h, kind: msgChange, change: c, at: m.clk.Now()})
		})
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("the watch ended")
		}
		if subscribed {
			pause = firstPause
		}
		m.sendStore(storeMsg{hub: h, kind: msgFailed, err: fmt.Errorf("watching the store: %w", err)})
		t := m.clk.Timer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// resync reads the shared state of every breaker of the hub periodically,
// and reports successes of window policies not reported yet.
func (m *Manager) resync(ctx context.Context, h *hub, t *clock.Ticker) {
	defer m.wg.Done()
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		call, cancel := context.WithTimeout(ctx, m.storeTimeout)
		for _, b := range *h.breakers.Load() {
			if b.sharing.policy.Window() && !b.sharing.down.Load() {
				b.flushSuccesses(call)
			}
		}
		msg := m.status(call, h)
		cancel()
		if ctx.Err() != nil {
			return
		}
		msg.hub = h
		m.sendStore(msg)
	}
}

// status reads the shared state of every breaker of the hub.
func (m *Manager) status(ctx context.Context, h *hub) storeMsg {
	list := *h.breakers.Load()
	names := make([]string, len(list))
	for i, b := range list {
		names[i] = b.Name()
	}
	at, seq := m.clk.Now(), h.asked.Add(1)
	st, err := h.st.Status(ctx, names)
	return storeMsg{kind: msgStatus, names: list, statuses: st, err: err, at: at, seq: seq}
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
		v, err = sh.hub.st.RecordFailure(ctx, b.Name(), sh.policy, succ)
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
		v, err = sh.hub.st.RecordSuccess(ctx, b.Name(), sh.policy, sh.pending.take(idx))
		cancel()
	default:
		if !sh.dirty.Load() || !sh.dirty.CompareAndSwap(true, false) {
			return
		}
		ctx, cancel := b.mgr.storeCtx(context.Background())
		_, err = sh.hub.st.RecordSuccess(ctx, b.Name(), sh.policy, nil)
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
	won, st, err := sh.hub.st.AcquireProbe(call, b.Name(), token, epoch, lease)
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
	st, applied, err := sh.hub.st.Resolve(ctx, b.Name(), l.token, l.epoch, o, 0)
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
	st, err := sh.hub.st.Reset(ctx, b.Name())
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
		m.openInStore(b, sh.epoch.Load(), d)
	case s.Transition == breaker.Transition{From: breaker.Probing, To: breaker.Open} && n.lease != nil:
		// A failed probe: the breaker is open here already, and the
		// lease keeps the fleet from probing until the new period is in
		// the store.
		l, o := n.lease, s.Outcome
		m.goStore(sh.hub, func(ctx context.Context) storeMsg {
			st, applied, err := sh.hub.st.Resolve(ctx, name, l.token, l.epoch, o, d)
			return storeMsg{b: b, kind: msgResolved, status: st, won: applied, err: err}
		})
	}
}

// openInStore opens the breaker in the store, for d, from the closed epoch
// its trip was decided in.
func (m *Manager) openInStore(b *Breaker, epoch uint64, d time.Duration) {
	h, name := b.sharing.hub, b.Name()
	m.goStore(h, func(ctx context.Context) storeMsg {
		st, won, err := h.st.Open(ctx, name, epoch, d)
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
		m.storeDown(h, msg.b, msg.err)
	case msgStatus:
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
// resync. A forced or halted breaker follows nothing.
func (b *Breaker) followStore(st store.Status, at time.Time, onLoop bool) {
	sh := b.sharing
	s := b.mach.Snapshot()
	if s.Forced || s.Halted {
		return
	}
	now := b.mgr.clk.Now()
	held := sh.probe.Load()
	cur := store.Mirror{State: s.State, Epoch: sh.epoch.Load(), Until: s.Until, Holder: held != nil}
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
	if next.State == s.State {
		if onLoop && !next.Until.IsZero() && !next.Until.Equal(s.Until) {
			b.mgr.extend(b, s.Gen, next.Until)
		}
		return
	}
	step, ok := b.mach.Mirror(next.State, next.Until, now)
	if !ok {
		return
	}
	if onLoop {
		b.mgr.handleNote(note{b: b, step: step, hold: hold, held: true})
	} else {
		b.mgr.notifyHeld(b, step, hold)
	}
}

// mirror is Breaker.mirror on the loop, for a state that lasts d from
// from (zero: no timer). A state whose time is already over is not
// mirrored.
func (m *Manager) mirror(b *Breaker, st breaker.State, from time.Time, d time.Duration) {
	now := m.clk.Now()
	var until time.Time
	var hold time.Duration
	if d > 0 {
		until = from.Add(d)
		if hold = until.Sub(now); hold <= 0 {
			return
		}
	}
	if step, ok := b.mach.Mirror(st, until, now); ok {
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
		case s.State == breaker.Open && !s.Forced && !s.Until.IsZero():
			// Opened locally during the outage: tell the fleet.
			if left := s.Until.Sub(m.clk.Now()); left > 0 {
				m.openInStore(b, sh.epoch.Load(), left)
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

// stopHubs ends every hub and waits for every store goroutine.
func (m *Manager) stopHubs() {
	m.stopCancel()
	for _, h := range m.hubs {
		h.cancel()
	}
	m.wg.Wait()
}
