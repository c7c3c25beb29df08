package manager

import (
	"fmt"
	"time"

	"github.com/fusebox-go/fusebox/internal/machine"
)

// removeReq asks the loop to remove the breaker registered under name, or,
// when bs is not nil, each breaker of bs that is still registered (a
// Group's evictions, which go by handle: a name may have been registered
// again since).
type removeReq struct {
	name  string
	bs    []*Breaker
	reply chan bool
}

// Remove removes the breaker registered under name and reports whether
// there was one. The manager forgets it: its pending timers, its counters
// and, for a shared breaker, this process's mirror of the shared state go
// (the store's state, which other processes share, stays; a probe lease
// this process held lapses at its deadline). Subscribers get one last
// event of the breaker, of kind EventRemoved.
//
// Every call through the old handle then gets ErrRemoved (Acquire, Do,
// Call, ForceOpen, Reset, Reconfigure); releasing a permit granted before
// counts it as stale and changes nothing. The old handle's State keeps the
// state the breaker was in, and its Snapshot and Stats say Removed. The
// name may be registered again at once: that is a new breaker, closed, with
// fresh counts and a new handle.
//
// Remove takes the same time however many breakers the manager holds: it
// scans no list, and a timer the breaker had left is skipped when it comes
// due, as a timer of a generation that has passed is. Removing a breaker
// that is not shared does not wait for the manager's goroutine: the
// breaker is out of the registry and its handle removed when Remove
// returns, and the manager, told in order after the transitions already
// sent to it, publishes the EventRemoved (with the instant of the Remove)
// and forgets the rest; Sync waits for that.
//
// Once the manager has stopped, Remove does nothing and returns false.
func (m *Manager) Remove(name string) bool {
	m.started()
	b := m.registered(name)
	if b == nil {
		return false
	}
	if b.fleet() != nil {
		return m.removeReq(removeReq{name: name, reply: make(chan bool, 1)})
	}
	return m.removeLocal(b)
}

// removeAll removes each breaker of bs that is still registered.
func (m *Manager) removeAll(bs []*Breaker) {
	var shared []*Breaker
	for _, b := range bs {
		if b.fleet() != nil {
			shared = append(shared, b)
		} else {
			m.removeLocal(b)
		}
	}
	if len(shared) > 0 {
		m.removeReq(removeReq{bs: shared, reply: make(chan bool, 1)})
	}
}

// removeLocal is Remove of b, a breaker that is not shared, on the
// caller's goroutine: out of the registry, its machine removed so that no
// call can make a transition after it, and a note that tells the loop
// (removed). It reports false if b was no longer registered, or the
// manager has stopped.
func (m *Manager) removeLocal(b *Breaker) bool {
	m.mu.Lock()
	ok := !m.closed && m.unlistLocked(b)
	m.mu.Unlock()
	if !ok {
		return false
	}
	b.mach.Remove()
	m.send(note{b: b, kind: EventRemoved, step: machine.Step{At: m.clk.Now()}})
	return true
}

func (m *Manager) removeReq(req removeReq) bool {
	select {
	case m.removec <- req:
	case <-m.done:
		return false
	}
	return awaitReply(m, req.reply, false)
}

// remove is Remove of a shared breaker on the loop.
func (m *Manager) remove(req removeReq) {
	if req.bs != nil {
		for _, b := range req.bs {
			m.forget(b)
		}
		req.reply <- true
		return
	}
	b := m.registered(req.name)
	req.reply <- b != nil && m.forget(b)
}

// forget removes the registered breaker b on the loop, and reports false
// if b was no longer registered. The machine is removed first, so that no
// caller can make a transition after it; a step some caller made before
// and has not handed over yet is dropped when it comes (handleNote), and
// its deadlines when they come due (runDue).
func (m *Manager) forget(b *Breaker) bool {
	m.mu.Lock()
	ok := m.unlistLocked(b)
	m.mu.Unlock()
	if !ok {
		return false
	}
	b.mach.Remove()
	m.removed(b, m.clk.Now())
	return true
}

// unlistLocked takes b out of the registry, if it is registered, and
// reports whether it was. A group's breaker is counted out of its group
// here, as it leaves the registry.
func (m *Manager) unlistLocked(b *Breaker) bool {
	name := b.Name()
	if m.byName[name] != b {
		return false
	}
	delete(m.byName, name)
	m.list[b.slot] = nil
	m.holes++
	if m.holes > 64 && m.holes > len(m.list)/2 {
		m.compactLocked()
	}
	if b.owner != nil {
		b.owner.size.Add(-1)
	}
	return true
}

// removed is the loop's part of removing b, at the instant at: b's notes
// and deadlines are dropped from now on, and subscribers get the
// EventRemoved.
func (m *Manager) removed(b *Breaker, at time.Time) {
	b.removed = true
	delete(m.early, b)
	m.goneTimers++
	if m.goneTimers > 64 && m.goneTimers > len(m.timers)/2 {
		// Enough removals that the deadlines they left may be half of
		// the heap: drop them, so that a removed breaker is not kept
		// alive until its last timer, in O(1) a removal amortized.
		m.timers.dropRemoved()
		m.goneTimers = 0
	}
	if sh := b.fleet(); sh != nil {
		m.detach(sh)
	}
	s := b.mach.Snapshot()
	m.publish(b, Event{Kind: EventRemoved, Name: b.Name(), At: at, Gen: s.Gen})
	m.logDebug("fusebox: breaker removed", "breaker", b.Name(), "state", s.State.String())
}

// registered returns the breaker registered under name, or nil.
func (m *Manager) registered(name string) *Breaker {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.byName[name]
}

func (m *Manager) compactLocked() {
	if m.holes == 0 {
		return
	}
	kept := m.list[:0]
	for _, b := range m.list {
		if b != nil {
			b.slot = len(kept)
			kept = append(kept, b)
		}
	}
	clear(m.list[len(kept):])
	m.list = kept
	m.holes = 0
}

// haltedErr is what a call through b gets once it is out of service.
func (b *Breaker) haltedErr(s *machine.Snapshot) error {
	if s.Removed {
		return removedError{name: b.Name()}
	}
	return ErrStopped
}

// removedError is ErrRemoved for one breaker, which it names: a program
// that removes breakers has more than one, and a log line of a call that
// failed must say which.
type removedError struct{ name string }

func (e removedError) Error() string {
	return fmt.Sprintf("fusebox: breaker %q removed (Manager.Remove): this handle stays removed; a breaker registered again under the name has a new one", e.name)
}

// Is reports whether target is ErrRemoved.
func (e removedError) Is(target error) bool { return target == ErrRemoved }
