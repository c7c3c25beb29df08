package manager

import (
	"strconv"
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
)

var eventKindNames = [...]string{"transition", "store_lost", "store_restored", "removed", "reconfigured", "halted"}

// String returns the kind's name: "transition", "store_lost",
// "store_restored", "removed", "reconfigured" or "halted".
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
	// (Failure for a trip or a failed probe, Success for a probe that
	// closed the breaker, Ignore for a probe that gave its slot back), or
	// zero when no call caused it (a timer, a reset).
	Outcome classify.Outcome
	// At is when the transition happened, on the manager's clock.
	At time.Time
	// Cause says what made it happen.
	Cause breaker.Cause
	// Gen is the breaker's generation after the transition; a breaker's
	// events arrive with Gen growing by one, unless some were dropped.
	Gen uint64
}

// DefaultSubscribeBuffer is the buffer of a subscription asked for with a
// buffer below 1.
const DefaultSubscribeBuffer = 64

type subscriber struct {
	ch      chan Event
	dropped uint64
	ended   chan struct{} // closed by the loop once ch is closed
}

type subscribeReq struct {
	buffer int
	reply  chan *subscriber
}

// Subscribe returns a channel that receives every transition of every
// breaker of the manager, in the order the manager handled them, and a
// function that ends the subscription and closes the channel.
//
// Events wait in a buffer of the given size (below 1 means
// DefaultSubscribeBuffer). The manager never waits for a subscriber: when the
// buffer is full the event is dropped for that subscriber and counted in the
// breaker's Stats.DroppedEvents. The channel is closed when the subscription
// ends or the manager stops. Calling the returned function more than once,
// or after Stop, does nothing. Subscribing to a stopped manager returns a
// closed channel.
func (m *Manager) Subscribe(buffer int) (<-chan Event, func()) {
	if buffer < 1 {
		buffer = DefaultSubscribeBuffer
	}
	req := subscribeReq{buffer: buffer, reply: make(chan *subscriber, 1)}
	select {
	case m.subscribec <- req:
	case <-m.done:
		ch := make(chan Event)
		close(ch)
		return ch, func() {}
	}
	sub := <-req.reply
	var once sync.Once
	return sub.ch, func() {
		once.Do(func() {
			select {
			case m.unsubscribec <- sub:
			case <-m.done:
				return
			}
			// Return only once the channel is closed, so that a caller
			// may rely on it.
			select {
			case <-sub.ended:
			case <-m.done:
			}
		})
	}
}

func (m *Manager) emit(b *Breaker, s machine.Step) {
	if len(m.subs) == 0 {
		return
	}
	ev := Event{Name: b.Name(), Transition: s.Transition, Outcome: s.Outcome, At: s.At, Cause: s.Cause, Gen: s.Gen}
	for _, sub := range m.subs {
		select {
		case sub.ch <- ev:
		default:
			sub.dropped++
			b.dropped.Add(1)
		}
	}
}

func (m *Manager) subscribe(req subscribeReq) {
	sub := &subscriber{ch: make(chan Event, req.buffer), ended: make(chan struct{})}
	m.subs = append(m.subs, sub)
	req.reply <- sub
}

func (m *Manager) unsubscribe(sub *subscriber) {
	for i, s := range m.subs {
		if s == sub {
			m.subs = append(m.subs[:i], m.subs[i+1:]...)
			close(sub.ch)
			close(sub.ended)
			return
		}
	}
}
