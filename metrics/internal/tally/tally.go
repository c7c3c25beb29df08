// Package tally counts the transitions of a manager's breakers from its
// events, for the metrics adapters. The manager counts calls itself
// (Breaker.Stats), but not transitions: those are events, and an adapter
// that wants them as counters has to count them.
//
// A Tally is a watch (internal/watch) that counts every event, so the manager's loop
// only pays for one more buffered send and the calls through a breaker pay
// nothing. Events lost because the watch's buffer was full are reported by
// the manager in the Missed field of the breaker's next event, and counted
// as missed. A removed breaker's counts go with it.
package tally

import (
	"sync"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/internal/watch"
	"github.com/fusebox-go/fusebox/manager"
)

// Local are the transitions a breaker whose state lives in its process can
// make, in the order the adapters export them: the state diagram's (a
// trip, an open period's end, a probe that starts, succeeds, fails, is
// ignored or outlives its time) and what a ForceOpen (from half_open and
// probing too) and a Reset or a supervisor's restart (to closed from each
// other state) add. A closed breaker does not become half_open or probing,
// nor an open one probing, without an open period's end between them.
// TestLocalIsWhatTheMachineMakes derives the set from the state machine.
var Local = []breaker.Transition{
	{From: breaker.Closed, To: breaker.Open},
	{From: breaker.Open, To: breaker.HalfOpen},
	{From: breaker.Open, To: breaker.Closed},
	{From: breaker.HalfOpen, To: breaker.Probing},
	{From: breaker.HalfOpen, To: breaker.Open},
	{From: breaker.HalfOpen, To: breaker.Closed},
	{From: breaker.Probing, To: breaker.Closed},
	{From: breaker.Probing, To: breaker.Open},
	{From: breaker.Probing, To: breaker.HalfOpen},
}

// Shared are the transitions a breaker shared through a store can make:
// every pair of different states, since it also follows the fleet's state
// (a closed process hears of another's probe, an open one of a lease taken
// elsewhere), in the order the adapters export them.
var Shared = func() []breaker.Transition {
	states := [...]breaker.State{breaker.Closed, breaker.Open, breaker.HalfOpen, breaker.Probing}
	var out []breaker.Transition
	for _, from := range states {
		for _, to := range states {
			if from != to {
				out = append(out, breaker.Transition{From: from, To: to})
			}
		}
	}
	return out
}()

// Possible returns the transitions a breaker can make, shared through a
// store or not: the ones an adapter exports from zero. The caller must
// not modify the slice.
func Possible(shared bool) []breaker.Transition {
	if shared {
		return Shared
	}
	return Local
}

// DefaultBuffer is the subscription buffer used for a buffer below 1.
const DefaultBuffer = 1024

// Counts are one breaker's transitions seen by a Tally.
type Counts struct {
	// Transitions counts each transition seen, by its from and to states
	// (breaker.State values index the arrays; index 0 is unused).
	Transitions [5][5]uint64
	// Missed counts the transitions the Tally did not see because its
	// subscription's buffer was full. A loss is reported with the
	// breaker's next event, so it is counted once that arrives.
	Missed uint64
}

// Of returns the count of one transition.
func (c *Counts) Of(tr breaker.Transition) uint64 {
	if !inCycle(tr.From) || !inCycle(tr.To) {
		return 0
	}
	return c.Transitions[tr.From][tr.To]
}

// inCycle reports whether s is one of the four states, which index
// Counts.Transitions.
func inCycle(s breaker.State) bool { return s >= breaker.Closed && s <= breaker.Probing }

// Tally counts transitions. Create one with Start and end it with Close.
type Tally struct {
	w *watch.Watch

	mu     sync.Mutex
	byName map[string]*Counts
}

// Start watches m's events with the given buffer (below 1 means
// DefaultBuffer) and counts them from now on. It fails if the buffer is
// above 262,144 (1<<18).
func Start(m *manager.Manager, buffer int) (*Tally, error) {
	if buffer < 1 {
		buffer = DefaultBuffer
	}
	t := &Tally{byName: make(map[string]*Counts)}
	w, err := watch.Start(m, buffer, t.count)
	if err != nil {
		return nil, err
	}
	t.w = w
	return t, nil
}

func (t *Tally) count(batch []manager.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ev := range batch {
		if ev.Kind == manager.EventRemoved {
			delete(t.byName, ev.Name)
			continue
		}
		c := t.byName[ev.Name]
		if c == nil {
			c = new(Counts)
			t.byName[ev.Name] = c
		}
		c.Missed += ev.Missed
		if tr := ev.Transition; ev.Kind == manager.EventTransition && inCycle(tr.From) && inCycle(tr.To) {
			c.Transitions[tr.From][tr.To]++
		}
	}
}

// Sync returns once every event the manager had sent to the Tally before
// the call is counted. After Close it returns at once.
func (t *Tally) Sync() { t.w.Sync() }

// Get returns the counts of the breaker named name, as of now: call Sync
// first to include every event sent before.
func (t *Tally) Get(name string) Counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.byName[name]; c != nil {
		return *c
	}
	return Counts{}
}

// Counts returns a copy of every breaker's counts, by name, including every
// event the manager had sent to the Tally when Counts was called. After
// Close, or once the manager has stopped, it returns the last counts.
func (t *Tally) Counts() map[string]Counts {
	t.w.Sync()
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]Counts, len(t.byName))
	for name, c := range t.byName {
		out[name] = *c
	}
	return out
}

// Close ends the subscription and waits for the Tally's goroutine to
// return. Calling it more than once does nothing more.
func (t *Tally) Close() { t.w.Close() }
