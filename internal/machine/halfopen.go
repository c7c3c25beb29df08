package machine

import (
	"time"

	"github.com/fusebox-go/fusebox/breaker"
)

// HalfOpen ends the open period of generation gen now, by hand: an open
// breaker of that generation, not forced and not halted, moves to
// half_open at now, so that its next call is the
// probe, with its verdict and slow start as after a timer. The timer of
// the open period goes stale with its generation. It reports false, and
// changes nothing, for a breaker in any other state or generation; s is
// then the snapshot it refused on, which says why (another generation,
// closed, already half-open or probing, forced open, halted).
func (m *Machine) HalfOpen(gen uint64, now time.Time) (step Step, s *Snapshot, ok bool) {
	for {
		s = m.cur.Load()
		if s.Gen != gen || s.State != breaker.Open || s.Forced || s.Halted {
			return Step{}, s, false
		}
		if step, ok := m.move(s, breaker.HalfOpen, now, 0, breaker.CauseHalfOpen, false, nil); ok {
			return step, s, true
		}
	}
}
