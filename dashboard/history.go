package dashboard

import (
	"sync"

	"github.com/fusebox-go/fusebox/manager"
)

// registeredGen is the generation a breaker is registered in (a breaker
// starts in generation 1): its first event carries registeredGen+1.
const registeredGen = 1

// history keeps the recent transitions of every breaker, from the manager's
// events, on its own goroutine, and tells the streams when one arrives.
type history struct {
	limit  int
	events <-chan manager.Event
	cancel func()
	syncc  chan chan struct{}
	quit   chan struct{}
	done   chan struct{}
	once   sync.Once

	mu      sync.Mutex
	byName  map[string]*ring
	changed chan struct{} // closed and replaced when a transition arrives
}

// ring is one breaker's last transitions, oldest first from start.
type ring struct {
	recs    []TransitionRecord
	start   int
	lastGen uint64
	missed  uint64
}

func startHistory(m *manager.Manager, limit, buffer int) *history {
	events, cancel := m.Subscribe(buffer)
	h := &history{
		limit:   limit,
		events:  events,
		cancel:  cancel,
		syncc:   make(chan chan struct{}),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
		byName:  make(map[string]*ring),
		changed: make(chan struct{}),
	}
	// Generations of the breakers already there, read after subscribing:
	// events at or below them are kept if they arrive but are no gap.
	for _, b := range m.Breakers() {
		h.byName[b.Name()] = &ring{lastGen: b.Snapshot().Gen}
	}
	go h.run()
	return h
}

func (h *history) run() {
	defer close(h.done)
	for {
		select {
		case ev, ok := <-h.events:
			if !ok {
				return
			}
			h.mu.Lock()
			h.add(ev)
			// Take what else is waiting before waking the streams, so a
			// burst of transitions makes one update.
			for i := len(h.events); i > 0; i-- {
				ev, ok := <-h.events
				if !ok {
					break
				}
				h.add(ev)
			}
			h.notifyLocked()
			h.mu.Unlock()
		case reply := <-h.syncc:
			h.mu.Lock()
			n := 0
			for i := len(h.events); i > 0; i-- {
				ev, ok := <-h.events
				if !ok {
					break
				}
				h.add(ev)
				n++
			}
			if n > 0 {
				h.notifyLocked()
			}
			h.mu.Unlock()
			close(reply)
		case <-h.quit:
			return
		}
	}
}

// add records ev; h.mu is held.
func (h *history) add(ev manager.Event) {
	r := h.byName[ev.Name]
	if r == nil {
		r = &ring{lastGen: registeredGen}
		h.byName[ev.Name] = r
	}
	if ev.Gen > r.lastGen {
		r.missed += ev.Gen - r.lastGen - 1
		r.lastGen = ev.Gen
	}
	rec := record(ev)
	if len(r.recs) < h.limit {
		r.recs = append(r.recs, rec)
		return
	}
	r.recs[r.start] = rec
	r.start = (r.start + 1) % len(r.recs)
}

func (h *history) notifyLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// sync returns once every event the manager had sent to the history before
// the call has been recorded.
func (h *history) sync() {
	reply := make(chan struct{})
	select {
	case h.syncc <- reply:
		<-reply
	case <-h.done:
	}
}

// read returns a copy of the breaker's transitions, oldest first, and how
// many it missed.
func (h *history) read(name string) ([]TransitionRecord, uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.byName[name]
	if r == nil {
		return []TransitionRecord{}, 0
	}
	out := make([]TransitionRecord, 0, len(r.recs))
	out = append(out, r.recs[r.start:]...)
	out = append(out, r.recs[:r.start]...)
	return out, r.missed
}

// wait returns a channel closed at the next transition.
func (h *history) wait() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

func (h *history) close() {
	h.once.Do(func() {
		close(h.quit)
		<-h.done
		h.cancel()
	})
}
