// Package watch hands a manager's events, in order and in batches, to a
// function on a goroutine of its own. It is the one subscription that
// eventlog, the dashboard and the metrics adapters are built on, and it
// is built on manager.Manager.Subscribe alone: a burst of transitions costs
// the consumer one call, and the manager's loop one buffered send per
// event, as for any subscriber.
package watch

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/fusebox-go/fusebox/manager"
)

// MaxBuffer is the largest buffer Start accepts: the largest Subscribe
// gives, about 30 MB of waiting events.
const MaxBuffer = 1 << 18

// Watch is a subscription whose events are handed to a function. Create
// one with Start and end it with Close. Its methods are safe for concurrent
// use, except that the handler must not call Sync or Close of its own
// Watch.
type Watch struct {
	events  <-chan manager.Event
	stop    func()
	handle  func([]manager.Event)
	dropped atomic.Uint64
	syncc   chan chan struct{}
	quit    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// Start subscribes to m's events, through a buffer of the given size (below
// 1 means Subscribe's default), and calls handle with each batch of them,
// in the order the manager handled them, on a goroutine of the watch's
// own: a batch is an event and those that were already waiting behind it.
// The slice is reused after handle returns. The manager never waits for
// the handler: events that find the buffer full are dropped, counted in
// the breaker's Stats.DroppedEvents, and reported by the Missed field of
// the breaker's next event the watch hands over (and then in Dropped).
//
// Start fails if handle is nil or buffer is above MaxBuffer, with an error
// for its caller to wrap with the option at fault. On a stopped manager it
// returns a watch that is already done.
func Start(m *manager.Manager, buffer int, handle func([]manager.Event)) (*Watch, error) {
	switch {
	case handle == nil:
		return nil, errors.New("the handler is nil")
	case buffer > MaxBuffer:
		return nil, fmt.Errorf("buffer %d is above the largest, %d", buffer, MaxBuffer)
	}
	events, stop := m.Subscribe(buffer)
	w := &Watch{
		events: events,
		stop:   stop,
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
	batch := make([]manager.Event, 0, 64)
	for {
		select {
		case ev, ok := <-w.events:
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
func (w *Watch) drain(batch []manager.Event) {
	for i := len(w.events); i > 0; i-- {
		ev, ok := <-w.events
		if !ok {
			break
		}
		batch = append(batch, ev)
	}
	if len(batch) == 0 {
		return
	}
	var missed uint64
	for i := range batch {
		missed += batch[i].Missed
	}
	if missed > 0 {
		w.dropped.Add(missed)
	}
	w.handle(batch)
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
// because its buffer was full, as reported so far: a loss is reported with
// the breaker's next event the watch hands over (Event.Missed), and counted
// before the handler gets it.
func (w *Watch) Dropped() uint64 { return w.dropped.Load() }

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
		w.stop()
	})
}
