package fleetsim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
)

// This file is the callers of each process and the service they call.

// caller is one goroutine of p calling breaker name until ctx is done.
func (w *world) caller(ctx context.Context, p *proc, name string, c uint64) {
	b := p.brk[name]
	for n := uint64(0); ; n++ {
		r := w.draws.rand(keyCaller, uint64(p.id), c, n)
		if !sleepCtx(ctx, between(r, 30*time.Millisecond, 120*time.Millisecond)) {
			return
		}
		if until, ok := w.plan.paused(p.slot, w.now()); ok {
			if !sleepCtx(ctx, until-w.now()) {
				return
			}
			continue
		}
		// A slow start admits a share of calls drawn from a source no
		// seed sets: a caller lets a ramp run without calling, so that
		// a seed replays exactly.
		if st := b.Stats(); st.State == breaker.Closed && st.Admitted < 1 {
			continue
		}
		before := w.acquires(p, name)
		permit, err := b.Acquire(ctx)
		if err != nil {
			continue
		}
		var l *lease
		if permit.Probe() {
			l = p.h.leaseOf(name, before)
		}
		permit.Release(w.serve(p, name, permit.Probe(), l, r))
	}
}

// acquires returns how many AcquireProbe calls of breaker name p's
// handle has made.
func (w *world) acquires(p *proc, name string) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return p.h.acquires[name]
}

// errService is what the service answers while it fails.
var errService = fmt.Errorf("fleetsim: service unavailable")

// serve is the service answering a call of p through breaker name: it
// fails while the plan's service is down, or p's replica is bad. A probe
// under lease l (nil: a local probe) is a trial call, recorded.
func (w *world) serve(p *proc, name string, probe bool, l *lease, r *rand.Rand) error {
	d := between(r, time.Millisecond, 25*time.Millisecond)
	now := w.now()
	fails := w.plan.serviceDown(now) || w.plan.active(BadReplica, p.slot, now)
	var t *trial
	if probe {
		t = w.trialStarts(p, name, l, fails)
	}
	time.Sleep(d)
	w.mu.Lock()
	w.calls++
	if t != nil {
		w.trialEnds(t)
	}
	if probe && !fails {
		p.recoveries[name] = append(p.recoveries[name], w.now())
	}
	w.mu.Unlock()
	if e, ok := w.plan.spanOf(CanceledProbes, p.slot, now); probe && ok && r.Float64() < e.Rate {
		w.note("%s trial %s canceled by its caller", p.alias, name)
		return context.Canceled
	}
	if fails {
		return errService
	}
	return nil
}
