package manager

import (
	"fmt"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/fleet"
	"github.com/fusebox-go/fusebox/internal/machine"
	"github.com/fusebox-go/fusebox/recover"
)

// run is the manager's goroutine: one select over a channel per request
// kind. After every wake-up, whatever woke it, it handles every transition
// waiting in the notes channel and every deadline that is due, so that
// correctness never depends on which case the select picked.
func (m *Manager) run() {
	defer m.closeDone()
	for {
		var tick <-chan time.Time
		if m.armed {
			tick = m.timer.C
		}
		var synced chan struct{}
		if m.control() {
			// A request waited: it went first, and the loop looks again.
			if !m.endTurn() {
				return
			}
			continue
		}
		select {
		case <-m.quit:
			m.shutdown()
			return
		case n := <-m.notes:
			m.handleNote(n)
		case msg := <-m.storeResults():
			msg.handle(m)
		case req := <-m.registerc:
			m.serve(req)
		case synced = <-m.syncc:
		case req := <-m.subscribec:
			m.serve(req)
		case req := <-m.removec:
			m.serve(req)
		case req := <-m.reconfigurec:
			m.serve(req)
		case <-tick:
			m.armed = false
		}
		if !m.endTurn() {
			return
		}
		if synced != nil {
			close(synced)
		}
	}
}

// endTurn ends a turn of the loop, whatever began it: every transition and
// store result already waiting, every deadline due, the restarts a
// callback's panic asks for, and the timer armed again. It reports false
// if the manager halted for good and has shut down.
func (m *Manager) endTurn() bool {
	m.drainNotes()
	m.drainStore()
	m.runDue()
	if len(m.faults) > 0 && !m.supervise() {
		m.halt()
		m.shutdown()
		return false
	}
	m.arm()
	return true
}

// control handles one request of a caller (a subscription, a removal,
// a registration, a reconfiguration) that is already waiting, if there is
// one, and reports whether it did. The loop asks before it waits on every
// channel at once: a flood of transitions and store changes, which the
// select would pick as often as a request, cannot keep a caller waiting
// for more than one round of the loop.
func (m *Manager) control() bool {
	select {
	case req := <-m.subscribec:
		m.serve(req)
	case req := <-m.removec:
		m.serve(req)
	case req := <-m.registerc:
		m.serve(req)
	case req := <-m.reconfigurec:
		m.serve(req)
	default:
		return false
	}
	return true
}

// serve handles a caller's request after the transitions already waiting,
// whichever way the loop took the request: a caller's own transition (a
// trip in Release, sent before it returned) goes before its later request,
// such as a Remove, which would otherwise drop the transition unpublished.
func (m *Manager) serve(req any) {
	m.drainNotes()
	switch r := req.(type) {
	case registerReq:
		m.register(r)
	case subscribeReq:
		m.subscribe(r)
	case removeReq:
		m.remove(r)
	case reconfigureReq:
		m.reconfigure(r)
	}
}

// drainNotes handles the transitions already waiting, and no more: callers
// that keep tripping breakers cannot hold the loop here.
func (m *Manager) drainNotes() {
	for i := len(m.notes); i > 0; i-- {
		m.handleNote(<-m.notes)
	}
}

// handle is handleNote for a step with no more to it.
func (m *Manager) handle(b *Breaker, s machine.Step) { m.handleNote(note{b: b, step: s}) }

// handleNote takes a breaker's steps in generation order. A caller may be
// overtaken between its compare-and-swap and its send, so a step can arrive
// before the one it follows; it waits in m.early until then. Such steps are
// rare, so they wait in the manager's map rather than in a field every
// breaker would pay for.
func (m *Manager) handleNote(n note) {
	b := n.b
	if b.removed {
		return
	}
	if n.step.Gen == 0 && n.kind == EventRemoved {
		m.removed(b, n.step.At) // a Remove on a caller's goroutine
		return
	}
	if n.step.Gen == 0 {
		n.sh.onNote(n)
		return
	}
	if n.step.Gen != b.nextGen {
		if n.step.Gen > b.nextGen {
			if m.early == nil {
				m.early = make(map[*Breaker][]note)
			}
			m.early[b] = append(m.early[b], n)
		}
		return
	}
	m.applyNext(n)
	if len(m.early) == 0 {
		return
	}
	early := m.early[b]
	for len(early) > 0 {
		i := 0
		for i < len(early) && early[i].step.Gen != b.nextGen {
			i++
		}
		if i == len(early) {
			break
		}
		n := early[i]
		early = append(early[:i], early[i+1:]...)
		m.applyNext(n)
	}
	if len(early) == 0 {
		delete(m.early, b)
	} else {
		m.early[b] = early
	}
}

// applyNext applies n, the step of generation b.nextGen, and moves on to
// the next.
func (m *Manager) applyNext(n note) {
	b := n.b
	b.applying = true
	m.apply(n)
	b.applying = false
	b.nextGen++
	b.last = n.step.To
}

// apply publishes the step to subscribers and, for a step that starts a
// timer, arms it: until the end the step carries (decided elsewhere: by a
// store, or a probe's lease), or else for as long as the breaker's Recover
// decides. A shared breaker then tells its store.
func (m *Manager) apply(n note) {
	b, s := n.b, n.step
	var d time.Duration
	var until time.Time // the end of the state's timer, for the event
	switch {
	case !s.Until.IsZero():
		d, until = s.Until.Sub(s.At), s.Until
		m.timers.push(deadline{at: s.Until, b: b, gen: s.Gen})
		b.mach.SetUntil(s.Gen, s.Until)
	case s.NeedsTimer() && !m.faulted(b):
		var ok bool
		if d, ok = m.timeout(b, s); !ok {
			m.emitKind(b, s, n.kind, time.Time{})
			return
		}
		until = m.schedule(b, s, d)
	}
	if s.To == breaker.Closed {
		m.slowStartTicks(b, s.Gen, s.At)
	}
	m.emitKind(b, s, n.kind, until)
	if sh := b.fleet(); sh != nil {
		if !m.faulted(b) {
			sh.applied(n, d)
		}
		if n.sh != nil {
			sh.onNote(n)
		}
	}
}

// timeout asks the breaker's Recover how long the state entered by s lasts.
// It reports false if Recover panicked: the manager must restart.
func (m *Manager) timeout(b *Breaker, s machine.Step) (time.Duration, bool) {
	c := recover.Context{Name: b.Name(), Transition: s.Transition, Outcome: s.Outcome, At: s.At, Err: s.Err}
	d, ok := m.askRecover(b, c)
	if !ok {
		return 0, false
	}
	if d < 0 {
		m.logWarn("fusebox: Recover.Timeout returned a negative duration; using zero",
			"breaker", b.Name(), "transition", s.Transition.String(), "duration", d)
		d = 0
	}
	return d, true
}

// askRecover calls b's Recover.Timeout for c, under the supervisor and the
// watchdog, and keeps the state it returns. It reports false if Timeout
// panicked: the breaker is then restarted before the loop goes on.
func (m *Manager) askRecover(b *Breaker, c recover.Context) (time.Duration, bool) {
	var d time.Duration
	var next any
	if _, pending := b.recState.(initPending); pending {
		m.lateInit(b)
	}
	if p := m.callback(b, "Recover.Timeout", func() { d, next = b.rec.Timeout(c, b.recState) }); p != nil {
		m.addFault(b, "Recover.Timeout", p)
		return 0, false
	}
	b.recState = next
	return d, true
}

// schedule arms the timer of step s, d after it happened, and returns when
// it ends.
func (m *Manager) schedule(b *Breaker, s machine.Step, d time.Duration) time.Time {
	at := machine.After(s.At, d)
	m.timers.push(deadline{at: at, b: b, gen: s.Gen})
	b.mach.SetUntil(s.Gen, at)
	return at
}

// register is Register of a shared breaker on the loop: it joins its
// store's hub before any caller can find it. A local breaker is inserted on
// its caller's goroutine instead (see Manager.insert).
func (m *Manager) register(req registerReq) {
	b := req.b
	name := b.Name()
	m.mu.RLock()
	_, taken := m.byName[name]
	m.mu.RUnlock()
	if taken {
		req.reply <- registerFailed(name, ErrDuplicate)
		return
	}
	sh := b.fleet()
	m.attach(sh)
	// The next probe's lease, before any caller can win a probe: a
	// breaker that joins a fleet already half-open would otherwise take
	// fleet.DefaultLease, not what its Recover says.
	sh.effects([]fleet.Effect{fleet.AskLease{}})
	if err := m.insert(b); err != nil {
		// A local breaker took the name meanwhile.
		m.detach(sh)
		req.reply <- err
		return
	}
	req.reply <- nil
}

// initRecover runs the breaker's Recover.Init on the loop, under the
// watchdog, turning a panic into an error.
func (m *Manager) initRecover(b *Breaker) (st any, err error) {
	m.callback(b, "Recover.Init", func() { st, err = initPolicy(b.rec) })
	return st, err
}

// initPending is the recovery state of a breaker whose Recover.Init has
// not run yet: a Group's breaker, whose Config the group validated once,
// runs it when its first timer needs it, here on the loop.
type initPending struct{}

// lateInit runs b's Recover.Init, the first time b's Recover is asked for
// a timeout. The group's Config passed the same Init, so an error here is
// the Recover's own doing: it is logged, and Timeout gets a nil state.
func (m *Manager) lateInit(b *Breaker) {
	st, err := m.initRecover(b)
	if err != nil {
		m.logError("fusebox: Recover.Init failed; the breaker's Recover gets no state", "breaker", b.Name(), "error", err)
	}
	b.recState = st
}

// initPolicy runs r.Init, turning a panic into an error.
func initPolicy(r recover.Recover) (any, error) {
	var st any
	var err error
	if p := guard(func() { st, err = r.Init() }); p != nil {
		return nil, fmt.Errorf("%T.Init panicked: %v", r, p.value)
	}
	return st, err
}

// shutdown halts every breaker, so that calls get ErrStopped, and ends every
// subscription. It runs on the loop, or in its place once Stop has given up
// on a loop stuck in a callback (see abandon).
func (m *Manager) shutdown() {
	m.halted = true
	m.stopStores()
	m.mu.Lock()
	m.closed = true // no Register inserts a breaker any more
	m.mu.Unlock()
	for _, b := range m.all() {
		b.mach.Halt()
	}
	for _, sub := range m.subs {
		sub.end()
	}
	m.subs = nil
	m.stopTimer()
}

// closeDone marks the manager as stopped. It is called once the loop has
// returned, or by Stop in the place of a loop stuck in a callback.
func (m *Manager) closeDone() {
	m.doneOnce.Do(func() {
		freeNumber(m.number)
		close(m.done)
	})
}
