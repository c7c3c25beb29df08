package manager

import (
	"context"
	"fmt"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/fleet"
	"github.com/fusebox-go/fusebox/recover"
)

// This file is the loop's side of a shared breaker: it feeds the breaker's
// step what the loop learns (the steps it applies, what the hub hears, the
// answers of the store calls it makes) and carries out the actions on the
// loop. Everything here runs on the manager's goroutine.

// applied feeds the step of note n, applied, to the breaker's step: it
// may start a store call (an opening, a failed probe's verdict) or ask
// Recover for the next probe's lease. d is the period Recover decided for
// the step, if any.
func (sh *shared) applied(n note, d time.Duration) {
	s := n.step
	sh.loopStep(fleet.Applied{Transition: s.Transition, Gen: s.Gen, Cause: s.Cause, At: s.At, Period: d})
}

// onNote publishes the store link's events a caller's step decided, and
// runs the loop's effects it handed over with note n.
func (sh *shared) onNote(n note) {
	sh.publishLinks()
	sh.effects(n.effects)
}

// loopStep feeds msg to the breaker's step on the loop and carries out its
// actions.
func (sh *shared) loopStep(msg fleet.Msg) {
	a, notes := sh.step(msg, nil)
	sh.onLoop(a, notes, true)
}

// onLoop carries out a step's actions on the loop; logFall says whether a
// fallback is this breaker's own to log (a hub's failure is logged once
// for all its breakers).
func (sh *shared) onLoop(a fleet.Actions, notes []note, logFall bool) {
	m := sh.b.mgr
	for _, e := range a.Loop {
		if l, ok := e.(fleet.Lost); ok && logFall {
			sh.logFallBack(l.Err)
		}
	}
	for _, n := range notes {
		m.handleNote(n)
	}
	sh.publishLinks()
	sh.effects(a.Loop)
}

// effects carries out the loop's effects of a step, in order.
func (sh *shared) effects(list []fleet.Effect) {
	b := sh.b
	m := b.mgr
	name := b.Name()
	for _, e := range list {
		switch e := e.(type) {
		case fleet.Extend:
			m.extend(b, e.Gen, e.Until)
		case fleet.AwaitOpening:
			m.timers.push(deadline{at: e.At, b: b, gen: e.Gen, await: true})
		case fleet.AskLease:
			c := recover.Context{Name: name, Transition: breaker.Transition{From: breaker.HalfOpen, To: breaker.Probing}}
			if d, ok := m.askRecover(b, c); ok {
				sh.step(fleet.LeaseDecided{Lease: d}, nil)
			}
		case fleet.OpenCall:
			why := sh.reason()
			m.goStore(sh.hub, sh, func(ctx context.Context, at time.Time) storeResult {
				st, won, err := sh.st.Open(ctx, name, e.Epoch, max(e.Until.Sub(at), 0), why)
				return decidedMsg{sh: sh, d: fleet.Decided{Won: won, Status: st, Err: err, At: m.clk.Now()}}
			})
		case fleet.ReopenCall:
			why := sh.reason()
			m.goStore(sh.hub, sh, func(ctx context.Context, at time.Time) storeResult {
				st, applied, err := sh.st.Resolve(ctx, name, e.Lease.Token, e.Lease.Epoch, classify.Failure, e.Reopen, why)
				return decidedMsg{sh: sh, d: fleet.Decided{Won: applied, Status: st, Err: err, At: m.clk.Now()}}
			})
		case fleet.GiveBackCall:
			why := sh.reason()
			m.goStore(sh.hub, sh, func(ctx context.Context, _ time.Time) storeResult {
				st, _, err := sh.st.Resolve(ctx, name, e.Lease.Token, e.Lease.Epoch, classify.Ignore, 0, why)
				if err != nil {
					return failedMsg{h: sh.hub, sh: sh, err: err}
				}
				return heardMsg{sh: sh, h: fleet.Heard{Status: st, At: m.clk.Now()}}
			})
		case fleet.ForceCall:
			// Forced open here while the store was unreachable: force
			// the fleet; until the answer, the breaker follows nothing
			// the store says.
			m.goStore(sh.hub, sh, func(ctx context.Context, _ time.Time) storeResult {
				st, err := sh.st.ForceOpen(ctx, name)
				return decidedMsg{sh: sh, d: fleet.Decided{Won: true, Status: st, Err: err, At: m.clk.Now()}}
			})
		case fleet.Lost:
			// Its own store call failed while its hub's link holds: a
			// read of it says when the store answers it again.
			if h := sh.hub; h != nil && !h.link.Down {
				h.queue([]*shared{sh})
			}
		case fleet.Restored:
		case fleet.QuorumShort:
			m.quorumShort(b, e)
		}
	}
}

// awaited ends shared breaker b's wait for another process's opening
// after its trip of generation gen (fleet.AwaitOpening).
func (m *Manager) awaited(b *Breaker, gen uint64) {
	if sh := b.fleet(); sh != nil && !b.removed {
		sh.loopStep(fleet.Awaited{Gen: gen})
	}
}

// extend moves the end of the open period of generation gen, or of its
// probing for another process's lease, to until.
func (m *Manager) extend(b *Breaker, gen uint64, until time.Time) {
	s := b.mach.Snapshot()
	if s.Gen != gen || s.State != breaker.Open && s.State != breaker.Probing {
		return
	}
	if b.mach.SetUntil(gen, until) {
		m.timers.push(deadline{at: until, b: b, gen: gen})
	}
}

// storeDown puts every breaker of hub h on its fallback when the hub's
// watch or a status read failed: the store is unreachable. One breaker's
// own store error (a name the store refuses, say) is that breaker's
// problem, not its store's: it goes through its own step.
func (m *Manager) storeDown(h *hub, err error) {
	var lost bool
	if h.link, lost = h.link.Fail(err, h.asked.Load()); lost {
		m.logError("fusebox: store unreachable; shared breakers fall back", "breakers", len(h.list), "names", h.breakerNames(), "store", fmt.Sprintf("%T", h.st), "error", err)
	}
	h.unqueue() // every breaker is read once the store answers again
	for _, sh := range h.list {
		sh.errors.Add(1)
		a, notes := sh.step(fleet.Failed{Err: err}, nil)
		sh.onLoop(a, notes, false)
	}
}

// emitStore publishes a change of the breaker's link to its store, an
// event of kind k (EventStoreLost or EventStoreRestored): not a transition,
// so its Transition is zero and its Gen the generation of the breaker's last
// event.
func (m *Manager) emitStore(b *Breaker, k EventKind) {
	if len(m.subs) == 0 || b.removed {
		return
	}
	m.publish(b, Event{Kind: k, Name: b.Name(), At: m.clk.Now(), Gen: b.lastGen()})
}

// lastGen is the generation of the breaker's last transition the manager
// published: the one it is applying, or else the one before the next.
func (b *Breaker) lastGen() uint64 {
	if b.applying {
		return b.nextGen
	}
	return b.nextGen - 1
}
