package manager

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fusebox-go/fusebox/breaker"
	"github.com/fusebox-go/fusebox/classify"
	"github.com/fusebox-go/fusebox/internal/machine"
)

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventTransition is a change of state, which Transition describes. It
	// is the zero EventKind.
	EventTransition EventKind = iota
	// EventStoreLost says that a shared breaker lost its store and now
	// follows its fallback. It is not a transition: Transition is zero.
	EventStoreLost
	// EventStoreRestored says that a shared breaker reached its store
	// again and follows the fleet's state. Transition is zero.
	EventStoreRestored
	// EventRemoved says that the breaker was removed from the manager
	// (Manager.Remove); no event of that breaker follows it.
	EventRemoved
	// EventReconfigured says that the breaker's Config was changed
	// (Breaker.Reconfigure).
	EventReconfigured
	// EventHalted says that the manager stopped for good after a burst of
	// restarts; it is sent once for every breaker.
	EventHalted
	// EventQuorumShort is a warning about a shared breaker's
	// Config.Quorum: the fleet's failures reached the threshold, and the
	// quorum refused the opening because fewer processes reported them
	// (Err says how many, and the quorum). One bad replica is what a
	// quorum is for; a fleet of fewer processes than the Quorum can
	// never open. Sent once per breaker (again after a Reconfigure).
	// Transition is zero.
	EventQuorumShort
)

var eventKindNames = [...]string{"transition", "store_lost", "store_restored", "removed", "reconfigured", "halted", "quorum_short"}

// String returns the kind's name: "transition", "store_lost",
// "store_restored", "removed", "reconfigured", "halted" or
// "quorum_short".
func (k EventKind) String() string {
	if int(k) < len(eventKindNames) {
		return eventKindNames[k]
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one transition of one breaker, or another change in its life
// that Kind names, as delivered by Subscribe.
type Event struct {
	// Kind says what the event reports; the zero value, EventTransition,
	// is a change of state.
	Kind EventKind
	// Name is the breaker's name.
	Name string
	// Transition is the change of state.
	Transition breaker.Transition
	// Outcome is the outcome of the call that caused the transition
	// (for a trip, the call that reached the threshold: a Failure, or a
	// Success that brought a rate strategy's window to it; Failure for a
	// failed probe, Success for a probe that closed the breaker, Ignore
	// for a probe that gave its slot back), or zero when no call caused it
	// (a timer, a reset).
	Outcome classify.Outcome
	// At is when the transition happened, on the manager's clock.
	At time.Time
	// Until, for a transition to open, is when its open period ends (zero
	// while forced open, and while a shared breaker's store is away and its
	// fallback holds it open); for a transition to probing, when the
	// probe's time runs out. Zero for other transitions and other kinds.
	Until time.Time
	// Cause says what made the transition happen; zero for an event of
	// another kind, which Kind says all of.
	Cause breaker.Cause
	// Gen is the breaker's generation after the transition; a breaker's
	// transitions arrive with Gen growing by one, unless some were
	// dropped. An event of another kind carries the generation of the
	// breaker's transition before it.
	Gen uint64
	// Err, for a transition to open by a trip or a failed probe, is the
	// error of the call that caused it, when that call was released with
	// one (Permit.Release, Do, Call). For a shared breaker that another
	// process opened, it is a *breaker.OpenedError: that process's name
	// (Options.Name) and its error's text, as the store carried them. Nil
	// otherwise. It is the Cause of the *breaker.OpenError the calls
	// declined in the open period get.
	Err error
	// Missed is how many events of the same breaker this subscription lost
	// to a full buffer since the breaker's previous event it delivered:
	// they happened between that event and this one. Zero when none was
	// lost.
	Missed uint64
}

// String returns the event as a line of a log says it: the breaker's
// name and, for a transition, the change of state and its cause
// ("payments: closed->open (trip)"); for an event of another kind, which
// has no transition, the kind ("payments: store_lost"). Events lost
// before it to a full buffer are counted at the end ("3 missed before").
func (e Event) String() string {
	var b strings.Builder
	b.WriteString(e.Name)
	b.WriteString(": ")
	if e.Kind == EventTransition {
		b.WriteString(e.Transition.String())
		b.WriteString(" (")
		b.WriteString(e.Cause.String())
		b.WriteString(")")
	} else {
		b.WriteString(e.Kind.String())
	}
	if e.Missed > 0 {
		b.WriteString(", ")
		b.WriteString(strconv.FormatUint(e.Missed, 10))
		b.WriteString(" missed before")
	}
	return b.String()
}

// defaultSubscribeBuffer is the buffer of a subscription asked for with a
// buffer below 1.
const defaultSubscribeBuffer = 64

// maxSubscribeBuffer is the largest buffer a subscription may ask for:
// about 30 MB of waiting events. Subscribe uses it for a larger buffer;
// internal/watch refuses one (watch.MaxBuffer, held to this by a test).
const maxSubscribeBuffer = 1 << 18

// subscriber is one subscription. Its channel is closed by whoever ends
// it first, under its lock, which the loop also holds while it offers an
// event: so ending a subscription never waits for the loop, however busy
// it is, and the loop never sends on a closed channel.
type subscriber struct {
	ch chan Event
	// missed counts, per breaker, the events dropped since its last one
	// delivered; owned by the loop.
	missed map[*Breaker]uint64

	mu     sync.Mutex
	closed bool // ch is closed: the subscription ended
}

// end ends the subscription: it closes the channel, unless it is closed
// already.
func (s *subscriber) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.ch)
	}
}

// offer hands e to the subscriber without waiting. It reports whether e
// was delivered, and whether the subscription has ended.
func (s *subscriber) offer(e Event) (sent, ended bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, true
	}
	select {
	case s.ch <- e:
		return true, false
	default:
		return false, false
	}
}

type subscribeReq struct {
	sub   *subscriber
	reply chan struct{}
}

// Subscribe returns a channel that receives every event of every breaker
// of the manager, in the order the manager handled them, and a function
// that ends the subscription and closes the channel.
//
// Events wait in a buffer of the given size (below 1 means 64; above
// 262,144, 1<<18 or about 30 MB of waiting events, means 262,144). The
// manager never waits for a subscriber: when the buffer is full the event
// is dropped for that subscriber, counted in the breaker's
// Stats.DroppedEvents and reported in the Missed field of the breaker's
// next event. The channel is closed when the subscription ends or the
// manager stops. Calling the returned function more than once, or after
// Stop, does nothing. Subscribing to a stopped manager returns a closed
// channel.
func (m *Manager) Subscribe(buffer int) (<-chan Event, func()) {
	m.started()
	sub := m.subscribeBuffer(buffer)
	var once sync.Once
	return sub.ch, func() { once.Do(func() { m.unsubscribeSub(sub) }) }
}

// subscribeBuffer makes the subscriber on the caller's goroutine, so that
// the loop never allocates a buffer a caller chose, and hands it to the
// loop.
func (m *Manager) subscribeBuffer(buffer int) *subscriber {
	switch {
	case buffer > maxSubscribeBuffer:
		buffer = maxSubscribeBuffer
	case buffer < 1:
		buffer = defaultSubscribeBuffer
	}
	sub := &subscriber{ch: make(chan Event, buffer)}
	req := subscribeReq{sub: sub, reply: make(chan struct{})}
	select {
	case m.subscribec <- req:
		<-req.reply
	case <-m.done:
		sub.end()
	}
	return sub
}

// unsubscribeSub ends sub: its channel is closed when it returns. It does
// not wait for the loop, which drops the subscriber the next time it
// publishes.
func (m *Manager) unsubscribeSub(sub *subscriber) { sub.end() }

// emitKind publishes step s of b as an event of kind k; until is when the
// state the step entered ends, if its timer is known. An event that is not
// a transition has a zero Transition.
func (m *Manager) emitKind(b *Breaker, s machine.Step, k EventKind, until time.Time) {
	if len(m.subs) == 0 {
		return
	}
	ev := Event{Kind: k, Name: b.Name(), Transition: s.Transition, Outcome: s.Outcome, At: s.At, Cause: s.Cause, Gen: s.Gen}
	if k != EventTransition {
		ev.Transition = breaker.Transition{}
	} else if s.To == breaker.Open || s.To == breaker.Probing {
		ev.Until = until
		if s.To == breaker.Open {
			ev.Err = s.Err
		}
	}
	m.publish(b, ev)
}

// publish hands ev, an event of b, to every subscriber that wants it,
// without waiting: a full buffer drops the event for that subscriber and
// counts it.
func (m *Manager) publish(b *Breaker, ev Event) {
	kept := m.subs[:0]
	for _, sub := range m.subs {
		e := ev
		if len(sub.missed) > 0 {
			e.Missed = sub.missed[b]
		}
		sent, ended := sub.offer(e)
		switch {
		case ended:
			continue // unsubscribed: dropped from the list
		case sent:
			if e.Missed > 0 {
				delete(sub.missed, b)
			}
		default:
			if sub.missed == nil {
				sub.missed = make(map[*Breaker]uint64)
			}
			sub.missed[b]++
			b.dropped.Add(1)
		}
		if ev.Kind == EventRemoved {
			// Nothing of this breaker follows; a drop of this very event
			// is counted in the breaker's stats but cannot be reported
			// later.
			delete(sub.missed, b)
		}
		kept = append(kept, sub)
	}
	clear(m.subs[len(kept):])
	m.subs = kept
}

func (m *Manager) subscribe(req subscribeReq) {
	m.subs = append(m.subs, req.sub)
	close(req.reply)
}
