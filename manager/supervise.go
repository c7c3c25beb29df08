package manager

import "github.com/fusebox-go/fusebox/breaker"

// fault is a panic recovered from a callback the manager ran.
type fault struct {
	breaker  string
	callback string
	caught   *caught
}

// supervise restarts the manager after a fault: it calls Recover.Init again
// for every breaker and closes every breaker, keeping the registrations (a
// breaker forced open stays forced open). It reports false, after logging
// why, when this fault is the MaxRestarts-th within RestartWindow: the
// manager must stop.
func (m *Manager) supervise() bool {
	f := m.fault
	m.fault = nil
	now := m.clk.Now()
	m.log.Error("fusebox: recovered a panic in a callback",
		"breaker", f.breaker, "callback", f.callback, "panic", f.caught.value, "stack", string(f.caught.stack))

	kept := m.restarts[:0]
	for _, t := range m.restarts {
		if now.Sub(t) < m.window {
			kept = append(kept, t)
		}
	}
	m.restarts = append(kept, now)
	if len(m.restarts) >= m.maxRestarts {
		m.log.Error("fusebox: manager stopped: too many panics in callbacks",
			"panics", len(m.restarts), "within", m.window, "last_breaker", f.breaker, "last_callback", f.callback)
		return false
	}

	// Every breaker is about to be closed or stays forced open: no timer
	// survives.
	m.timers = m.timers[:0]
	for _, b := range m.list {
		st, err := m.initRecover(b)
		if err != nil {
			m.log.Error("fusebox: Recover.Init failed on restart; keeping the breaker's previous recovery state",
				"breaker", b.Name(), "error", err)
		} else {
			b.recState = st
		}
		if step, ok := b.mach.Reset(now, breaker.CauseRestart); ok {
			m.handle(b, step)
		}
	}
	m.log.Warn("fusebox: manager restarted after a panic; every breaker is closed",
		"breakers", len(m.list), "restarts_in_window", len(m.restarts), "limit", m.maxRestarts)
	return true
}
