package manager

import (
	"context"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/machine"
)

// truth is where a breaker's state is decided: in its own state machine
// (local), or in a store it shares with other processes (*shared, in
// shared.go). The call path and the loop reach it through this interface
// only, so a local breaker's way has no branch for sharing, and what only a
// shared breaker needs lives with *shared.
//
// Outcomes in the closed state, the hot path, do not go through it: they
// reach the counter of the closed period, and a shared breaker's machine
// wraps its counters (Machine.Wrap) so that they record in the store as
// they count. A local breaker's release is so exactly what it would be
// without sharing.
type truth interface {
	// acquire is Acquire in half_open, where the caller may win the
	// probe: it returns the caller's permit, or declines it.
	acquire(b *Breaker, ctx context.Context) (Permit, error)
	// endProbe ends the probe of ticket t with outcome o (err: the
	// probe's error, if any).
	endProbe(b *Breaker, t machine.Ticket, o classify.Outcome, err error)
	// tripCause is the cause of the trip of the closed generation gen.
	tripCause(gen uint64) breaker.Cause
	// manual runs before ForceOpen (force) or Reset applies here.
	manual(b *Breaker, force bool)
	// applied runs on the loop once the step of note n is applied; d is the
	// period Recover decided for it, if any.
	applied(b *Breaker, n note, d time.Duration)
	// registered runs on the loop as the breaker joins the manager;
	// removed as it leaves.
	registered(b *Breaker)
	removed(b *Breaker)
	// reconfigure checks that cfg, given to Reconfigure, keeps what the
	// breaker cannot change, and returns what to apply on the loop once
	// the rest of cfg is (nil: nothing).
	reconfigure(b *Breaker, cfg Config) (func(), error)
	// link returns st with what Stats says of the breaker's link to a
	// store filled in.
	link(st Stats) Stats
}

// local is the truth of a breaker that is not shared: its machine decides
// everything, and the manager's loop runs its timers.
type local struct{}

func (local) acquire(b *Breaker, _ context.Context) (Permit, error) {
	t, step, oerr := b.mach.Acquire(b.mgr.clk.Now())
	switch {
	case oerr != nil:
		return b.decline(oerr)
	case t.Gen == 0:
		return b.halted(b.mach.Snapshot())
	}
	if step.Gen != 0 {
		b.mgr.notify(b, step)
	}
	return b.permit(t), nil
}

func (local) endProbe(b *Breaker, t machine.Ticket, o classify.Outcome, err error) {
	step, r := b.mach.EndProbe(t, o, err, b.mgr.clk.Now())
	if r == machine.Stale {
		b.stats.Add(statStale)
		return
	}
	b.mgr.send(note{b: b, step: step})
}

func (local) tripCause(uint64) breaker.Cause        { return breaker.CauseTrip }
func (local) manual(*Breaker, bool)                 {}
func (local) applied(*Breaker, note, time.Duration) {}
func (local) registered(*Breaker)                   {}
func (local) removed(*Breaker)                      {}
func (local) link(st Stats) Stats                   { return st }

func (local) reconfigure(b *Breaker, cfg Config) (func(), error) {
	if cfg.Store != nil {
		return nil, b.unchangeable("Store", "on a registered breaker")
	}
	return nil, nil
}
