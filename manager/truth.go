package manager

import (
	"context"

	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/machine"
)

// truth is where a breaker's state is decided: in its own state machine
// (local), or in a store it shares with other processes (*shared, in
// shared.go). The call path reaches it through this interface only, and
// each of its methods does something different for the two: a local
// breaker's way has no branch for sharing.
//
// The loop's side of a shared breaker (what the loop applied, joining and
// leaving its store's hub, what Stats says of its link) is *shared's
// alone: the loop reaches it through Breaker.fleet, which a local breaker
// does not have.
type truth interface {
	// acquire is Acquire in half_open, where the caller may win the
	// probe: it returns the caller's permit, or declines it.
	acquire(b *Breaker, ctx context.Context) (Permit, error)
	// outcome is what follows an outcome o of a call admitted in the
	// closed generation gen, once the period's counter has recorded it:
	// trips says whether it trips that count, err is the call's error
	// (nil if unknown). It is called for every outcome if the breaker
	// hearsAll, otherwise for those that trip.
	outcome(b *Breaker, gen uint64, o classify.Outcome, trips bool, err error)
	// endProbe ends the probe of ticket t with outcome o (err: the
	// probe's error, if any).
	endProbe(b *Breaker, t machine.Ticket, o classify.Outcome, err error)
	// forceOpen and reset are ForceOpen and Reset.
	forceOpen(b *Breaker)
	reset(b *Breaker)
	// halfOpen is HalfOpen (halfopen.go): nil, or why the breaker's open
	// period cannot be ended.
	halfOpen(b *Breaker) error
	// reconfigure checks that cfg, given to Reconfigure, keeps what the
	// breaker cannot change, and returns what to apply on the loop once
	// the rest of cfg is (nil: nothing).
	reconfigure(b *Breaker, cfg Config) (func(), error)
}

// local is the truth of a breaker that is not shared: its machine decides
// everything, and the manager's loop runs its timers. Its methods have
// pointer receivers, so that a call through the interface needs no
// wrapper; theLocal is the one value.
type local struct{}

var theLocal truth = &local{}

func (*local) acquire(b *Breaker, _ context.Context) (Permit, error) {
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

func (*local) outcome(b *Breaker, gen uint64, o classify.Outcome, trips bool, err error) {
	if trips {
		b.trip(gen, o, err)
	}
}

func (*local) endProbe(b *Breaker, t machine.Ticket, o classify.Outcome, err error) {
	step, r := b.mach.EndProbe(t, o, err, b.mgr.clk.Now())
	if r == machine.Stale {
		b.stats.Add(statStale)
		return
	}
	b.mgr.send(note{b: b, step: step})
}

func (*local) forceOpen(b *Breaker) { b.forceOpen() }
func (*local) reset(b *Breaker)     { b.reset() }
func (*local) halfOpen(b *Breaker) error {
	return b.halfOpen()
}

func (*local) reconfigure(b *Breaker, cfg Config) (func(), error) {
	if cfg.Store != nil {
		return nil, b.unchangeable("Store", "on a registered breaker")
	}
	return nil, nil
}
