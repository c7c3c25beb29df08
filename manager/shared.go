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

	dirty    atomic.Bool  // consecutive: a failure was reported since the last success report
	pending  *pending     // window: successes not reported yet
	calls    atomic.Int64 // window: the calls in the window, as the store last counted them
	failures atomic.Int64 // window: the failures in the window, as the store last counted them
	lease    atomic.Int64 // the next probe's lease, decided by Recover when the breaker opened
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
	gen      uint64
	change   store.Change
	names    []*Breaker
	gens     []uint64 // each breaker's generation when its status was asked for
	statuses []store.Status
	left     time.Duration
	won      bool
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
	p, err := store.PolicyOf(cfg.Strategy)
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
	go func() {
		defer m.wg.Done()
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
	gens := make([]uint64, len(list))
	for i, b := range list {
		gens[i] = b.mach.Snapshot().Gen
	}
	at, seq := m.clk.Now(), h.asked.Add(1)
	st, err := h.st.Status(ctx, names)
	return storeMsg{kind: msgStatus, names: list, gens: gens, statuses: st, err: err, at: at, seq: seq}
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
	if parent == nil {
		parent = context.Background()
	}
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
	)
	switch {
	case o == classify.Failure:
		var succ []int64
		if sh.pending != nil {
			succ = sh.pending.take(sh.policy.Bucket(now))
		}
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
	case v.Open > 0:
		b.mirror(breaker.Open, v.Open)
	case sh.policy.Trips(v):
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

// mirror moves the breaker to st because the store says so, for d (zero: no
// timer), and tells the manager.
func (b *Breaker) mirror(st breaker.State, d time.Duration) {
	now := b.mgr.clk.Now()
	var until time.Time
	if d > 0 {
		until = now.Add(d)
	}
	if step, ok := b.mach.Mirror(st, until, now); ok {
		b.mgr.notifyHeld(b, step, d)
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
	token := newToken()
	call, cancel := b.mgr.storeCtx(ctx)
	won, st, err := sh.hub.st.AcquireProbe(call, b.Name(), token, lease)
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
		sh.probe.Store(&heldLease{gen: t.Gen, token: token})
		b.mgr.notifyHeld(b, step, lease)
		return b.permit(t), nil
	}
	// Another process probes, or the store's open period is not over:
	// decline, and mirror what the store says.
	if st.Open > 0 {
		b.mgr.notifyHeld(b, step, st.Open)
		b.mirror(breaker.Open, st.Open)
	} else {
		b.mgr.notifyHeld(b, step, max(st.Probe, time.Millisecond))
	}
	b.stats.Add(statDeclined)
	if s := b.mach.Snapshot(); s.Err() != nil {
		return Permit{}, s.Err()
	}
	return Permit{}, &breaker.OpenError{Name: b.Name(), State: breaker.Probing}
}

// resolveFirst applies a successful or ignored probe's verdict in the store
// before the breaker changes here, so that no call this process admits
// afterwards can count against the run of failures the verdict clears, nor
// find the lease still held. It returns the token the manager must still
// resolve (a failure's, whose period Recover decides), or "".
func (b *Breaker) resolveFirst(t machine.Ticket, o classify.Outcome) string {
	sh := b.sharing
	token := sh.leaseOf(t.Gen)
	if token == "" || o == classify.Failure || sh.down.Load() {
		return token
	}
	ctx, cancel := b.mgr.storeCtx(context.Background())
	_, err := sh.hub.st.Resolve(ctx, b.Name(), token, o, 0)
	cancel()
	if err != nil {
		b.storeFailed(err)
	}
	return ""
}

// leaseOf returns the token of the lease this process holds for the probe
// of generation gen, and forgets it.
func (sh *sharing) leaseOf(gen uint64) string {
	if l := sh.probe.Load(); l != nil && l.gen == gen && sh.probe.CompareAndSwap(l, nil) {
		return l.token
	}
	return ""
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
		gen := s.Gen
		m.goStore(sh.hub, func(ctx context.Context) storeMsg {
			left, won, err := sh.hub.st.Open(ctx, name, d)
			return storeMsg{b: b, kind: msgOpened, gen: gen, left: left, won: won, err: err}
		})
	case s.Transition == breaker.Transition{From: breaker.Probing, To: breaker.Open} && n.token != "":
		// A failed probe: the breaker is open here already, and the
		// lease keeps the fleet from probing until the new period is in
		// the store.
		token, o := n.token, s.Outcome
		m.goStore(sh.hub, func(ctx context.Context) storeMsg {
			_, err := sh.hub.st.Resolve(ctx, name, token, o, d)
			return storeMsg{b: b, kind: msgResolved, err: err}
		})
	}
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
			if i < len(msg.statuses) {
				m.reconcile(b, msg.statuses[i], msg.at, msg.gens[i])
			}
		}
	case msgChange:
		b, ok := m.byName[msg.change.Name]
		if !ok || b.sharing == nil || b.sharing.hub != h || b.sharing.down.Load() {
			return
		}
		m.follow(b, msg.change, msg.at)
	case msgOpened:
		if msg.err != nil {
			m.storeDown(h, msg.b, msg.err)
			return
		}
		if !msg.won {
			// Another process opened first: its period stands.
			m.extend(msg.b, msg.gen, msg.at.Add(msg.left))
		}
	case msgResolved:
		if msg.err != nil {
			m.storeDown(h, msg.b, msg.err)
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

// tolerance is how far a mirrored period may differ from the store's before
// the manager corrects it.
const tolerance = 25 * time.Millisecond

// reconcile brings the breaker in line with its shared status, asked for
// at at while the breaker was in generation gen. A status asked for before
// the breaker's last transition is out of date (it may predate this
// process's own verdict on a probe) and is dropped: the next one will do.
func (m *Manager) reconcile(b *Breaker, st store.Status, at time.Time, gen uint64) {
	if b.sharing.down.Load() {
		return
	}
	s := b.mach.Snapshot()
	if s.Forced || s.Halted || s.Gen != gen {
		return
	}
	switch {
	case st.Open > 0:
		if s.State == breaker.Open {
			if want := at.Add(st.Open); s.Until.Sub(want).Abs() > tolerance {
				m.extend(b, s.Gen, want)
			}
			return
		}
		m.mirror(b, breaker.Open, at, st.Open)
	case st.Probe > 0:
		if s.State == breaker.HalfOpen || s.State == breaker.Closed {
			m.mirror(b, breaker.Probing, at, st.Probe)
		}
	default:
		if s.State == breaker.Probing && b.sharing.probe.Load() == nil {
			// The other process's lease ended without a verdict.
			m.mirror(b, breaker.HalfOpen, at, 0)
		}
	}
}

// follow applies a change another process (or this one) made, heard of at
// at.
func (m *Manager) follow(b *Breaker, c store.Change, at time.Time) {
	s := b.mach.Snapshot()
	if s.Forced || s.Halted {
		return
	}
	switch c.Kind {
	case store.Opened:
		switch s.State {
		case breaker.Closed:
			m.mirror(b, breaker.Open, at, c.Open)
		case breaker.HalfOpen, breaker.Probing:
			// Past open already: this may be the late echo of the
			// opening the breaker just served. Ask the store what
			// stands now rather than trust the message's period.
			h, gen := b.sharing.hub, s.Gen
			m.goStore(h, func(ctx context.Context) storeMsg {
				at, seq := m.clk.Now(), h.asked.Add(1)
				st, err := h.st.Status(ctx, []string{b.Name()})
				return storeMsg{b: b, kind: msgStatus, names: []*Breaker{b}, gens: []uint64{gen}, statuses: st, err: err, at: at, seq: seq}
			})
		}
	case store.Closed:
		if s.State != breaker.Closed {
			m.mirror(b, breaker.Closed, at, 0)
		}
	case store.Released:
		if s.State == breaker.Probing && b.sharing.probe.Load() == nil {
			m.mirror(b, breaker.HalfOpen, at, 0)
		}
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
			left := s.Until.Sub(m.clk.Now())
			if left > 0 {
				gen, name := s.Gen, b.Name()
				m.goStore(h, func(ctx context.Context) storeMsg {
					l, won, err := h.st.Open(ctx, name, left)
					return storeMsg{b: b, kind: msgOpened, gen: gen, left: l, won: won, err: err}
				})
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
