package machine

import "time"

// counted is a breaker.Counter that can say how many failures it holds in
// a row (breaker.Consecutive's).
type counted interface{ Count() int64 }

// Quiet reports whether the breaker, as of now, is closed at full rate
// with nothing counted against it: not open, half open or probing, not in
// a slow start, not held, not halted, and its closed period's counter
// holds no failure. Forgetting a quiet breaker loses nothing a fresh one
// would not know. A counter that cannot say what it holds (neither a run
// of failures, as breaker.Consecutive's, nor a window, see Windowed) is
// taken to hold failures: such a breaker is never quiet.
func (m *Machine) Quiet(now time.Time) bool {
	s := m.cur.Load()
	if !s.admit || s.held || s.Forced {
		return false
	}
	switch c := s.counter.(type) {
	case counted:
		return c.Count() == 0
	case Windowed:
		_, failures := c.Window(now)
		return failures == 0
	}
	return false
}
