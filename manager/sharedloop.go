package manager

import (
	"context"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/recover"
	"github.com/fusebox-go/fusebox/store"
)

// This file is the loop's side of a shared breaker: what a step needs of
// the store, the fallback, and following what the store says. Everything
// here runs on the manager's goroutine.

// registered joins the breaker to the hub of its store, in the state the
// store gave at Register.
func (sh *shared) registered(b *Breaker) {
	m, j := b.mgr, sh.joined
	m.attach(sh)
	if j.err != nil {
		m.storeDown(sh.hub, sh, j.err)
		return
	}
	sh.follow(j.status, j.at, true)
}

// removed takes the breaker off its hub.
func (sh *shared) removed(b *Breaker) { b.mgr.detach(sh) }

// applied does what the step of note n needs of the store. d is the period
// Recover decided for the step, if any.
func (sh *shared) applied(b *Breaker, n note, d time.Duration) {
	m, s := b.mgr, n.step
	// The next probe's lease is decided as the breaker opens, or as it
	// turns half-open without having opened here (it joined, or heard of,
	// an opening whose period is over).
	if s.To == breaker.Open && s.Cause != breaker.CauseForceOpen || s.To == breaker.HalfOpen && sh.lease.Load() == 0 {
		sh.decideLease()
	}
	if sh.down.Load() {
		return
	}
	switch s.Transition {
	case breaker.Transition{From: breaker.Closed, To: breaker.Open}:
		if s.Cause == breaker.CauseTrip {
			sh.openInStore(sh.epoch.Load(), after(s.At, d))
		}
	case breaker.Transition{From: breaker.Probing, To: breaker.Open}:
		// A failed probe: the breaker is open here already, and the
		// lease keeps the fleet from probing until the new period is in
		// the store.
		l := sh.takeFailedProbe(s.Gen)
		if l == nil {
			return
		}
		o, name := s.Outcome, b.Name()
		m.goStore(sh.hub, sh, func(ctx context.Context, at time.Time) storeResult {
			st, applied, err := sh.st.Resolve(ctx, name, l.token, l.epoch, o, d)
			return decidedMsg{sh: sh, status: st, won: applied, err: err, at: at}
		})
	}
}

// takeFailedProbe returns, and forgets, the lease of the failed probe whose
// verdict made the step of generation gen, if this process held it.
func (sh *shared) takeFailedProbe(gen uint64) *heldLease {
	if l := sh.failing.Load(); l != nil && l.gen+1 == gen && sh.failing.CompareAndSwap(l, nil) {
		return l
	}
	return nil
}

// openInStore opens the breaker in the store until until, from the closed
// epoch its trip was decided in: the fleet's open period ends when the
// opener's does, however late the call reaches the store.
func (sh *shared) openInStore(epoch uint64, until time.Time) {
	m, name := sh.b.mgr, sh.b.Name()
	m.goStore(sh.hub, sh, func(ctx context.Context, at time.Time) storeResult {
		st, won, err := sh.st.Open(ctx, name, epoch, max(until.Sub(at), 0))
		return decidedMsg{sh: sh, status: st, won: won, err: err, at: at}
	})
}

// forceInStore forces the breaker open in the store, for a breaker forced
// here while the store was unreachable; until the answer, the breaker
// follows nothing the store says.
func (sh *shared) forceInStore() {
	m, name := sh.b.mgr, sh.b.Name()
	sh.forcing.Store(true)
	m.goStore(sh.hub, sh, func(ctx context.Context, at time.Time) storeResult {
		st, err := sh.st.ForceOpen(ctx, name)
		return decidedMsg{sh: sh, status: st, won: true, err: err, at: at}
	})
}

// decideLease asks Recover, as the breaker opens, how long its next probe
// may run: the lease a caller takes in the store when the breaker turns
// half-open.
func (sh *shared) decideLease() {
	b := sh.b
	c := recover.Context{Name: b.Name(), Transition: breaker.Transition{From: breaker.HalfOpen, To: breaker.Probing}}
	d, ok := b.mgr.askRecover(b, c)
	if !ok {
		return
	}
	sh.lease.Store(int64(max(d, time.Millisecond)))
}

// decided takes the result of an opening, a verdict or a forcing the loop
// sent to the store.
func (sh *shared) decided(msg decidedMsg) {
	sh.forcing.Store(false)
	switch {
	case msg.err != nil:
		sh.b.mgr.storeDown(sh.hub, sh, msg.err)
	case sh.down.Load():
	case msg.won:
		// This process's decision stands: its state is the fleet's, in
		// the new epoch.
		sh.raiseEpoch(msg.status.Epoch)
	default:
		// Another process opened first, or the verdict was stale:
		// follow what stands.
		sh.follow(msg.status, msg.at, true)
	}
}

// heard takes a status the hub read, asked for as the seq-th status call:
// one below what this process knows, asked for after it knew, means the
// store lost its data (a restart, FLUSHALL). For a closed breaker the
// store's numbering is the fleet's from now on. An opened one keeps its
// epoch, and so its local deadlines: a probe may be in flight, and the
// emptied store is no closed breaker. Its next probe finds the store
// behind, which then holds the fleet open for one lease (AcquireProbe).
func (sh *shared) heard(st store.Status, at time.Time, seq uint64) {
	if sh.down.Load() || sh.forcing.Load() {
		return
	}
	if st.Epoch < sh.epoch.Load() && seq > sh.epochAt.Load() && sh.b.mach.Snapshot().State == breaker.Closed {
		sh.epoch.Store(st.Epoch)
	}
	sh.follow(st, at, true)
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

// mirror moves the breaker to st, for the fallback, for a state that lasts
// d from from (zero: no timer). A state whose time is already over is not
// mirrored, nor is a breaker forced open: only Reset lifts that.
func (sh *shared) mirror(st breaker.State, from time.Time, d time.Duration) {
	b := sh.b
	if b.mach.Snapshot().Forced {
		return
	}
	now := b.mgr.clk.Now()
	var until time.Time
	var hold time.Duration
	if d > 0 {
		until = from.Add(d)
		if hold = until.Sub(now); hold <= 0 {
			return
		}
	}
	if step, ok := b.mach.Mirror(st, until, false, now); ok {
		b.mgr.handleNote(note{b: b, step: step, hold: hold, held: true})
	}
}

// storeDown switches breaker sh to its fallback when a call of its own
// failed, or, for sh nil, every breaker of the hub when the hub's watch or
// resync failed: one breaker's store error (a name the store refuses, say)
// is that breaker's problem, not its store's.
func (m *Manager) storeDown(h *hub, sh *shared, err error) {
	if sh != nil {
		if sh.fallBack() {
			m.logError("fusebox: store call failed; the breaker falls back", "breaker", sh.b.Name(), "fallback", sh.fallback.String(), "error", err)
		}
		return
	}
	list := *h.breakers.Load()
	if !h.down {
		h.down = true
		m.logError("fusebox: store unreachable; shared breakers fall back", "breakers", len(list), "error", err)
	}
	for _, sh := range list {
		sh.fallBack()
	}
}

// fallBack applies the breaker's fallback and only then sets StoreDown, so
// that no caller reads StoreDown before the fallback is in effect. It
// reports whether the breaker was not down yet.
func (sh *shared) fallBack() bool {
	sh.losing.Store(false)
	if sh.down.Load() {
		return false
	}
	sh.downAt = sh.hub.asked.Load()
	switch sh.fallback {
	case store.FailOpen:
		sh.mirror(breaker.Closed, time.Time{}, 0)
	case store.FailClosed:
		sh.mirror(breaker.Open, time.Time{}, 0)
	}
	sh.down.Store(true)
	sh.b.mgr.emitStore(sh.b, EventStoreLost)
	return true
}

// restored ends the fallback of the breaker, once a status call started
// after it fell back (the seq-th) answered, and tells the fleet what it
// decided meanwhile.
func (sh *shared) restored(seq uint64) {
	if !sh.down.Load() || seq <= sh.downAt {
		return
	}
	b, m := sh.b, sh.b.mgr
	sh.down.Store(false)
	// The counter counted the outage's calls; the store counts again.
	b.mach.Renew()
	m.emitStore(b, EventStoreRestored)
	s := b.mach.Snapshot()
	switch {
	case sh.fallback == store.FailClosed && s.State == breaker.Open && s.Until.IsZero() && !s.Forced:
		sh.mirror(breaker.Closed, time.Time{}, 0)
	case s.Forced:
		// Forced open during the outage: force the fleet.
		sh.forceInStore()
	case s.State == breaker.Open && s.Until.After(m.clk.Now()):
		// Opened locally during the outage: tell the fleet.
		sh.openInStore(sh.epoch.Load(), s.Until)
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
