package manager

import (
	"time"
)

// deadline is one timer of one breaker: when it is due, the manager expires
// the breaker's generation gen. A deadline whose generation has passed is
// left in the heap and skipped when it comes due, which is cheaper than
// finding and removing it.
//
// at is a time.Time rather than Unix nanoseconds: those end in 2262, and a
// clock past that (a mock clock moved far ahead) would turn every deadline
// into nonsense. time.Time covers its whole range, and its Add and Sub
// saturate instead of wrapping around.
type deadline struct {
	at  time.Time
	b   *Breaker
	gen uint64
	// slow marks a tick of the slow start of generation gen (see
	// machine.SlowStartTick) rather than the end of its state's timer;
	// await the end of a shared breaker's wait for another process's
	// opening after its trip of generation gen (fleet.AwaitOpening).
	slow, await bool
}

// timerHeap is a binary min-heap of deadlines by time. One heap and one clock
// timer serve every breaker of a manager.
type timerHeap []deadline

func (h *timerHeap) push(d deadline) {
	*h = append(*h, d)
	s := *h
	i := len(s) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !s[i].at.Before(s[parent].at) {
			break
		}
		s[parent], s[i] = s[i], s[parent]
		i = parent
	}
}

func (h *timerHeap) pop() deadline {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s[last] = deadline{}
	*h = s[:last]
	h.down(0)
	return top
}

// down moves the deadline at i down to its place.
func (h timerHeap) down(i int) {
	for {
		l, r, small := 2*i+1, 2*i+2, i
		if l < len(h) && h[l].at.Before(h[small].at) {
			small = l
		}
		if r < len(h) && h[r].at.Before(h[small].at) {
			small = r
		}
		if small == i {
			return
		}
		h[i], h[small] = h[small], h[i]
		i = small
	}
}

// runDue expires every deadline due at now, and starts what the hubs of
// shared breakers have due.
func (m *Manager) runDue() {
	m.storesDue()
	if len(m.timers) == 0 {
		return
	}
	now := m.clk.Now()
	for len(m.timers) > 0 && !m.timers[0].at.After(now) {
		d := m.timers.pop()
		if d.b.removed {
			continue // stale: Remove leaves its deadlines in the heap
		}
		if d.slow {
			m.slowStartTick(d.b, d.gen, d.at)
			continue
		}
		if d.await {
			m.awaited(d.b, d.gen)
			continue
		}
		if step, ok := d.b.mach.Expire(d.gen, d.at); ok {
			m.handle(d.b, step)
		}
	}
	if cap(m.timers) > 1024 && len(m.timers) < cap(m.timers)/4 {
		m.timers = append(timerHeap(nil), m.timers...)
	}
}

// slowStartTick works out again the share admitted by b's slow start of
// generation gen at its tick at, and arms its next tick while it runs.
// The share is that of the tick's instant, not of the clock's when the
// manager got to it: the same whatever steps the clock took (a mock clock
// moved by a second at once runs every tick on the way).
func (m *Manager) slowStartTick(b *Breaker, gen uint64, at time.Time) {
	if next, ok := b.mach.SlowStartTick(gen, at); ok {
		m.timers.push(deadline{at: next, b: b, gen: gen, slow: true})
	}
}

// slowStartTicks arms the next tick of b's slow start of generation gen,
// if one runs: after a closing that started it, a new generation that
// goes on with it, or a new length.
func (m *Manager) slowStartTicks(b *Breaker, gen uint64, now time.Time) {
	if next, ok := b.mach.SlowStartNext(gen, now); ok {
		m.timers.push(deadline{at: next, b: b, gen: gen, slow: true})
	}
}

// arm sets the clock timer for the earliest deadline, the hubs' included.
func (m *Manager) arm() {
	var next time.Time
	stores, ok := m.storesNext()
	switch {
	case len(m.timers) > 0 && ok:
		next = m.timers[0].at
		if stores.Before(next) {
			next = stores
		}
	case len(m.timers) > 0:
		next = m.timers[0].at
	case ok:
		next = stores
	default:
		if m.armed {
			m.stopTimer()
			m.armed = false
		}
		return
	}
	if m.armed && next.Equal(m.armedAt) {
		return
	}
	// Sub saturates: a deadline centuries away arms the timer for the
	// longest duration there is, and the timer, when it fires early, is
	// armed again for what is left. It never wraps to zero, which would
	// fire the timer at once, forever.
	d := next.Sub(m.clk.Now())
	if d < 0 {
		d = 0
	}
	if m.timer == nil {
		m.timer = m.clk.Timer(d)
	} else {
		m.stopTimer()
		m.timer.Reset(d)
	}
	m.armed, m.armedAt = true, next
}

// stopTimer stops the timer and empties its channel, so that a later Reset
// starts clean (a mock clock's timer blocks on a full channel).
func (m *Manager) stopTimer() {
	if m.timer != nil && !m.timer.Stop() {
		select {
		case <-m.timer.C:
		default:
		}
	}
}

// dropRemoved removes every deadline of a removed breaker and restores the
// heap order.
func (h *timerHeap) dropRemoved() {
	s := *h
	kept := s[:0]
	for _, d := range s {
		if !d.b.removed {
			kept = append(kept, d)
		}
	}
	clear(s[len(kept):])
	*h = kept
	for i := len(kept)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}
