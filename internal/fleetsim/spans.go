package fleetsim

import (
	"math/rand/v2"
	"slices"
	"time"
)

// This file is what a plan says holds at an instant: which spans are
// active for a process, and which fault a call or a delivery draws.

// replyFault returns the fault the plan draws for a reply to slot at now
// (zero: none).
func (p *Plan) replyFault(slot int, now time.Duration, r *rand.Rand) Kind {
	for _, k := range []Kind{LateReplies, LostReplies, SlowReplies} {
		if e, ok := p.spanOf(k, slot, now); ok && r.Float64() < e.Rate {
			return k
		}
	}
	return 0
}

// changeFault returns the fault the plan draws for a change delivered to
// slot at now (zero: none).
func (p *Plan) changeFault(slot int, now time.Duration, r *rand.Rand) Kind {
	for _, k := range []Kind{LostChanges, LateChanges, DupChanges} {
		if e, ok := p.spanOf(k, slot, now); ok && r.Float64() < e.Rate {
			return k
		}
	}
	return 0
}

// spanOf returns the span of kind k active for slot at now.
func (p *Plan) spanOf(k Kind, slot int, now time.Duration) (Event, bool) {
	for _, e := range p.Events {
		if e.Kind == k && e.At <= now && now < e.End && slices.Contains(e.Procs, slot) {
			return e, true
		}
	}
	return Event{}, false
}

// active reports whether a span of kind k holds slot at now.
func (p *Plan) active(k Kind, slot int, now time.Duration) bool {
	_, ok := p.spanOf(k, slot, now)
	return ok
}

// paused returns the end of the pause that holds slot at now, if one
// does.
func (p *Plan) paused(slot int, now time.Duration) (time.Duration, bool) {
	e, ok := p.spanOf(Pause, slot, now)
	return e.End, ok
}

// serviceDown reports whether the service fails every call at now.
func (p *Plan) serviceDown(now time.Duration) bool {
	for _, e := range p.Events {
		if e.Kind == ServiceDown && e.At <= now && now < e.End {
			return true
		}
	}
	return false
}

// calmSince returns since when the service has been healthy for every
// replica and no fault has been active or settling; false if that is not
// so now.
func (p *Plan) calmSince(now time.Duration) (time.Duration, bool) {
	var calm time.Duration
	for _, e := range p.Events {
		if e.At > now {
			continue
		}
		end := e.At
		if e.Kind.span() {
			end = e.End
		}
		if e.Kind.fault() {
			end += settle
		}
		if end > now {
			return 0, false
		}
		calm = max(calm, end)
	}
	return calm, true
}
