// Package tally counts the transitions of a manager's breakers from its
// events, for the metrics adapters. The manager counts calls itself
// (Breaker.Stats), but not transitions: those are events, and an adapter
// that wants them as counters has to count them.
//
// A Tally subscribes to the manager and counts every event on its own
// goroutine, so the manager's loop only pays for one more buffered send and
// the calls through a breaker pay nothing. Events lost because the
// subscription's buffer was full are found from the gaps in each breaker's
// generation numbers and counted as missed.
package tally

import (
	"sync"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/manager"
)

// DefaultBuffer is the subscription buffer used for a buffer below 1.
const DefaultBuffer = 1024

// registeredGen is the generation a breaker is registered in (a breaker
// starts in generation 1): its first event carries registeredGen+1.
const registeredGen = 1

// Counts are one breaker's transitions seen by a Tally.
type Counts struct {
	// Transitions counts each transition seen.
	Transitions map[breaker.Transition]uint64
	// Missed counts the transitions the Tally did not see because its
	// subscription's buffer was full. A lost transition is found as a gap
	// in the generation numbers, so it is counted once the breaker's next
	// transition arrives.
	Missed uint64
}

type counts struct {
	lastGen     uint64
	transitions map[breaker.Transition]uint64
	missed      uint64
}

// Tally counts transitions. Create one with Start and end it with Close.
type Tally struct {
	events <-chan manager.Event
	cancel func()
	syncc  chan chan struct{}
	quit   chan struct{}
	done   chan struct{}
	once   sync.Once

	mu     sync.Mutex
	byName map[string]*counts
}

// Start subscribes to m's events with the given buffer (below 1 means
// DefaultBuffer) and counts them from now on.
func Start(m *manager.Manager, buffer int) *Tally {
	if buffer < 1 {
		buffer = DefaultBuffer
	}
	events, cancel := m.Subscribe(buffer)
	t := &Tally{
		events: events,
		cancel: cancel,
		syncc:  make(chan chan struct{}),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
		byName: make(map[string]*counts),
	}
	// The generations of the breakers already registered, read after
	// subscribing: an event numbered at or below them happened before this
	// point and is counted if it arrives, but does not count as a gap.
	for _, b := range m.Breakers() {
		t.byName[b.Name()] = &counts{lastGen: b.Snapshot().Gen}
	}
	go t.run()
	return t
}

func (t *Tally) run() {
	defer close(t.done)
	for {
		select {
		case ev, ok := <-t.events:
			if !ok {
				return
			}
			t.count(ev)
		case reply := <-t.syncc:
			// Every event sent before the caller asked is either counted
			// already or waiting in the channel.
			t.drain()
			close(reply)
		case <-t.quit:
			// Count what was delivered before Close, so that the last
			// counts include it.
			t.drain()
			return
		}
	}
}

// drain counts the events waiting in the channel, and no more.
func (t *Tally) drain() {
	for i := len(t.events); i > 0; i-- {
		ev, ok := <-t.events
		if !ok {
			return
		}
		t.count(ev)
	}
}

func (t *Tally) count(ev manager.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.byName[ev.Name]
	if c == nil {
		c = &counts{lastGen: registeredGen}
		t.byName[ev.Name] = c
	}
	if c.transitions == nil {
		c.transitions = make(map[breaker.Transition]uint64)
	}
	c.transitions[ev.Transition]++
	if ev.Gen > c.lastGen {
		c.missed += ev.Gen - c.lastGen - 1
		c.lastGen = ev.Gen
	}
}

// Counts returns a copy of every breaker's counts, by name, including every
// event the manager had sent to the Tally when Counts was called. After
// Close, or once the manager has stopped, it returns the last counts.
func (t *Tally) Counts() map[string]Counts {
	reply := make(chan struct{})
	select {
	case t.syncc <- reply:
		<-reply
	case <-t.done:
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]Counts, len(t.byName))
	for name, c := range t.byName {
		tr := make(map[breaker.Transition]uint64, len(c.transitions))
		for k, v := range c.transitions {
			tr[k] = v
		}
		out[name] = Counts{Transitions: tr, Missed: c.missed}
	}
	return out
}

// Close ends the subscription and waits for the Tally's goroutine to
// return. Calling it more than once does nothing more.
func (t *Tally) Close() {
	t.once.Do(func() {
		close(t.quit)
		<-t.done
		t.cancel()
	})
}
