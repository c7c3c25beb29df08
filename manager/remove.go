package manager

import (
	"fmt"
	"slices"

	"github.com/fusebox-go/fusebox/internal/machine"
)

type removeReq struct {
	name  string
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
// Once the manager has stopped, Remove does nothing and returns false.
func (m *Manager) Remove(name string) bool {
	m.started()
	req := removeReq{name: name, reply: make(chan bool, 1)}
	select {
	case m.removec <- req:
	case <-m.done:
		return false
	}
	return awaitReply(m, req.reply, false)
}

// remove is Remove on the loop. The machine is removed first, so that no
// caller can make a transition after it; a step some caller made before
// and has not handed over yet is dropped when it comes (handleNote).
func (m *Manager) remove(req removeReq) {
	b, ok := m.byName[req.name]
	if !ok {
		req.reply <- false
		return
	}
	b.removed = true
	b.mach.Remove()
	m.mu.Lock()
	delete(m.byName, req.name)
	if i := slices.Index(m.list, b); i >= 0 {
		m.list = slices.Delete(m.list, i, i+1)
	}
	m.mu.Unlock()
	b.early = nil
	m.timers.drop(b)
	if sh := b.fleet(); sh != nil {
		m.detach(sh)
	}
	s := b.mach.Snapshot()
	m.publish(b, Event{Kind: EventRemoved, Name: req.name, At: m.clk.Now(), Gen: s.Gen})
	m.logDebug("fusebox: breaker removed", "breaker", req.name, "state", s.State.String())
	req.reply <- true
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
