package manager

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
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
	// Cause says what made it happen.
	Cause breaker.Cause
	// Gen is the breaker's generation after the transition; a breaker's
	// transitions arrive with Gen growing by one, unless some were
	// dropped. An event of another kind carries the generation of the
	// breaker's transition before it.
	Gen uint64
	// Missed is how many events of the same breaker this subscription lost
	// to a full buffer since the breaker's previous event it delivered:
	// they happened between that event and this one. Zero when none was
	// lost.
	Missed uint64
}

// defaultSubscribeBuffer is the buffer of a subscription asked for with a
// buffer below 1.
const defaultSubscribeBuffer = 64

// maxSubscribeBuffer is the largest buffer a subscription may ask for:
// about 30 MB of waiting events. Subscribe uses it for a larger buffer;
// Watch rejects one.
const maxSubscribeBuffer = 1 << 18

// WatchOptions configure a Watch. The zero value is valid: every event of
// every breaker, through a buffer of 64 events.
type WatchOptions struct {
	// Buffer is how many events may wait for the handler before the
	// manager drops them. Below 1 means 64; above 262,144 (1<<18) is an
	// error.
	Buffer int
	// Names, when not empty, limits the watch to the events of the
	// breakers of these names, registered now or later. Nil means every
	// breaker.
	Names []string
}

// Watch is a subscription to a manager's events whose events are handed,
// in order and in batches, to a function on a goroutine of the watch's
// own. Create one with Manager.Watch and end it with Close. Its methods are
// safe for concurrent use, except that the handler must not call Sync or
// Close of its own Watch.
type Watch struct {
	m      *Manager
	sub    *subscriber
	handle func([]Event)
	syncc  chan chan struct{}
	quit   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// Watch subscribes to the manager's events and calls handle with each
// batch of them, in the order the manager handled them, on a goroutine of
// the watch's own: a batch is an event and those that were already waiting
// behind it, so a burst of transitions costs one call. The slice is reused
// after handle returns. The manager never waits for the handler: events
// that find the buffer full are dropped, counted in Dropped and in the
// breaker's Stats.DroppedEvents, and reported by the Missed field of the
// breaker's next event the watch delivers.
//
// Watch fails if handle is nil or opts.Buffer is above 262,144 (1<<18).
// On a stopped manager it returns a watch that is already done.
func (m *Manager) Watch(opts WatchOptions, handle func([]Event)) (*Watch, error) {
	if handle == nil {
		return nil, errors.New("fusebox: Manager.Watch: the handler is nil")
	}
	sub, err := m.subscribeWith(opts)
	if err != nil {
		return nil, fmt.Errorf("fusebox: Manager.Watch: %w", err)
	}
	w := &Watch{
		m:      m,
		sub:    sub,
		handle: handle,
		syncc:  make(chan chan struct{}),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go w.run()
	return w, nil
}

func (w *Watch) run() {
	defer close(w.done)
	batch := make([]Event, 0, 64)
	for {
		select {
		case ev, ok := <-w.sub.ch:
			if !ok {
				return
			}
			w.drain(append(batch[:0], ev))
		case reply := <-w.syncc:
			w.drain(batch[:0])
			close(reply)
		case <-w.quit:
			// Hand over what was delivered before Close, so that a
			// consumer's last view includes it.
			w.drain(batch[:0])
			return
		}
	}
}

// drain adds to batch the events already waiting, and no more, and hands
// the batch over if it is not empty.
func (w *Watch) drain(batch []Event) {
	for i := len(w.sub.ch); i > 0; i-- {
		ev, ok := <-w.sub.ch
		if !ok {
			break
		}
		batch = append(batch, ev)
	}
	if len(batch) > 0 {
		w.handle(batch)
	}
}

// Sync returns once the handler has returned from every event the manager
// had delivered to the watch before the call. Call Manager.Sync first to
// include every event of what was asked of the manager before. After
// Close, or once the manager has stopped, Sync returns at once.
func (w *Watch) Sync() {
	reply := make(chan struct{})
	select {
	case w.syncc <- reply:
		<-reply
	case <-w.done:
	}
}

// Dropped returns how many events the manager dropped for this watch
// because its buffer was full.
func (w *Watch) Dropped() uint64 { return w.sub.dropped.Load() }

// Done returns a channel closed once the watch's goroutine has returned:
// after Close, or once the manager has stopped and the last events were
// handled.
func (w *Watch) Done() <-chan struct{} { return w.done }

// Close ends the subscription, hands the events already delivered to the
// handler, and returns once the watch's goroutine has returned. Calling it
// more than once does nothing more.
func (w *Watch) Close() {
	w.once.Do(func() {
		close(w.quit)
		<-w.done
		w.m.unsubscribeSub(w.sub)
	})
}

// subscriber is one subscription. Its channel is closed by whoever ends
// it first, under its lock, which the loop also holds while it offers an
// event: so ending a subscription never waits for the loop, however busy
// it is, and the loop never sends on a closed channel.
type subscriber struct {
	ch      chan Event
	names   map[string]struct{} // nil: every breaker
	dropped atomic.Uint64
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
// next event. The channel is closed when the subscription ends or
// the manager stops. Calling the returned function more than once, or after
// Stop, does nothing. Subscribing to a stopped manager returns a closed
// channel. Watch does the same with a per-breaker filter, a count of drops
// and a goroutine that hands the events to a function.
func (m *Manager) Subscribe(buffer int) (<-chan Event, func()) {
	sub, _ := m.subscribeWith(WatchOptions{Buffer: min(buffer, maxSubscribeBuffer)})
	var once sync.Once
	return sub.ch, func() { once.Do(func() { m.unsubscribeSub(sub) }) }
}

// subscribeWith makes the subscriber on the caller's goroutine, so that the
// loop never allocates a buffer a caller chose, and hands it to the loop.
func (m *Manager) subscribeWith(opts WatchOptions) (*subscriber, error) {
	buffer := opts.Buffer
	switch {
	case buffer > maxSubscribeBuffer:
		return nil, fmt.Errorf("buffer %d is above the largest, %d", buffer, maxSubscribeBuffer)
	case buffer < 1:
		buffer = defaultSubscribeBuffer
	}
	sub := &subscriber{ch: make(chan Event, buffer)}
	if len(opts.Names) > 0 {
		sub.names = make(map[string]struct{}, len(opts.Names))
		for _, n := range opts.Names {
			sub.names[n] = struct{}{}
		}
	}
	req := subscribeReq{sub: sub, reply: make(chan struct{})}
	select {
	case m.subscribec <- req:
		<-req.reply
	case <-m.done:
		sub.end()
	}
	return sub, nil
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
	}
	m.publish(b, ev)
}

// publish hands ev, an event of b, to every subscriber that wants it,
// without waiting: a full buffer drops the event for that subscriber and
// counts it.
func (m *Manager) publish(b *Breaker, ev Event) {
	kept := m.subs[:0]
	for _, sub := range m.subs {
		if sub.names != nil {
			if _, ok := sub.names[ev.Name]; !ok {
				kept = append(kept, sub)
				continue
			}
		}
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
			sub.dropped.Add(1)
			b.dropped.Add(1)
		}
		if ev.Kind == EventRemoved {
			// Nothing of this breaker follows; a drop of this very event
			// is counted in Dropped but cannot be reported later.
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
