package manager

import (
	"time"
)

// deadline is one timer of one breaker: when it is due, the manager expires
// the breaker's generation gen. A deadline whose generation has passed is
// left in the heap and skipped when it comes due, which is cheaper than
// finding and removing it.
type deadline struct {
	at  int64 // Unix nanoseconds
	b   *Breaker
	gen uint64
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
		if s[parent].at <= s[i].at {
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
	s = s[:last]
	i := 0
	for {
		l, r, small := 2*i+1, 2*i+2, i
		if l < len(s) && s[l].at < s[small].at {
			small = l
		}
		if r < len(s) && s[r].at < s[small].at {
			small = r
		}
		if small == i {
			break
		}
		s[i], s[small] = s[small], s[i]
		i = small
	}
	*h = s
	return top
}

// runDue expires every deadline due at now.
func (m *Manager) runDue() {
	if len(m.timers) == 0 {
		return
	}
	now := m.clk.Now().UnixNano()
	for len(m.timers) > 0 && m.timers[0].at <= now {
		d := m.timers.pop()
		if step, ok := d.b.mach.Expire(d.gen, time.Unix(0, d.at)); ok {
			m.handle(d.b, step)
		}
	}
	if cap(m.timers) > 1024 && len(m.timers) < cap(m.timers)/4 {
		m.timers = append(timerHeap(nil), m.timers...)
	}
}

// arm sets the clock timer for the earliest deadline.
func (m *Manager) arm() {
	if len(m.timers) == 0 {
		if m.armed != 0 {
			m.stopTimer()
			m.armed = 0
		}
		return
	}
	next := m.timers[0].at
	if next == m.armed {
		return
	}
	d := time.Duration(next - m.clk.Now().UnixNano())
	if d < 0 {
		d = 0
	}
	if m.timer == nil {
		m.timer = m.clk.Timer(d)
	} else {
		m.stopTimer()
		m.timer.Reset(d)
	}
	m.armed = next
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
