package manager

import (
	"runtime"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/machine"
)

// defaultWatchdog is the Options.Watchdog of the zero Options.
const defaultWatchdog = time.Second

// fault is a panic recovered from a callback the manager ran.
type fault struct {
	b        *Breaker
	callback string
	caught   *caught
}

// addFault records a panic of b's callback; the loop restarts before it
// answers anything more.
func (m *Manager) addFault(b *Breaker, callback string, p *caught) {
	m.faults = append(m.faults, fault{b: b, callback: callback, caught: p})
}

// faulted reports whether b's timers and store updates wait for the
// restart: every breaker's by default, since the restart closes them all;
// only a breaker whose callback panicked, with Options.RestartOne.
func (m *Manager) faulted(b *Breaker) bool {
	if len(m.faults) == 0 {
		return false
	}
	if !m.restartOne {
		return true
	}
	for _, f := range m.faults {
		if f.b == b {
			return true
		}
	}
	return false
}

// supervise restarts after the faults recorded since the last restart: it
// calls Recover.Init again and closes the breaker, keeping its registration
// (a breaker forced open stays forced open), for every breaker by default
// and for each breaker whose callback panicked with Options.RestartOne.
// Each restart counts towards the limit; it reports false, after logging
// why, when the MaxRestarts-th restart within RestartWindow is reached: the
// manager must halt.
func (m *Manager) supervise() bool {
	faults := m.faults
	m.faults = nil
	now := m.clk.Now()
	for _, f := range faults {
		m.logError("fusebox: recovered a panic in a callback",
			"breaker", f.b.Name(), "callback", f.callback, "panic", f.caught.value, "stack", string(f.caught.stack))
	}

	restarts := 1
	var restart []*Breaker
	if m.restartOne {
		seen := make(map[*Breaker]bool, len(faults))
		for _, f := range faults {
			if !seen[f.b] {
				seen[f.b] = true
				restart = append(restart, f.b)
			}
		}
		restarts = len(restart)
	}
	kept := m.restarts[:0]
	for _, t := range m.restarts {
		if now.Sub(t) < m.window {
			kept = append(kept, t)
		}
	}
	m.restarts = kept
	for range restarts {
		m.restarts = append(m.restarts, now)
	}
	last := faults[len(faults)-1]
	if len(m.restarts) >= m.maxRestarts {
		m.logError("fusebox: manager stopped: too many panics in callbacks",
			"panics", len(m.restarts), "within", m.window, "last_breaker", last.b.Name(), "last_callback", last.callback,
			"calls", m.haltedCalls())
		return false
	}

	if !m.restartOne {
		// Every breaker is about to be closed or stays forced open: no
		// timer survives.
		m.timers = m.timers[:0]
		restart = m.all()
	}
	for _, b := range restart {
		m.restartBreaker(b, now)
	}
	if !m.restartOne {
		m.logWarn("fusebox: manager restarted after a panic; every breaker is closed",
			"breakers", len(restart), "restarts_in_window", len(m.restarts), "limit", m.maxRestarts)
	} else {
		for _, b := range restart {
			m.logWarn("fusebox: breaker restarted after a panic in its callback; it is closed, the others are as they were",
				"breaker", b.Name(), "restarts_in_window", len(m.restarts), "limit", m.maxRestarts)
		}
	}
	return true
}

// restartBreaker calls b's Recover.Init again and closes b. A deadline b
// had left in the heap is of an older generation and is skipped.
func (m *Manager) restartBreaker(b *Breaker, now time.Time) {
	st, err := m.initRecover(b)
	if err != nil {
		m.logError("fusebox: Recover.Init failed on restart; keeping the breaker's previous recovery state",
			"breaker", b.Name(), "error", err)
	} else {
		b.recState = st
	}
	if step, ok := b.mach.Reset(now, breaker.CauseRestart); ok {
		m.handle(b, step)
	}
}

// haltedCalls says what a call gets once the manager has halted.
func (m *Manager) haltedCalls() string {
	if m.failOpen {
		return "let through unprotected (Options.FailOpen)"
	}
	return "declined with ErrStopped"
}

// halt stops the manager for good after too many restarts: every breaker
// reports breaker.Halted, an EventHalted is published for each, and calls
// get ErrStopped, or go through unprotected with Options.FailOpen. The loop
// then shuts down as Stop makes it.
func (m *Manager) halt() {
	m.crashed.Store(true)
	if m.failOpen {
		m.failingOpen.Store(true)
	}
	now := m.clk.Now()
	for _, b := range m.all() {
		b.mach.Halt()
		if len(m.subs) > 0 {
			m.publish(b, Event{Kind: EventHalted, Name: b.Name(), At: now, Gen: b.mach.Snapshot().Gen})
		}
	}
}

// reported is the state a breaker whose snapshot is s reports:
// breaker.Halted once the manager has halted after too many restarts, the
// snapshot's state otherwise (a removed breaker keeps the state it was
// removed in).
func (m *Manager) reported(s *machine.Snapshot) breaker.State {
	if s.Halted && !s.Removed && m.crashed.Load() {
		return breaker.Halted
	}
	return s.State
}

// callbackRun is a callback the loop is running, as the watchdog sees it.
type callbackRun struct {
	b        *Breaker
	callback string
	since    time.Time
}

// abandoned marks the loop as given up on by Stop while it ran a callback.
var abandoned = new(callbackRun)

// callback runs f, the callback named callback of breaker b, on the loop,
// and returns its panic, if any. The watchdog watches it meanwhile. If Stop
// gave up on the loop while f ran (f blocked), the loop's goroutine ends
// here, touching nothing: Stop has shut the manager down in its place.
func (m *Manager) callback(b *Breaker, callback string, f func()) *caught {
	r := &callbackRun{b: b, callback: callback, since: time.Now()}
	m.running.Store(r)
	select {
	case m.wake <- struct{}{}:
	default:
	}
	p := guard(f)
	if !m.running.CompareAndSwap(r, nil) {
		runtime.Goexit()
	}
	return p
}

// watchdog runs beside the loop. It logs a callback that has run for longer
// than Options.Watchdog, naming the breaker and the callback, and again
// each time that time has doubled. Once Stop has been called, it gives up
// on a loop stuck in such a callback and shuts the manager down itself, so
// that Stop returns.
//
// It measures real time, whatever Options.Clock is: a callback blocks in
// real time, and timers the watchdog made on a mock clock would fire, as a
// mock's timers do when made, other timers of the mock from its goroutine,
// behind the back of a test stepping the mock.
func (m *Manager) watchdog() {
	for {
		select {
		case <-m.done:
			return
		case <-m.wake:
		}
		for r := m.running.Load(); r != nil && r != abandoned; r = m.running.Load() {
			if !m.watchRun(r) {
				return
			}
		}
	}
}

// watchRun waits while r runs. It reports false if the manager is done.
func (m *Manager) watchRun(r *callbackRun) bool {
	limit := m.watchdogAfter
	var wake <-chan struct{} // quit, once r is stuck: Stop then gives up on it at once
	for {
		if !m.sleepUntil(machine.After(r.since, limit), wake) {
			return false
		}
		if m.running.Load() != r {
			return true
		}
		// r has run for limit at least, or Stop was called while r is
		// stuck.
		if m.stopping() {
			m.abandon(r)
			return false
		}
		m.logError("fusebox: a callback has run for longer than Options.Watchdog and holds up every breaker's timers; "+
			"calling the manager (Sync, Register, Stop, ...) from a callback is the usual cause",
			"breaker", r.b.Name(), "callback", r.callback, "running_for", time.Since(r.since), "watchdog", m.watchdogAfter)
		limit = saturatingDouble(limit)
		wake = m.quit
	}
}

// sleepUntil waits until t, or until wake is closed. It reports false if
// the manager is done.
func (m *Manager) sleepUntil(t time.Time, wake <-chan struct{}) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-wake:
		return true
	case <-m.done:
		return false
	}
}

func (m *Manager) stopping() bool {
	select {
	case <-m.quit:
		return true
	default:
		return false
	}
}

// abandon shuts the manager down in the place of its loop, which is stuck
// in callback r, unless r has returned meanwhile. Whichever of the two
// swaps m.running first owns the manager's state from then on: the loop,
// if r returned, which then sees quit and shuts down; or abandon, and the
// loop's goroutine ends without touching anything when r returns.
func (m *Manager) abandon(r *callbackRun) {
	if !m.running.CompareAndSwap(r, abandoned) {
		return
	}
	m.logError("fusebox: Stop gave up waiting for a callback that has run for longer than Options.Watchdog; "+
		"the manager is stopped, and its goroutine ends when the callback returns",
		"breaker", r.b.Name(), "callback", r.callback, "running_for", time.Since(r.since))
	m.shutdown()
	m.closeDone()
}

func saturatingDouble(d time.Duration) time.Duration {
	if d > 1<<62 {
		return 1<<63 - 1
	}
	return 2 * d
}

// logError and logWarn log through the user's Logger under a guard: a
// Handler that panics must not take the manager's goroutine down with it.
func (m *Manager) logError(msg string, args ...any) {
	guard(func() { m.log.Error(msg, args...) })
}

func (m *Manager) logWarn(msg string, args ...any) {
	guard(func() { m.log.Warn(msg, args...) })
}

func (m *Manager) logInfo(msg string, args ...any) {
	guard(func() { m.log.Info(msg, args...) })
}

func (m *Manager) logDebug(msg string, args ...any) {
	guard(func() { m.log.Debug(msg, args...) })
}
